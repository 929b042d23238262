"""Self-protection under memory pressure: `habakkuk serve` watches its own resident memory.

Past `limits.max_rss_mb`, the guard stops this process's pools from claiming new jobs
(`Turns.drain`), gives the jobs running here `limits.grace_seconds` to finish, and
returns; `habakkuk serve` then stops as it does on SIGTERM (the pools hand back the
jobs still running: their leases released, so another process of the home or the
restart resumes them, and no turn is lost) and exits with EXIT_MEMORY for its
supervisor (systemd, a tmux loop, Kubernetes) to start it again.

Reading the resident size costs one read of /proc/self/statm every `check_seconds`
(where /proc is missing, the peak size from getrusage, which only grows: a process
past the limit stays past it, which is what the guard needs).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from habakkuk.engine.config import LimitsConfig
from habakkuk.engine.jobs import Job

log = logging.getLogger(__name__)

MIB = 1024 * 1024


def rss_mb() -> float:
    """This process's resident memory in MiB."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / MIB if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


class Draining(Protocol):
    """What the guard uses of the turns service (services.turns.Turns)."""

    def drain(self) -> None:
        """Claim no new job in any pool of this process."""

    def running_jobs(self) -> list[Job]:
        """The jobs this process's pools run now."""
        ...


@dataclass(frozen=True)
class Tripped:
    """Why the guard stopped the process: what it read, the limit, and how the running
    jobs ended (finished within the grace period, or handed back)."""

    rss_mb: float
    limit_mb: int
    finished: int  # jobs that finished within the grace period
    handed_back: int  # jobs still running at its end (released by the shutdown)


class MemoryGuard:
    """Watches the resident memory; `watch()` returns once past the limit and drained."""

    def __init__(
        self,
        limits: LimitsConfig,
        work: Draining,
        *,
        read: Callable[[], float] = rss_mb,
    ):
        self.limits = limits
        self.work = work
        self.read = read

    async def watch(self) -> Tripped:
        """Read the resident memory every check_seconds; past max_rss_mb drain the pools,
        wait at most grace_seconds for the running jobs, and say what happened."""
        limit = self.limits.max_rss_mb
        while True:
            await asyncio.sleep(self.limits.check_seconds)
            used = self.read()
            if used > limit:
                break
        running = {job.id for job in self.work.running_jobs()}
        log.error(
            "memory: resident %.0f MiB is past limits.max_rss_mb %d MiB: taking no new job,"
            " %d running get %gs to finish, then the process exits to be restarted",
            used, limit, len(running), self.limits.grace_seconds,
        )  # fmt: skip
        self.work.drain()
        deadline = time.monotonic() + self.limits.grace_seconds
        # Polled: the pools tell no one when their last job settles (a tenth of a second
        # is nothing beside a turn).
        while True:
            left_s = deadline - time.monotonic()
            if not self.work.running_jobs() or left_s <= 0:
                break
            await asyncio.sleep(min(0.1, left_s))
        left = {job.id for job in self.work.running_jobs()}
        if left:
            log.error("memory: handing back %d running job(s) for the restart", len(left))
        return Tripped(used, limit, len(running - left), len(left))
