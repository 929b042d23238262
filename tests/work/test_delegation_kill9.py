"""Crash safety of a background child with real processes: SIGKILL of `--serve` while the
child runs; the next `--serve` reruns the child, and the parent session gets exactly one
notice turn carrying its report."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.fakes.model_server import FakeModelServer, Reply
from tests.helpers import eventually
from tests.processes import BOUND, StartServe, kill, query, stop
from tests.work.delegation_env import config, delegate


async def submit(home: Path, text: str) -> tuple[str, str]:
    """A parent session and its turn, queued without workers (the served process runs it)."""
    root = Home(home)
    runtime = await Runtime.open(
        root, parse_config(root.config_path.read_text(), root.config_path, root)
    )
    try:
        session = await runtime.sessions.new_session("main")
        turn = await runtime.turns.submit(session.id, text)
        return session.id, turn
    finally:
        await runtime.close()


@pytest.mark.timeout(240)
async def test_sigkill_while_a_background_child_runs_then_one_notice_after_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("FAKE_KEY", "k")
    async with FakeModelServer() as srv:
        (home / "config.yaml").write_text(config(srv, tmp_path / "ws"))
        srv.script(
            Reply(tool_calls=[delegate("survey it", agent="helper", background=True)]),
            Reply("Started a helper."),
            Reply("The helper reported: 7 items."),
            api="chat",
        )
        srv.gates["anthropic"] = asyncio.Event()  # the first run of the child never answers
        session, turn = await submit(home, "survey in the background")
        control = home / "control.db"

        def child_calls() -> int:
            return len([r for r in srv.requests if r.api == "anthropic"])

        first = await serve_process(home, FAKE_KEY="k")
        await eventually(
            lambda: query(control, "SELECT 1 FROM jobs WHERE id = ? AND status = 'done'", (turn,)),
            what="the parent turn to finish",
            timeout=BOUND,
        )
        await eventually(lambda: child_calls() == 1, what="the child running", timeout=BOUND)
        await kill(first)
        [child] = query(control, "SELECT id, status FROM jobs WHERE kind = 'subturn'")
        assert child["status"] == "running"  # its owner died holding it
        del srv.gates["anthropic"]
        srv.script(Reply("Found 7 items."), api="anthropic")

        second = await serve_process(home, FAKE_KEY="k")
        await eventually(
            lambda: query(
                control,
                "SELECT 1 FROM jobs WHERE id = ? AND status = 'done'",
                (f"turn_{child['id']}",),
            ),
            what="the notice turn to finish",
            timeout=BOUND,
        )
        await stop(second)
        assert child_calls() == 2  # the child ran again after the kill
        assert len([r for r in srv.requests if r.api == "chat"]) == 3

    [done] = query(control, "SELECT status, attempts FROM jobs WHERE id = ?", (child["id"],))
    assert done["status"] == "done" and done["attempts"] == 2
    notices = query(control, "SELECT id FROM jobs WHERE id LIKE 'turn_sub_%'")
    assert [n["id"] for n in notices] == [f"turn_{child['id']}"]
    texts = [
        r["blocks"]
        for r in query(
            home / "transcripts.db",
            "SELECT blocks FROM messages WHERE session_id = ? AND role = 'user'",
            (session,),
        )
    ]
    reported = [t for t in texts if "sub-agent you delegated" in t]
    assert len(reported) == 1 and "Found 7 items." in reported[0]
