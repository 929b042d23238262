"""Approvals waiting in another process: listed and answered through the runtime facade.

One runtime holds the Telegram account and runs the turn (a `--serve`); a second
runtime on the same home (the terminal, the dashboard) runs no workers and
sees the chat approval only through control.db.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from habakkuk.channels.store import ChannelStore, Prompt
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.store import SqliteDatabase
from habakkuk.engine.toolkit.approvals import Answer
from habakkuk.runtime import Runtime
from tests.channels.fake_telegram import FakeTelegram
from tests.channels.test_telegram_e2e import APPROVAL_SCRIPT, channel_yaml
from tests.conftest import mock_config

TWO_CALLS_SCRIPT = """
- tool_calls:
    - name: exec
      arguments: {command: "echo first-run"}
- tool_calls:
    - name: exec
      arguments: {command: "echo second-run"}
- "all done"
"""

Open = Callable[..., Awaitable[Runtime]]


@pytest.fixture
def two(
    runtime_factory: Any, tg: FakeTelegram
) -> Callable[[str], Awaitable[tuple[Runtime, Runtime]]]:
    """(serving, other): serving holds the bot and runs turns; other only reads the home."""

    async def _open(script: str) -> tuple[Runtime, Runtime]:
        config = mock_config(script, mode="workspace", extra=channel_yaml(tg))
        serving: Runtime = await runtime_factory(config)
        serving.start_workers()
        assert serving.channels is not None
        await serving.channels.started()
        other: Runtime = await runtime_factory(config)
        return serving, other

    return _open


async def prompted(tg: FakeTelegram, count: int = 1) -> None:
    """Wait until `count` approval prompts (messages with buttons) reached the chat."""
    await tg.wait_for(
        lambda: sum("reply_markup" in c.params for c in tg.of("sendMessage")) >= count
    )


async def asked_in_chat(
    two: Any, tg: FakeTelegram, script: str = APPROVAL_SCRIPT, text: str = "run the thing"
) -> tuple[Runtime, Runtime, Any]:
    """(serving, other, the approval `other` lists) once the chat shows its prompt."""
    serving, other = await two(script)
    tg.message(text)
    await prompted(tg)
    [waiting] = await other.approvals.waiting()
    return serving, other, waiting


async def answered_elsewhere(
    serving: Runtime, other: Runtime, waiting: Any, answer: Answer, by: str
) -> str:
    """`other` answers the approval; returns how the serving process's turn ended."""
    assert await other.approvals.respond(waiting.id, answer, by=by)
    outcome = await asyncio.wait_for(serving.turns.wait_turn(waiting.turn), 30)
    return outcome.status


async def tool_results(runtime: Runtime, session: str) -> list[str]:
    return [
        r.text for m in await runtime.sessions.messages(session) for r in m.message.tool_results
    ]


async def test_another_process_lists_a_chat_approval_with_its_tool_and_summary(
    two: Any, tg: FakeTelegram
) -> None:
    serving, other, waiting = await asked_in_chat(two, tg)
    assert waiting.tool == "exec"
    assert "echo approved-run" in waiting.summary
    assert waiting.where == "tg:42"
    assert waiting.agent == "main"
    assert waiting.local is False
    assert waiting.turn.startswith("turn:tg:42:")
    [session] = await other.sessions.list_sessions()
    assert waiting.session == session.id
    # The process running the turn lists the same approval once, as its own.
    [here] = await serving.approvals.waiting()
    assert (here.id, here.where, here.local) == (waiting.id, "tg:42", True)
    assert here.since == waiting.since
    assert here.input == {"command": "echo approved-run"}
    await serving.turns.stop_turn(waiting.turn)


async def test_an_answer_from_another_process_lets_the_turn_proceed(
    two: Any, tg: FakeTelegram
) -> None:
    serving, other, waiting = await asked_in_chat(two, tg)
    assert await answered_elsewhere(serving, other, waiting, "allow_once", "dashboard") == "done"
    assert "approved-run" in (await tool_results(serving, waiting.session))[0]
    await tg.wait_for(lambda: "Approved from the dashboard." in tg.texts())
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert await other.approvals.waiting() == []
    # First answer wins: it is no longer waiting.
    assert not await other.approvals.respond(waiting.id, "deny", by="dashboard")


async def test_a_deny_from_another_process_denies_the_call(two: Any, tg: FakeTelegram) -> None:
    serving, other, waiting = await asked_in_chat(two, tg)
    assert await answered_elsewhere(serving, other, waiting, "deny", "terminal") == "done"
    assert (await tool_results(serving, waiting.session))[0].startswith("denied")
    await tg.wait_for(lambda: "Denied from the terminal." in tg.texts())


async def test_a_recorded_answer_that_names_no_decision_allows_nothing(
    two: Any, tg: FakeTelegram
) -> None:
    # A hand-edited control.db (or another version) recorded an answer that is none of
    # allow_once, allow_session and deny. The chat's approver handed it to the hub as it
    # was, and any answer but "deny" allowed the call; now it answers nothing, and the
    # request's own timeout denies it.
    serving, other = await two(APPROVAL_SCRIPT)
    serving.approvals.timeout = 1.0
    tg.message("run the thing")
    await prompted(tg)
    [waiting] = await other.approvals.waiting()
    store = await other.approvals.store()
    assert await store.answer_waiting_approval(waiting.id, "maybe", "someone")
    outcome = await asyncio.wait_for(serving.turns.wait_turn(waiting.turn), 30)
    assert outcome.status == "done"
    [result] = await tool_results(serving, waiting.session)
    assert result.startswith("denied by timeout")


async def test_allow_for_the_session_from_another_process_covers_the_next_call(
    two: Any, tg: FakeTelegram
) -> None:
    serving, other, waiting = await asked_in_chat(two, tg, TWO_CALLS_SCRIPT, "run both")
    assert await answered_elsewhere(serving, other, waiting, "allow_session", "terminal") == "done"
    results = await tool_results(serving, waiting.session)
    assert "first-run" in results[0] and "second-run" in results[1]
    # The second exec was covered by the grant: the chat saw one prompt only.
    assert sum("reply_markup" in c.params for c in tg.of("sendMessage")) == 1
    await tg.wait_for(lambda: "Approved for this session from the terminal." in tg.texts())


async def test_a_stopped_turn_is_no_longer_waiting(two: Any, tg: FakeTelegram) -> None:
    serving, other, waiting = await asked_in_chat(two, tg)
    await serving.turns.stop_turn(waiting.turn)
    outcome = await asyncio.wait_for(serving.turns.wait_turn(waiting.turn), 30)
    assert outcome.status != "running"
    assert await other.approvals.waiting() == []
    assert not await other.approvals.respond(waiting.id, "allow_once", by="terminal")


async def test_an_unknown_answer_is_refused_with_a_clear_error(
    runtime_factory: Any,
) -> None:
    runtime: Runtime = await runtime_factory(mock_config())
    with pytest.raises(HabakkukError, match="expected allow_once, allow_session or deny"):
        # An untyped caller (a plugin, JSON) past the type: the service still refuses it.
        await runtime.approvals.respond("apr_x", "maybe", by="terminal")  # type: ignore[arg-type]  # on purpose


async def test_without_channels_only_this_process_approvals_are_listed(
    runtime_factory: Any, home: Home
) -> None:
    runtime: Runtime = await runtime_factory(mock_config())
    assert await runtime.approvals.waiting() == []  # control.db has no channel tables
    assert not await runtime.approvals.respond("apr_gone", "allow_once", by="terminal")
    from habakkuk.engine.toolkit.approvals import ApprovalRequest

    request = ApprovalRequest("main", "ses_1", "turn_1", "exec", {"command": "ls"}, "ls")
    waiting = asyncio.create_task(runtime.approvals.approve(request))
    with runtime.bus.subscribe(lambda e: e.kind == "approval.pending") as pending:
        await asyncio.wait_for(pending.get(), 5)
    [listed] = await runtime.approvals.waiting()
    assert (listed.tool, listed.where, listed.local) == ("exec", "terminal", True)
    assert await runtime.approvals.respond(listed.id, "allow_once", by="terminal")
    decision = await asyncio.wait_for(waiting, 5)
    assert decision.answer == "allow_once" and decision.by == "terminal"
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "channel_prompts" not in tables  # listing did not create channel tables


OLD_PROMPTS = """
CREATE TABLE channel_prompts (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn TEXT NOT NULL,
    nonce TEXT NOT NULL UNIQUE,
    choices TEXT NOT NULL DEFAULT '[]',
    answer TEXT,
    by TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
"""


async def running_turn(queue: JobQueue, turn: str) -> None:
    """A turn that is running (claimed), as the process that waits on its prompt has it."""
    await queue.enqueue(turn, "turn", {}, serial_key="s")
    lease = await queue.claim(["turn"])
    assert lease is not None and lease.job.id == turn


async def test_an_older_control_db_gains_the_new_prompt_columns(home: Home) -> None:
    import time

    path = home.db_path("control")
    db = await SqliteDatabase.open(path, JOB_MIGRATIONS)
    try:
        # Raw SQL on purpose: a prompt row in the old table's shape (no new columns).
        await db.run(lambda conn: conn.executescript(OLD_PROMPTS))
        await db.write(
            lambda conn: conn.execute(
                "INSERT INTO channel_prompts(id, kind, conversation, turn, nonce, created)"
                " VALUES ('apr_old', 'approval', 'tg:42', 'turn_old', 'n1', ?)",
                (time.time(),),
            )
        )
        await running_turn(JobQueue(db), "turn_old")
        store = await ChannelStore.open(db)
        await store.ensure()  # twice: idempotent
        columns = {r["name"] for r in await db.fetchall("PRAGMA table_info(channel_prompts)")}
        assert {"tool", "summary", "reason", "agent", "session"} <= columns
        # The row written before the upgrade still reads, with empty new fields.
        [old] = await store.waiting_approvals()
        assert (old.id, old.tool, old.summary) == ("apr_old", "", "")
        await store.open_prompt(
            Prompt(
                "apr_new",
                "approval",
                "tg:42",
                "turn_old",
                "n2",
                ["allow_once", "deny"],
                None,
                "",
                time.time() + 1,
                tool="exec",
                summary="ls -la",
                reason="unsure",
                agent="main",
                session="ses_1",
            )
        )
        new = (await store.waiting_approvals())[1]
        assert (new.tool, new.summary, new.reason, new.agent, new.session) == (
            "exec",
            "ls -la",
            "unsure",
            "main",
            "ses_1",
        )
        assert await store.answer_waiting_approval("apr_new", "deny", "terminal")
        assert not await store.answer_waiting_approval("apr_new", "allow_once", "terminal")
        assert [p.id for p in await store.waiting_approvals()] == ["apr_old"]
    finally:
        await db.close()


async def test_a_runtime_on_an_older_control_db_lists_its_chat_approvals(
    runtime_factory: Any, home: Home, tg: FakeTelegram
) -> None:
    import time

    # Raw SQL on purpose: a prompt row in the old table's shape (no new columns).
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        conn.executescript(OLD_PROMPTS)
        conn.execute(
            "INSERT INTO channel_prompts(id, kind, conversation, turn, nonce, created)"
            " VALUES ('apr_old', 'approval', 'tg:42', 'turn_old', 'n1', ?)",
            (time.time(),),
        )
        conn.commit()
    runtime: Runtime = await runtime_factory(mock_config(extra=channel_yaml(tg)))
    await running_turn(runtime.queue, "turn_old")
    [old] = await runtime.approvals.waiting()
    assert (old.id, old.where, old.local, old.tool) == ("apr_old", "tg:42", False, "")
    columns = {
        r["name"] for r in await runtime.queue.db.fetchall("PRAGMA table_info(channel_prompts)")
    }
    assert "summary" in columns
    assert await runtime.approvals.respond("apr_old", "allow_once", by="terminal")
    assert await runtime.approvals.waiting() == []
