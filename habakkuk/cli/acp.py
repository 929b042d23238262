"""`habakkuk acp [--agent A]`: Habakkuk as an editor's agent over the Agent Client Protocol
on stdio (habakkuk.protocols.acp); the editor starts it (Zed's agent_servers, Toad)."""

from __future__ import annotations

import argparse

from habakkuk.cli.common import open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Declare `habakkuk acp`'s options."""
    parser.add_argument(
        "--agent", metavar="A", help="the agent of new sessions (default: the default agent)"
    )


def main(args: argparse.Namespace) -> int:
    """Run `habakkuk acp` until the editor closes the connection (the exit code)."""
    return run_async(_serve(getattr(args, "agent", None)))


async def _serve(agent: str | None) -> int:
    import importlib.util
    import logging

    from habakkuk.engine.errors import HabakkukError

    if importlib.util.find_spec("acp") is None:
        raise HabakkukError.said("acp.not_installed")

    from habakkuk.engine.logsetup import console_logging
    from habakkuk.protocols.acp.serve import serve_stdio

    # stdout carries the protocol: every log line goes to stderr
    with console_logging(logging.WARNING, "%(levelname)s:%(name)s:%(message)s"):
        runtime = await open_runtime()
        try:
            runtime.config.agent(agent)  # an unknown agent: one line, before the editor talks
            # Turns only: the chat bots belong to `habakkuk serve`, as with `mcp serve`.
            runtime.start_workers(channels=False)
            await serve_stdio(runtime, agent)
        finally:
            await runtime.close()
    return EXIT_OK
