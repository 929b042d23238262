"""What the core schedules tests share: a real control.db with the real JobQueue, a
config in a chosen timezone, and a clock the test moves by hand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue, Owner
from habakkuk.engine.storage import Storage
from habakkuk.engine.store import Database, SqliteDatabase
from habakkuk.work.service import Schedules


class FakeClock:
    """Epoch seconds that move only when the test says so."""

    def __init__(self, start: float):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def config_in(home: Home, timezone: str = "Europe/Paris") -> Config:
    text = (
        f"timezone: {timezone}\nproviders:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n  other:\n    model: mock/scripted\n"
    )
    home.config_path.write_text(text, encoding="utf-8")
    return parse_config(text, home.config_path, home)


@dataclass
class Control:
    """One process's view of a home's control.db."""

    db: Database
    queue: JobQueue
    schedules: Schedules

    async def close(self) -> None:
        await self.db.close()


async def open_control(
    path: Path, config: Config, clock: FakeClock, *, pid: int | None = None
) -> Control:
    """A connection to control.db as one process would hold it (its own owner)."""
    db = await SqliteDatabase.open(path, JOB_MIGRATIONS)
    owner = Owner.current()
    if pid is not None:
        owner = Owner(owner.host, pid, owner.token)
    queue = JobQueue(db, owner=owner)
    return Control(db, queue, Schedules(db, queue, config, clock=clock))


async def open_node(storage: Storage, config: Config, clock: FakeClock) -> Control:
    """A process (SQLite) or node (PostgreSQL) of the home on `storage`, with its own
    database and owner."""
    db = await storage.open(CONTROL, inline=True)
    queue = JobQueue(db, owner=Owner.current())
    return Control(db, queue, Schedules(db, queue, config, clock=clock))
