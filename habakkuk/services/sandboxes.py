"""The runtime's background processes, on each agent's sandbox (tools/sandbox), with the
record of running command groups that lets a start end what a killed Habakkuk left
(`end_leftovers`: its commands and its agents' desktops)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from habakkuk.engine.config import Config
from habakkuk.engine.home import Environment, Home
from habakkuk.tools.processes import ProcessInfo, ProcessManager
from habakkuk.tools.sandbox import CommandGroups, HomeSandboxes


def build_processes(
    home: Home,
    config: Config,
    env: Environment,
    on_exit: Callable[[ProcessInfo], Awaitable[None]],
) -> ProcessManager:
    """The ProcessManager of a runtime: commands where each agent's sandbox says, their
    groups recorded under run/commands."""
    return ProcessManager(
        home.procs_dir,
        on_exit=on_exit,
        sandboxes=HomeSandboxes(config, home.root, env.get),
        groups=CommandGroups(home.run_dir / "commands"),
    )


async def end_leftovers(home: Home, processes: ProcessManager) -> None:
    """At start, end what a killed Habakkuk on this home left running: its commands (here
    or in a sandbox: the recorded process groups) and its agents' desktops (Xvfb and the
    apps on it). What a live Habakkuk on the same home runs is left alone."""
    await processes.kill_orphans()
    # xvfb.computer_dir: a home where no desktop ever started has nothing to reap, and
    # a start (a one-shot run's) need not load the desktops' module to learn that.
    if (home.root / "computer").is_dir():
        from habakkuk.tools.computer.xvfb import reap_desktops

        await asyncio.to_thread(reap_desktops, home.root)
