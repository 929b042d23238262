"""The work layer's pools and loops for one runtime, in one place: schedule slots
(work/run_wiring.py), board cards and the dispatcher (work/board_wiring.py), and
delegated sub-turns (work/delegation_wiring.py).

Each kind has a pool of its own, so slow scripts, long cards and waiting parents never
take the chat turns' workers. The runtime imports this module when its workers start,
so a process that only reads (`habakkuk --help`, the CLI's listings) never loads it.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from habakkuk.engine.agent.turn import TurnRunner
from habakkuk.engine.pools import FinishedCallback, Pool
from habakkuk.work.board_wiring import BoardHost, BoardRuns
from habakkuk.work.delegation import Delegation
from habakkuk.work.delegation_wiring import SubturnRuns
from habakkuk.work.run_wiring import RunHost, ScheduleRuns


class WorkRunsHost(RunHost, BoardHost, Protocol):
    """What the work layer's pools use of the runtime: the schedule runs' host, the card
    runs' host, and the sub-agents' delegation (the runtime satisfies it)."""

    @property
    def delegation(self) -> Delegation: ...


class WorkRuns:
    """The work layer's pools (start them with the runtime's), then `start_loops`."""

    def __init__(
        self,
        host: WorkRunsHost,
        runner: TurnRunner,
        *,
        on_finished: FinishedCallback,
        scripts: bool = True,
    ):
        """`scripts`: this process serves the home, so it runs script slots too (they
        run at most once: a process that stops when its own turn is done must not take
        one) and attends meetings (a job of hours)."""
        self._schedules = ScheduleRuns(host, on_finished=on_finished, scripts=scripts)
        # Cards run on the chat turns' loop (each card job is the assignee's turn).
        self._cards = BoardRuns(host, runner, on_finished=on_finished)
        # Sub-agents' turns never offer delegate: they cannot delegate further.
        self._subturns = SubturnRuns(
            host.queue, runner.deps, host.delegation, on_finished=on_finished
        )
        self.pools: list[Pool] = [
            *self._schedules.pools,
            self._cards.pool,
            self._subturns.pool,
        ]
        if scripts:  # meetings too are attended only by the serving process
            from habakkuk.work.meeting_runs import meeting_pool_of

            self.pools.append(meeting_pool_of(host, runner.deps.router, on_finished))

    def start_loops(self, *, maintenance: bool) -> list[asyncio.Task[None]]:
        """Start the watchers once the pools run: the schedule runs' deliveries, the
        sub-turns' notice sweep, the orphaned scripts' sweep (with scripts), and with
        `maintenance` the board's dispatcher; the tasks to cancel at close."""
        tasks = [self._schedules.start_watcher(), self._subturns.start_sweep()]
        orphans = self._schedules.start_orphan_sweep()
        if orphans is not None:
            tasks.append(orphans)
        if maintenance:
            tasks.append(self._cards.start_dispatcher())
        return tasks
