"""The home's waiting approvals (services/approvals.py) read from control the same way on
SQLite and PostgreSQL: a home whose channels never ran has none (and gets no tables),
and a chat approval another process recorded is listed and answered once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.store import ChannelStore, Prompt
from habakkuk.engine.config import parse_config
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import SCHEMA as CONTROL
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.sql import Database
from habakkuk.engine.storage import Storage
from habakkuk.services.approvals import Approvals
from tests.conftest import mock_config


@pytest.fixture
async def control(storage: Storage) -> AsyncIterator[Database]:
    db = await storage.open(CONTROL, inline=True)
    try:
        yield db
    finally:
        await db.close()


def _approvals(control: Database, tmp_path: Path) -> Approvals:
    home = Home(tmp_path / "approvals-home")
    config = parse_config(mock_config(), home.config_path, home)

    def no_outbox() -> Any:
        raise AssertionError("no chat of this config is told")

    return Approvals(
        EventBus(),
        config=config,
        transcripts=None,  # type: ignore[arg-type]  # only read for this process's requests
        control_db=control,
        channels=lambda: None,
        outbox=no_outbox,
    )


async def _tables(control: Database) -> set[str]:
    sql = {
        "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table'",
        "postgres": "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema()",
    }[control.dialect]
    return {str(row[0]) for row in await control.fetchall(sql)}


async def test_a_home_whose_channels_never_ran_lists_none_and_creates_nothing(
    control: Database, tmp_path: Path
) -> None:
    approvals = _approvals(control, tmp_path)
    assert await approvals.recorded_store() is None
    assert await approvals.waiting() == []
    assert "channel_prompts" not in await _tables(control)


# PostgreSQL's jobs table comes with the queue's port (jobs.PG_MIGRATIONS): until then
# this one runs on SQLite.
@pytest.mark.parametrize(
    "storage", ["sqlite", "postgres"] if CONTROL.postgres else ["sqlite"], indirect=True
)
async def test_a_chat_approval_recorded_by_another_process_is_listed_and_answered_once(
    storage: Storage, control: Database, tmp_path: Path
) -> None:
    queue = JobQueue(control)
    await queue.enqueue("turn:tg:42:1", "turn", {"session": "s1"})
    lease = await queue.claim(["turn"])
    assert lease is not None
    other = await ChannelStore.open(control)  # the process running the chat's turn
    await other.open_prompt(
        Prompt(
            id="apr_1",
            kind="approval",
            conversation="tg:42",
            turn=lease.job.id,
            nonce="n1",
            choices=["allow_once", "deny"],
            answer=None,
            by="",
            created=time.time(),
            tool="terminal",
            summary="make deploy",
            agent="main",
            session="s1",
        )
    )
    approvals = _approvals(control, tmp_path)
    assert await approvals.recorded_store() is not None
    (waiting,) = await approvals.waiting()
    assert (waiting.id, waiting.tool, waiting.where, waiting.local) == (
        "apr_1",
        "terminal",
        "tg:42",
        False,
    )
    assert await approvals.respond("apr_1", "allow_once", "dashboard")
    assert not await approvals.respond("apr_1", "deny", "terminal")
    assert await other.prompt_answer("apr_1") == ("allow_once", "dashboard")
    assert await approvals.waiting() == []
