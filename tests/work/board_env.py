"""What the board's core tests share: a real control.db with the real JobQueue and a
Board on it, as one process of a home would hold them."""

from __future__ import annotations

from dataclasses import dataclass, field

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.storage import SqliteStorage, Storage
from habakkuk.engine.store import Database
from habakkuk.services.board import build_board
from habakkuk.work.board import Board
from habakkuk.work.board_store import BoardStore

CONFIG = """
providers:
  mock:
    type: mock
agents:
  main:
    model: mock/scripted
  other:
    model: mock/scripted
  third:
    model: mock/scripted
board:
  max_attempts: 2
"""


def board_config(home: Home) -> Config:
    home.config_path.write_text(CONFIG, encoding="utf-8")
    return parse_config(CONFIG, home.config_path, home)


@dataclass
class Control:
    """One process's connection to a home's control.db and the board on it."""

    db: Database
    queue: JobQueue
    bus: EventBus
    board: Board
    stopped: list[str] = field(default_factory=list)  # job ids the local stop was asked for

    @property
    def store(self) -> BoardStore:
        return self.board.store

    async def close(self) -> None:
        await self.db.close()


async def open_control(
    home: Home,
    config: Config,
    *,
    local_jobs: frozenset[str] = frozenset(),
    storage: Storage | None = None,
) -> Control:
    """A connection to the home's control (on `storage`, by default its control.db) with
    a board whose local pools "run" `local_jobs` (their stop succeeds and is recorded;
    any other goes to the queue)."""
    db = await (storage or SqliteStorage(home)).open(CONTROL, inline=True)
    queue = JobQueue(db)
    bus = EventBus()
    stopped: list[str] = []

    def stop_job(job_id: str) -> bool:
        if job_id in local_jobs:
            stopped.append(job_id)
            return True
        return False

    board = build_board(queue, config, bus, home, stop_job)
    await board.store.ensure()
    return Control(db, queue, bus, board, stopped)
