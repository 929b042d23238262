"""Fixtures the engine tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.jobs import MIGRATIONS
from habakkuk.engine.sessions import TranscriptStore
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
