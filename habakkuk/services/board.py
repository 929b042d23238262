"""The board service as the runtime builds it: on the queue's control.db, with the
runtime's bus and home, and a way to stop a card job this process's pools run."""

from __future__ import annotations

from collections.abc import Callable

from habakkuk.engine.config import Config
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import JobQueue
from habakkuk.work.board import Board
from habakkuk.work.board_store import BoardStore


def build_board(
    queue: JobQueue,
    config: Config,
    bus: EventBus,
    home: Home,
    stop_job: Callable[[str], bool] | None = None,
) -> Board:
    """A `Board` (BoardAccess) on the queue's control.db. `stop_job(job_id)` stops a job
    running in this process and says whether it did (the pools' stop_job)."""
    return Board(BoardStore(queue.db), queue, config, bus, home, stop_job=stop_job)
