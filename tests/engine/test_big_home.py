"""A home built by benchmarks/big_home.py passes the checks a real home passes: doctor
finds its databases intact, every transcript loads needing no repair, sessions export
in every format, search finds their words, and a new turn continues a session."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from habakkuk.channels.store import SEEN_KEEP_SECONDS
from habakkuk.cli import main
from habakkuk.engine.home import Home
from habakkuk.engine.sessions import TranscriptStore

GENERATOR = Path(__file__).resolve().parents[2] / "benchmarks" / "big_home.py"
SESSIONS = 60
MESSAGES = 1_200


@pytest.fixture
def big_home(home: Home) -> Home:
    subprocess.run(
        [
            sys.executable,
            str(GENERATOR),
            str(home.root),
            "--sessions",
            str(SESSIONS),
            "--messages",
            str(MESSAGES),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return home


def _count(path: Path, sql: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def test_the_generator_writes_the_sessions_and_messages_asked_for(big_home: Home) -> None:
    transcripts = big_home.db_path("transcripts")
    assert _count(transcripts, "SELECT count(*) FROM sessions") == SESSIONS
    assert _count(transcripts, "SELECT count(*) FROM messages") == MESSAGES
    assert _count(transcripts, "SELECT count(*) FROM compactions") > 0
    # The real triggers indexed the words: every user and assistant text is searchable.
    assert _count(transcripts, "SELECT count(*) FROM message_text") > MESSAGES // 2
    control = big_home.db_path("control")
    assert _count(control, "SELECT count(*) FROM jobs WHERE status = 'done'") > SESSIONS
    assert _count(control, "SELECT count(*) FROM channel_bindings") > 0
    # The web and Telegram messages of the last week left their redelivery keys.
    assert _count(control, "SELECT count(*) FROM channel_seen") > 0
    week_ago = f"unixepoch('now') - {SEEN_KEEP_SECONDS}"
    assert _count(control, f"SELECT count(*) FROM channel_seen WHERE at < {week_ago}") == 0
    assert _count(big_home.db_path("web"), "SELECT count(*) FROM events") > 0
    assert _count(big_home.db_path("usage"), "SELECT count(*) FROM calls") > SESSIONS


def test_doctor_finds_a_generated_home_intact(
    big_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("ok    database control.db: intact") for line in lines)
    assert any(line.startswith("ok    database transcripts.db: intact") for line in lines)


async def test_every_generated_transcript_loads_needing_no_repair(big_home: Home) -> None:
    store = await TranscriptStore.open(big_home.db_path("transcripts"), big_home.db_path("control"))
    try:
        sessions = await store.list_sessions(limit=SESSIONS * 2)
        assert len(sessions) == SESSIONS
        compacted = 0
        tool_calls = 0
        for session in sessions:
            view = await store.view(session.id)
            repaired = view.repaired()
            assert repaired.interrupted == [] and repaired.dropped_results == 0, session.id
            assert repaired.messages == view.messages, session.id
            compacted += view.compaction is not None
            tool_calls += sum(len(m.message.tool_uses) for m in view.kept)
        assert compacted > 0 and tool_calls > 0
        hits = await store.search("garden")
        assert hits and all("garden" in hit.snippet.lower() for hit in hits)
    finally:
        await store.close()


def test_generated_sessions_export_in_every_format(
    big_home: Home, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conn = sqlite3.connect(big_home.db_path("transcripts"))
    rows = conn.execute(
        "SELECT session_id, count(*) FROM messages GROUP BY session_id ORDER BY 2 DESC LIMIT 3"
    ).fetchall()
    conn.close()
    for session_id, count in rows:
        assert main(["sessions", "export", session_id, "--format", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["session"]["id"] == session_id
        assert len(data["messages"]) == count
        for fmt in ("md", "html"):
            target = tmp_path / f"{session_id}.{fmt}"
            assert main(["sessions", "export", session_id, "--format", fmt, "-o", str(target)]) == 0
            assert target.stat().st_size > 0
        capsys.readouterr()


def test_a_turn_continues_a_generated_session(
    big_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = sqlite3.connect(big_home.db_path("transcripts"))
    session_id, last = conn.execute(
        "SELECT session_id, max(seq) FROM messages GROUP BY session_id LIMIT 1"
    ).fetchone()
    conn.close()
    assert main(["run", "--json", "--session", session_id, "one more question"]) == 0
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert body["status"] == "done" and body["session"] == session_id
    conn = sqlite3.connect(big_home.db_path("transcripts"))
    seqs = [
        r[0]
        for r in conn.execute(
            "SELECT seq FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, last),
        )
    ]
    conn.close()
    assert seqs == [last + 1, last + 2]
