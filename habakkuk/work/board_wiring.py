"""The board's card pool and dispatcher, built for one runtime.

Card jobs (each the assignee's turn, work/card_runs.py) run in a pool of their own,
`workers.cards` wide, on the runtime's turn loop, so a long card never holds up chat
turns. The dispatcher (work/board_dispatch.py) runs where maintenance runs (serve, the
terminal); the lease makes one of them look at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from habakkuk.engine.jobs import Job
from habakkuk.engine.pools import FinishedCallback, Pool
from habakkuk.work.board_dispatch import Dispatcher
from habakkuk.work.board_store import BoardStore
from habakkuk.work.board_types import CARD_KIND
from habakkuk.work.card_runs import CardRuns, TurnLoop
from habakkuk.work.ports import WorkHost


class BoardHost(WorkHost, Protocol):
    """What the card runs use of the runtime (the work layer's host, and the board)."""

    @property
    def board(self) -> Any: ...  # work.board.Board (get, on_wake)


class BoardRuns:
    """The card pool, and the dispatcher once started."""

    def __init__(
        self,
        host: BoardHost,
        turn_loop: TurnLoop,
        *,
        on_finished: FinishedCallback | None = None,
    ):
        self.store = BoardStore(host.queue.db)
        self._host = host
        self.dispatcher: Dispatcher | None = None
        self._task: asyncio.Task[None] | None = None
        runs = CardRuns(host.board, self.store, host.sessions, turn_loop, host.budget)

        def finished(job: Job) -> None:
            if on_finished is not None:
                on_finished(job)
            if self.dispatcher is not None:
                self.dispatcher.wake()  # its notice (or its repair) goes out now

        self.pool = Pool(
            host.queue,
            [CARD_KIND],
            runs.run,
            concurrency=max(1, host.config.workers.cards),
            on_finished=finished,
        )

    def start_dispatcher(self) -> asyncio.Task[None]:
        """Start dispatching (woken by this process's board); the task to cancel at close."""
        if self._task is None:
            host = self._host
            self.dispatcher = Dispatcher(
                self.store,
                host.queue,
                host.turns,
                lambda: host.outbox,
                host.home.root,
                language_of=host.config.language_of,
                interval=host.config.board.dispatch_seconds,
                budget=host.budget,
            )
            host.board.on_wake(self.dispatcher.wake)
            self._task = asyncio.create_task(self.dispatcher.run(), name="board-dispatcher")
        return self._task
