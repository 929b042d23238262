"""`habakkuk serve` (or `--serve`): every worker, headless, until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from habakkuk.cli.common import open_runtime, run_async
from habakkuk.engine.exit_codes import EXIT_OK


def add_arguments(command: str, serve: argparse.ArgumentParser) -> None:
    """`habakkuk serve` takes no arguments."""


def main(args: argparse.Namespace) -> int:
    """`habakkuk --serve`: every worker, until SIGINT or SIGTERM."""
    return run_async(_serve())


async def _serve() -> int:
    import asyncio
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    runtime = await open_runtime()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await runtime.start_mcp()  # MCP servers first (at most 20 s; slow ones keep trying)
        runtime.start_workers(maintenance=True)
        print(
            f"habakkuk: serving {runtime.home.root} (pid {os.getpid()})",
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
