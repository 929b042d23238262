"""The schedule runs' worker pools and delivery watcher, built for one runtime.

Prompt slots run in a pool of their own (each waits for its turn, which the turn pool
runs, so it is as wide as that pool); script slots in another, sized by
`workers.schedules`, so slow scripts never hold up chat turns or prompt runs. The
delivery watcher records each run's delivery.

Script slots run at most once, so only a process that serves the home runs them (not
one that stops as soon as its own turn is done, which would cut a script short), and
before it claims one it kills the scripts' process groups a Habakkuk killed mid-run
left behind (work/script_groups.py); it looks again every ORPHAN_SWEEP_SECONDS, for a
process on the same home that died meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Protocol

from habakkuk.engine.events import EventBus
from habakkuk.engine.hook_events import HookFirer
from habakkuk.engine.outbox_access import TextOutbox
from habakkuk.engine.pools import FinishedCallback, Pool
from habakkuk.work.ports import WorkHost
from habakkuk.work.prompt_runs import PromptRuns
from habakkuk.work.run_deliveries import watch_deliveries
from habakkuk.work.script_groups import ScriptGroups
from habakkuk.work.script_runs import ScriptRuns
from habakkuk.work.service import PROMPT_KIND, SCRIPT_KIND
from habakkuk.work.store import ScheduleStore
from habakkuk.work.store_book import StoreRunBook

log = logging.getLogger(__name__)

ORPHAN_SWEEP_SECONDS = 15.0


class RunHost(WorkHost, Protocol):
    """What the schedule runs use of the runtime (the work layer's host, and its bus and
    hooks)."""

    @property
    def bus(self) -> EventBus: ...
    @property
    def hooks(self) -> HookFirer: ...


class ScheduleRuns:
    """The pools running slot jobs, and the delivery watcher (start after the pools)."""

    def __init__(
        self,
        host: RunHost,
        *,
        on_finished: FinishedCallback | None = None,
        scripts: bool = True,
    ):
        """`scripts`: this process runs script slots (it serves the home)."""
        self.book = StoreRunBook(ScheduleStore(host.queue.db))
        self.groups = ScriptGroups(host.home.run_dir / "scripts")
        config = host.config

        def workspace_of(agent: str) -> Path:
            return config.agent(agent).workspace_path

        def outbox() -> TextOutbox:
            return host.outbox

        prompts = PromptRuns(self.book, host.sessions, host.turns, host.hooks, host.budget)
        script_runs = ScriptRuns(
            self.book,
            workspace_of=workspace_of,
            env_file=host.home.env_path,
            outbox=outbox,
            sessions=host.sessions,
            turns=host.turns,
            hooks=host.hooks,
            groups=self.groups,
            language_of=config.language_of,
        )
        self.pools = [
            Pool(
                host.queue,
                [PROMPT_KIND],
                prompts.run,
                # Each mostly waits on its turn (the turn pool does the work).
                concurrency=max(1, config.workers.turns),
                on_finished=on_finished,
            ),
        ]
        self.scripts = scripts
        if scripts:
            # Before this process can claim a script: none a killed one left runs on.
            self.groups.kill_orphans()
            self.pools.append(
                Pool(
                    host.queue,
                    [SCRIPT_KIND],
                    script_runs.run,
                    concurrency=max(1, config.workers.schedules),
                    on_finished=on_finished,
                )
            )
        self._host = host
        self._watcher: asyncio.Task[None] | None = None

    async def ensure(self) -> None:
        """The schedules' tables exist (another process may have made them)."""
        await self.book.store.ensure()

    def start_orphan_sweep(self) -> asyncio.Task[None] | None:
        """Kill orphaned script groups every ORPHAN_SWEEP_SECONDS (a process on this home
        that died while this one runs); the task to cancel at close, None without
        scripts."""
        if not self.scripts:
            return None
        return asyncio.create_task(self._sweep_orphans(), name="script-orphans")

    async def _sweep_orphans(self) -> None:
        while True:
            await asyncio.sleep(ORPHAN_SWEEP_SECONDS)
            try:
                await asyncio.to_thread(self.groups.kill_orphans)
            except Exception as exc:  # a failed look must not end the sweep
                log.warning("schedules: looking for orphaned scripts failed: %s", exc)

    def start_watcher(self) -> asyncio.Task[None]:
        """Start recording deliveries of runs; the task to cancel at close."""
        if self._watcher is None:
            self._watcher = asyncio.create_task(
                watch_deliveries(self._host.bus, self.book, self._host.queue.get),
                name="schedule-deliveries",
            )
        return self._watcher
