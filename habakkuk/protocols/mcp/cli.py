"""`habakkuk mcp ...`: the argument parser (standard library only) and the commands.

The commands import the SDK and the runtime lazily, so `habakkuk --help` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_actions(mcp: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk mcp` (habakkuk.cli.mcp declares the command itself)."""
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION")
    actions.add_parser("status", help="each server's status and tools (the default)")
    actions.add_parser("serve", help="serve Habakkuk's agents over MCP on stdin/stdout")
    catalog = actions.add_parser("catalog", help="well-known MCP servers Habakkuk can add")
    catalog.add_argument("query", nargs="*", help="words to look for")
    add = actions.add_parser("add", help="add a catalog server to config.yaml")
    add.add_argument("entry", help="the catalog entry")
    add.add_argument("params", nargs="*", metavar="param=value", help="fills {param} placeholders")
    add.add_argument("--name", help="store it under this name (default: the entry's)")
    login = actions.add_parser("login", help="sign in to an `auth: oauth` server")
    login.add_argument("server")
    login.add_argument("--device", action="store_true", help="use the device flow")
    login.add_argument("--no-browser", action="store_true", help="print the URL, open nothing")
    logout = actions.add_parser("logout", help="forget an `auth: oauth` server's tokens")
    logout.add_argument("server")


def main(args: argparse.Namespace) -> int:
    """Run the chosen `mcp` action; returns the exit code."""
    import asyncio  # here, not at the top: `habakkuk --help` builds this parser

    action = getattr(args, "mcp_command", None) or "status"
    if action == "status":
        return asyncio.run(status())
    # `serve` opens the whole runtime: habakkuk.cli.mcp runs it (above this layer).
    if action == "catalog":
        from .catalog import print_catalog

        return print_catalog(" ".join(args.query))
    if action == "add":
        from .catalog import add_command

        return add_command(_home(), args.entry, args.params, args.name)
    if action == "login":
        from .oauth import login_command

        return asyncio.run(login_command(_home(), args.server, args.device, args.no_browser))
    if action == "logout":
        from .oauth import logout_command

        return logout_command(_home(), args.server)
    raise AssertionError(action)


def _home() -> Any:
    from habakkuk.engine.home import Home, default_home

    return Home(default_home())


async def status() -> int:
    """Connect to every server (at most 20 s in all) and print each one's state and tools."""
    from habakkuk.engine.config import load_config
    from habakkuk.engine.secrets import home_environment

    from .checks import reach_line
    from .manager import START_WAIT, McpManager
    from .transport import missing_variables

    home = _home()
    config = load_config(home)
    if not config.mcp_servers:
        print("no MCP servers configured (add one: habakkuk mcp catalog, habakkuk mcp add NAME)")
        return 0
    env = home_environment(home, config)
    manager = McpManager(config, env, home)
    try:
        await manager.start(START_WAIT)
        failed = False
        for item in manager.status():
            server = config.mcp_servers[item.name]
            where = server.command if server.command is not None else server.url
            print(f"{item.name}  [{item.transport}] {where}")
            print(f"  {reach_line(config, item.name)}")
            if item.state == "up":
                print(f"  up: {len(item.tools)} tools (toolset mcp:{item.name})")
                for real, tool in sorted(manager.links[item.name].tools.items()):
                    note = " (asks first)" if real in server.approve else ""
                    print(f"    {tool.name}{note}")
            else:
                failed = True
                state = "still connecting" if item.state == "connecting" else "down"
                print(f"  {state}: {item.error or 'no answer yet'}")
            missing = missing_variables(server, env)
            if missing:
                print(f"  missing variables: {', '.join(missing)} (set them in {home.env_path})")
    finally:
        await manager.close()
    return 1 if failed else 0
