"""`habakkuk serve` (or `--serve`): every worker, headless, until SIGINT or SIGTERM.

`--agents a,b` (or `serve: {agents: [a, b]}` in config.yaml; the flag wins) makes this
process host only those agents: their turns are claimed here and nowhere else that
does not host them, so a turn runs where its agent's folder is. Several processes
may host one agent when its folder is on a filesystem they share.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_OK

if TYPE_CHECKING:
    from habakkuk.engine.config import Config


def add_arguments(command: str, serve: argparse.ArgumentParser) -> None:
    """`habakkuk serve [--agents a,b]`."""
    serve.add_argument(
        "--agents",
        metavar="A,B",
        # Not set unless given: `habakkuk --agents a serve` keeps the top-level value.
        default=argparse.SUPPRESS,
        help="host only these agents (their turns run here; default: all)",
    )


def main(args: argparse.Namespace) -> int:
    """`habakkuk --serve`: every worker, until SIGINT or SIGTERM."""
    return run_async(_serve(getattr(args, "agents", None)))


def hosting(config: Config, flag: str | None) -> Config:
    """`config` with serve.agents set from `--agents` (which wins over the file's);
    ConfigError (exit 2) for an agent that is not configured."""
    from habakkuk.engine.config import hosted_agents

    if flag is not None:
        config.serve.agents = hosted_agents(config, flag.split(","), "--agents")
    return config


async def _serve(agents: str | None) -> int:
    import asyncio
    import logging

    from habakkuk.engine.config import load_config
    from habakkuk.engine.logsetup import console_logging
    from habakkuk.runtime import Runtime

    # Warnings to stderr as before; every record from INFO to habakkuk.log (Runtime.open).
    console_logging(logging.WARNING)
    home = current_home()
    runtime = await Runtime.open(home, hosting(load_config(home), agents))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await runtime.start_mcp()  # MCP servers first (at most 20 s; slow ones keep trying)
        runtime.start_workers(maintenance=True)
        hosted = ", ".join(runtime.config.serve.agents or ["every agent"])
        print(
            f"habakkuk: serving {runtime.home.root} (pid {os.getpid()} on"
            f" {runtime.nodes.host}, {runtime.storage.describe()}; hosting {hosted})",
            file=sys.stderr,
            flush=True,
        )
        if runtime.config.http is not None:
            await runtime.http.serve(lambda line: print(f"habakkuk: {line}", file=sys.stderr))
        await stop.wait()
        print("habakkuk: shutting down", file=sys.stderr, flush=True)
    finally:
        await runtime.close()
    return EXIT_OK
