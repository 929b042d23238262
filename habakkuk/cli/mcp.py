"""`habakkuk mcp ...`: the actions of habakkuk.protocols.mcp.cli, and `mcp serve`, which
opens the whole runtime (above the protocols' layer, so here)."""

from __future__ import annotations

import argparse

from habakkuk.cli.common import open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK


def add_arguments(command: str, mcp: argparse.ArgumentParser) -> None:
    """Declare the actions of `habakkuk mcp` (habakkuk.protocols.mcp.cli's)."""
    from habakkuk.protocols.mcp.cli import add_actions

    add_actions(mcp)


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk mcp ACTION` (the exit code)."""
    if getattr(args, "mcp_command", None) == "serve":
        return mcp_serve(args)
    from habakkuk.protocols.mcp import cli as mcp_cli

    return mcp_cli.main(args)


def mcp_serve(args: argparse.Namespace) -> int:
    """`habakkuk mcp serve`: the runtime with its workers, spoken to over MCP on stdio."""
    return run_async(_mcp_serve())


async def _mcp_serve() -> int:
    import logging

    from habakkuk.engine.logsetup import console_logging
    from habakkuk.protocols.mcp.server import serve_stdio

    # stdout carries the protocol: every log line goes to stderr
    with console_logging(logging.WARNING, "%(levelname)s:%(name)s:%(message)s"):
        runtime = await open_runtime()
        try:
            # Turns only: the chat bots belong to `habakkuk serve`, as with `habakkuk run`.
            runtime.start_workers(channels=False)
            await serve_stdio(runtime)
        finally:
            await runtime.close()
    return EXIT_OK
