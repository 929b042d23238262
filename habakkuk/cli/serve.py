"""`habakkuk serve` (or `--serve`): every worker, headless, until SIGINT or SIGTERM.

With `limits.max_rss_mb`, past that resident memory it claims no new job, lets the
running ones finish within `limits.grace_seconds` (handing back the rest), and exits
with EXIT_MEMORY (75) for its supervisor to restart it (services/memory_guard.py).

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
from typing import TYPE_CHECKING, Any

from habakkuk.cli.common import current_home, run_async
from habakkuk.engine.exit_codes import EXIT_MEMORY, EXIT_OK

if TYPE_CHECKING:
    import asyncio

    from habakkuk.engine.config import Config
    from habakkuk.runtime import Runtime


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
    with console_logging(logging.WARNING):
        home = current_home()
        runtime = await Runtime.open(home, hosting(load_config(home), agents))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        triggers = None
        try:
            await runtime.start_mcp()  # MCP servers first (at most 20 s; slow ones keep trying)
            runtime.start_workers(maintenance=True)
            triggers = home_assistant_triggers(runtime)
            hosted = ", ".join(runtime.config.serve.agents or ["every agent"])
            print(
                f"habakkuk: serving {runtime.home.root} (pid {os.getpid()} on"
                f" {runtime.nodes.host}, {runtime.storage.describe()}; hosting {hosted})",
                file=sys.stderr,
                flush=True,
            )
            if runtime.config.http is not None:
                await runtime.http.serve(lambda line: print(f"habakkuk: {line}", file=sys.stderr))
            code = await _until_stopped(runtime, stop)
            print("habakkuk: shutting down", file=sys.stderr, flush=True)
        finally:
            if triggers is not None:
                await triggers.stop()
            await runtime.close()
    return code


def home_assistant_triggers(runtime: Runtime) -> Any:
    """Home Assistant's triggers follow its bus in serve alone (None without any)."""
    section = runtime.config.homeassistant
    if section is None or not section.triggers:
        return None
    from habakkuk.engine.i18n import t
    from habakkuk.protocols.homeassistant.triggers import start_triggers

    triggers = start_triggers(
        section, runtime.env, runtime.queue.db, str(runtime.queue.owner), runtime.sessions,
        runtime.turns,
    )  # fmt: skip
    said = t("ha.triggers_following", count=len(section.triggers), url=section.url)
    print(f"habakkuk: {said}", file=sys.stderr, flush=True)
    return triggers


async def _until_stopped(runtime: Runtime, stop: asyncio.Event) -> int:
    """Wait for SIGINT/SIGTERM, or for the memory guard to trip (limits.max_rss_mb);
    the exit code."""
    import asyncio

    from habakkuk.engine.i18n import t

    if not runtime.config.limits.max_rss_mb:
        await stop.wait()
        return EXIT_OK
    from habakkuk.services.memory_guard import MemoryGuard

    guard = asyncio.create_task(MemoryGuard(runtime.config.limits, runtime.turns).watch())
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({guard, stopped}, return_when=asyncio.FIRST_COMPLETED)
    for task in (guard, stopped):
        task.cancel()
    await asyncio.gather(guard, stopped, return_exceptions=True)
    if not guard.cancelled() and guard.exception() is None:
        tripped = guard.result()
        said = t(
            "status.memory_exit",
            rss=f"{tripped.rss_mb:.0f}",
            limit=tripped.limit_mb,
            finished=tripped.finished,
            handed_back=tripped.handed_back,
            code=EXIT_MEMORY,
        )
        print(f"habakkuk: {said}", file=sys.stderr, flush=True)
        return EXIT_MEMORY
    return EXIT_OK
