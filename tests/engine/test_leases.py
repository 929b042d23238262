"""Named leases (engine/leases.py): one holder per name, a dead holder replaced at once,
an expired one replaced, the last beat kept for the next holder."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.engine.jobs import MIGRATIONS
from habakkuk.engine.leases import NamedLeases
from habakkuk.engine.store import SqliteDatabase


@pytest.fixture
async def leases(tmp_path: Path) -> AsyncIterator[NamedLeases]:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    named = NamedLeases(db)
    await named.ensure()
    yield named
    await db.close()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def test_a_live_holder_keeps_the_lease_until_it_runs_out(leases: NamedLeases) -> None:
    assert await leases.acquire("tick", "a", 60, now=1000.0) is None
    assert await leases.acquire("tick", "b", 60, now=1030.0) == "a"
    assert await leases.acquire("tick", "a", 60, now=1030.0) is None  # renewed
    assert await leases.acquire("tick", "b", 60, now=1091.0) is None  # a ran out
    assert await leases.holder("tick", now=1092.0) == "b"


async def test_a_lease_held_by_a_dead_process_is_taken_at_once(leases: NamedLeases) -> None:
    assert await leases.acquire("tick", "gone", 3600, now=1000.0, pid=dead_pid()) is None
    assert await leases.acquire("tick", "new", 60, now=1001.0) is None


async def test_the_last_beat_survives_a_release(leases: NamedLeases) -> None:
    assert await leases.last_beat("tick") is None
    await leases.acquire("tick", "a", 60, now=1000.0)
    await leases.acquire("tick", "a", 60, now=1015.0)
    await leases.release("tick", "a")
    assert await leases.holder("tick", now=1016.0) is None
    assert await leases.last_beat("tick") == 1015.0
    assert await leases.acquire("tick", "b", 60, now=1016.0) is None
