"""Fixtures the engine tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.jobs import MIGRATIONS
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.state import SCHEMA as STATE
from habakkuk.engine.state import StateStore
from habakkuk.engine.storage import Storage
from habakkuk.engine.store import SqliteDatabase


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[TranscriptStore]:
    """An empty transcripts.db, with the control.db it checks leases in.

    (test_todo.py has its own `store`, a state.db.)
    """
    control = tmp_path / "control.db"
    (await SqliteDatabase.open(control, MIGRATIONS)).close_sync()
    transcripts = await TranscriptStore.open(tmp_path / "transcripts.db", control)
    yield transcripts
    await transcripts.close()


@pytest.fixture
async def transcripts_on(storage: Storage) -> AsyncIterator[TranscriptStore]:
    """The home's transcripts on each engine in turn (SQLite files, a PostgreSQL
    database), opened as the runtime opens them: control and state first, attached.
    A test file whose `store` is this one runs as one contract on both."""
    control = await storage.open(CONTROL)
    state = await storage.open(STATE)
    transcripts = await TranscriptStore.open_on(storage)
    yield transcripts
    await transcripts.close()
    await state.close()
    await control.close()


@pytest.fixture
async def state_on(storage: Storage) -> AsyncIterator[StateStore]:
    """The home's state on each engine in turn."""
    state = StateStore(await storage.open(STATE))
    yield state
    await state.close()
