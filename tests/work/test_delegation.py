"""Delegation end to end (spec 000 "Delegation"): the delegate tool queues a sub-turn job,
the sub-turn pool runs the child's turn on the scripted model server, and the parent's
next request carries the child's report."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.events import DelegateEnded, DelegateStarted
from habakkuk.engine.jobs import payload_of
from habakkuk.engine.timeouts import wait_within
from habakkuk.work.delegation import subturn_id
from habakkuk.work.delegation_types import SUBTURN_KIND, SUBTURNS
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import eventually
from tests.work.delegation_env import config, corrections, delegate, tool_results


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


@pytest.fixture
async def runtime(
    server: FakeModelServer, runtime_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    monkeypatch.setenv("FAKE_KEY", "k")
    opened = await runtime_factory(config(server, tmp_path / "ws"))
    opened.start_workers(channels=False)
    return opened


async def turn(runtime: Any, text: str) -> tuple[str, Any]:
    session = await runtime.sessions.new_session("main")
    turn_id = await runtime.turns.submit(session.id, text)
    return session.id, await runtime.turns.wait_turn(turn_id, poll=0.05)


def first_text(request: Any) -> str:
    """The words of an Anthropic request's first (user) message."""
    return " ".join(b.get("text", "") for b in request.json["messages"][0]["content"])


def anthropic(server: FakeModelServer) -> list[Any]:
    return [r for r in server.requests if r.api == "anthropic"]


async def test_a_delegate_call_runs_the_child_and_returns_its_reply(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(Reply(tool_calls=[delegate("count the files", agent="helper")]), api="chat")
    server.script(Reply("There are 3 files."), api="anthropic")
    server.script(Reply("The helper says 3."), api="chat")
    session, outcome = await turn(runtime, "ask the helper")
    assert outcome.status == "done" and outcome.reply == "The helper says 3."
    [result] = tool_results(server.requests[-1])
    assert "done" in result and "There are 3 files." in result
    [child_request] = anthropic(server)
    assert "count the files" in first_text(child_request)
    [child] = await runtime.delegation.children(session, active_only=False)
    assert child.status == "done" and child.agent == "helper"
    stored = await runtime.sessions.session(child.session)
    assert stored.origin == "delegate" and stored.agent == "helper"
    job = await runtime.queue.get(child.job)
    assert job.kind == SUBTURN_KIND and job.payload["spec"]["call_id"]


async def test_two_delegate_calls_of_one_response_run_in_parallel(
    runtime: Any, server: FakeModelServer
) -> None:
    calls = [delegate("first part", agent="helper"), delegate("second part", agent="helper")]
    server.script(Reply(tool_calls=calls), Reply("Both done."), api="chat")
    server.script(Reply("part done"), Reply("part done"), api="anthropic")
    server.gates["anthropic"] = gate = asyncio.Event()
    session = await runtime.sessions.new_session("main")
    turn_id = await runtime.turns.submit(session.id, "split it")
    # Both children's model requests arrive while neither has been answered.
    await eventually(lambda: len(anthropic(server)) == 2, what="both child requests")
    gate.set()
    outcome = await runtime.turns.wait_turn(turn_id, poll=0.05)
    assert outcome.status == "done"
    results = tool_results(server.requests[-1])
    assert len(results) == 2 and all("part done" in r for r in results)


async def test_a_sub_agent_cannot_delegate_further(runtime: Any, server: FakeModelServer) -> None:
    server.script(Reply(tool_calls=[delegate("go on", agent="helper")]), Reply("ok"), api="chat")
    server.script(Reply("I have no delegate tool."), api="anthropic")
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    [child_request] = anthropic(server)
    offered = {t["name"] for t in child_request.json.get("tools", [])}
    assert "delegate" not in offered and "read_file" in offered


async def test_the_child_gets_the_given_toolsets_it_also_has(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("read only", agent="helper", toolsets=["core", "memory"])]),
        Reply("ok"),
        api="chat",
    )
    server.script(Reply("done"), api="anthropic")
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    offered = {t["name"] for t in anthropic(server)[0].json.get("tools", [])}
    # helper has core and delegate: of [core, memory] it gets core only.
    assert "read_file" in offered and not any(n.startswith("memory") for n in offered)


async def test_toolsets_that_are_not_a_subset_of_the_parents_are_an_error_result(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("x", agent="helper", toolsets=["core", "nope"])]),
        Reply("I see."),
        api="chat",
    )
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert "not a subset of the parent's" in result and "nope" in result
    assert anthropic(server) == []


async def test_an_unknown_agent_or_model_is_an_error_result(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(
            tool_calls=[
                delegate("x", agent="ghost"),
                delegate("y", agent="helper", model="nowhere/m"),
            ]
        ),
        Reply("I see."),
        api="chat",
    )
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    ghost, model = tool_results(server.requests[-1])
    assert "ghost" in ghost and "not configured" in model
    assert anthropic(server) == []


async def test_a_given_model_is_tried_before_the_agents_chain(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("x", agent="helper", model="fake/gpt-fake-mini")]),
        Reply("child answer"),
        Reply("ok"),
        api="chat",
    )
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    models = [r.json["model"] for r in server.requests if r.api == "chat"]
    assert models == ["gpt-fake", "gpt-fake-mini", "gpt-fake"]


SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 0}},
    "required": ["count"],
    "additionalProperties": False,
}


async def test_an_output_schema_mismatch_is_corrected_once_and_the_parent_gets_the_json(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("count", agent="helper", output_schema=SCHEMA)]),
        Reply("Got it."),
        api="chat",
    )
    server.script(
        Reply('I counted. {"count": "three"}'),
        Reply('Sorry:\n```json\n{"count": 3}\n```'),
        api="anthropic",
    )
    session, outcome = await turn(runtime, "count with a schema")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert json.loads(result) == {"count": 3}
    [child] = await runtime.delegation.children(session, active_only=False)
    assert child.output == {"count": 3}
    messages = await runtime.transcripts.messages(child.session)
    [note] = corrections(messages)
    assert "count" in note and "is not of type 'integer'" in note
    assert "JSON Schema" in first_text(anthropic(server)[0])


async def test_an_output_schema_mismatch_twice_fails_the_child(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("count", agent="helper", output_schema=SCHEMA)]),
        Reply("It failed."),
        api="chat",
    )
    server.script(Reply("no json here"), Reply('{"count": -1}'), api="anthropic")
    session, outcome = await turn(runtime, "count with a schema")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert "failed" in result and "did not match output_schema twice" in result
    assert '{"count": -1}' in result  # its partial output
    [child] = await runtime.delegation.children(session, active_only=False)
    assert len(corrections(await runtime.transcripts.messages(child.session))) == 1


async def test_a_bad_output_schema_is_an_error_result(
    runtime: Any, server: FakeModelServer
) -> None:
    bad = {"type": "integer", "minimum": "zero"}
    server.script(
        Reply(tool_calls=[delegate("x", agent="helper", output_schema=bad)]),
        Reply("ok"),
        api="chat",
    )
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert "not a valid JSON Schema" in result and "minimum" in result


async def test_a_failing_child_returns_failed_with_its_partial_output(
    runtime: Any, server: FakeModelServer
) -> None:
    from tests.fakes.model_server import Fail

    server.script(
        Reply(tool_calls=[delegate("work", agent="helper")]), Reply("It broke."), api="chat"
    )
    server.script(
        Reply("Halfway there: found 2 of 4.", tool_calls=[ToolCall("list_dir", {"path": "."})]),
        Fail(400, message="bad request from the fake"),
        api="anthropic",
    )
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert "failed" in result and "Halfway there: found 2 of 4." in result


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": os.environ["PATH"],
    }
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@t", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_worktree_childs_changes_land_on_its_branch(
    runtime: Any, server: FakeModelServer, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    git(ws, "init", "-q", "-b", "main")
    (ws / "README").write_text("hello\n")
    git(ws, "add", "README")
    git(ws, "commit", "-q", "-m", "first")
    base = git(ws, "rev-parse", "HEAD").strip()
    server.script(
        Reply(tool_calls=[delegate("add NOTES", agent="helper", worktree=True)]),
        Reply("Merged nothing yet."),
        api="chat",
    )
    server.script(
        Reply(tool_calls=[ToolCall("write_file", {"path": "NOTES", "content": "notes\n"})]),
        Reply("Added NOTES."),
        api="anthropic",
    )
    session, outcome = await turn(runtime, "add notes in a worktree")
    assert outcome.status == "done"
    [child] = await runtime.delegation.children(session, active_only=False)
    branch = f"habakkuk/{child.job}"
    [result] = tool_results(server.requests[-1])
    assert f"branch: {branch}" in result and f"base commit: {base}" in result
    assert "NOTES | 1 +" in result
    assert git(ws, "show", f"{branch}:NOTES") == "notes\n"
    assert git(ws, "log", "-1", "--format=%an <%ae>", branch).strip() == (
        "Habakkuk <habakkuk@localhost>"
    )
    assert not (ws / "NOTES").exists()  # the parent's checkout is untouched
    assert git(ws, "status", "--porcelain") == ""  # the worktrees folder is excluded
    exclude = (ws / ".git" / "info" / "exclude").read_text()
    assert "/.habakkuk-worktrees/" in exclude and not (ws / ".gitignore").exists()
    tree = (ws / ".habakkuk-worktrees" / child.job).resolve()
    assert (tree / "NOTES").exists()
    # The child's session prompt names the worktree as its workspace.
    assert f"workspace folder {tree};" in json.dumps(anthropic(server)[0].json["system"])


async def test_a_worktree_outside_a_git_repository_is_an_error_result(
    runtime: Any, server: FakeModelServer, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir(exist_ok=True)
    server.script(
        Reply(tool_calls=[delegate("x", agent="helper", worktree=True)]),
        Reply("ok"),
        api="chat",
    )
    _, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert "not inside a git repository" in result


async def test_a_repeated_call_reattaches_to_the_same_child(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(Reply(tool_calls=[delegate("once", agent="helper")]), Reply("ok"), api="chat")
    server.script(Reply("only once"), api="anthropic")
    session, outcome = await turn(runtime, "delegate")
    assert outcome.status == "done"
    [child] = await runtime.delegation.children(session, active_only=False)
    job = await runtime.queue.get(child.job)
    assert job is not None
    spec = payload_of(job, SUBTURNS).spec
    # The resumed parent repeats the call: the same id, the stored end, no new model call.
    again = await runtime.delegation.delegate(spec)
    assert again.job == child.job and again.status == "done" and again.reply == "only once"
    assert len(anthropic(server)) == 1
    # An option given makes another call (another child).
    assert subturn_id(replace(spec, model="claude/claude-fake")) != child.job
    assert subturn_id(replace(spec, call_id="other")) == child.job


async def test_a_sub_turn_is_unattended_so_exec_needing_approval_is_denied(
    runtime_factory: Any, server: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    marker = tmp_path / "ran"
    text = config(server, tmp_path / "ws").replace(
        "  helper:\n    model: claude/claude-fake\n    mode: full",
        "  helper:\n    model: claude/claude-fake\n    mode: ask",
    )
    opened = await runtime_factory(text)
    opened.start_workers(channels=False)
    server.script(Reply(tool_calls=[delegate("touch it", agent="helper")]), Reply("ok"), api="chat")
    server.script(
        Reply(tool_calls=[ToolCall("exec", {"command": f"touch {marker}"})]),
        Reply("The exec was denied."),
        api="anthropic",
    )
    _, outcome = await turn(opened, "delegate an exec")
    assert outcome.status == "done" and not marker.exists()
    denied = [
        b["content"]
        for m in anthropic(server)[1].json["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert any("unattended" in str(d) for d in denied)


async def test_a_child_past_the_timeout_is_stopped_and_reported_timed_out(
    runtime_factory: Any, server: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    text = config(server, tmp_path / "ws", extra="delegation:\n  timeout_seconds: 1\n")
    opened = await runtime_factory(text)
    opened.start_workers(channels=False)
    server.script(Reply(tool_calls=[delegate("slow", agent="helper")]), Reply("ok"), api="chat")
    server.gates["anthropic"] = asyncio.Event()  # the child's model call never answers
    session, outcome = await turn(opened, "delegate something slow")
    assert outcome.status == "done"
    [result] = tool_results(server.requests[-1])
    assert "timed out" in result and "delegation.timeout_seconds" in result
    [child] = await opened.delegation.children(session, active_only=False)
    assert child.status == "timed out"


async def test_a_delegate_call_publishes_its_start_and_its_end(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("ping", "call_ping", agent="helper")]), Reply("ok"), api="chat"
    )
    server.script(Reply("pong"), api="anthropic")
    with runtime.bus.subscribe(lambda e: isinstance(e, DelegateStarted | DelegateEnded)) as seen:
        session, outcome = await turn(runtime, "delegate a ping")
        assert outcome.status == "done"
        start = await wait_within(seen.get(), 20)
        end = await wait_within(seen.get(), 20)  # published once the child's job settled
    assert isinstance(start, DelegateStarted) and isinstance(end, DelegateEnded)
    assert (start.session, start.turn, start.call_id) == (session, outcome.turn, "call_ping")
    assert start.agent == "helper" and start.task == "ping" and not start.background
    assert (end.session, end.job, end.status) == (session, start.job, "done")
    assert end.child_session == start.child_session


async def test_the_sweep_queues_a_notice_a_crash_left_unqueued_exactly_once(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(
        Reply(tool_calls=[delegate("later", agent="helper", background=True)]),
        Reply("Started."),
        Reply("Noted."),
        api="chat",
    )
    server.script(Reply("finished later"), api="anthropic")
    session, outcome = await turn(runtime, "in the background")
    assert outcome.status == "done"
    [child] = await runtime.delegation.children(session, active_only=False)
    notice = f"turn_{child.job}"
    await eventually(
        lambda: _finished(runtime, notice), what="the notice turn of the background child"
    )
    assert await runtime.delegation.sweep() == 0  # nothing owed
    # A kill between the child's stored result and its notice: the notice job is missing.
    await runtime.queue.db.write(lambda c: c.execute("DELETE FROM jobs WHERE id = ?", (notice,)))
    assert await runtime.delegation.sweep() == 1
    assert await runtime.delegation.sweep() == 0
    outcome = await runtime.turns.wait_turn(notice, poll=0.05)
    # The requeued notice is the same turn: its reply is in the transcript, so the parent
    # answers it once (no new model call).
    assert outcome.status == "done" and outcome.reply == "Noted."
    assert len([r for r in server.requests if r.api == "chat"]) == 3


async def _finished(runtime: Any, job_id: str) -> bool:
    job = await runtime.queue.get(job_id)
    return job is not None and job.finished


async def test_stopping_the_parent_turn_stops_its_waiting_child_and_says_so(
    runtime: Any, server: FakeModelServer
) -> None:
    server.script(Reply(tool_calls=[delegate("slow", agent="helper")]), api="chat")
    server.gates["anthropic"] = asyncio.Event()  # the child's model call never answers
    session = await runtime.sessions.new_session("main")
    with runtime.bus.subscribe(lambda e: isinstance(e, DelegateStarted)) as started:
        parent = await runtime.turns.submit(session.id, "delegate something slow")
        await wait_within(started.get(), 20)

    async def child_waits_on_the_model() -> bool:
        return bool(anthropic(server))

    await eventually(child_waits_on_the_model, what="the child's model call")
    await runtime.turns.stop_turn(parent)
    outcome = await runtime.turns.wait_turn(parent, poll=0.05)
    assert outcome.status != "done"

    async def child_stopped() -> bool:
        children = await runtime.delegation.children(session.id, active_only=False)
        return [c.status for c in children] == ["stopped"]

    await eventually(child_stopped, what="the child stopped with its parent")
    [child] = await runtime.delegation.children(session.id, active_only=False)
    assert "parent turn was stopped" in child.error
