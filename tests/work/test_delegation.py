"""Delegation end to end (spec 000 "Delegation"): the delegate tool queues a sub-turn job,
the sub-turn pool runs the child's turn on the scripted model server, and the parent's
next request carries the child's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from habakkuk.work.delegation_types import SUBTURN_KIND
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import eventually
from tests.work.delegation_env import config, corrections, delegate, tool_results


@pytest.fixture
async def server() -> Any:
    async with FakeModelServer() as srv:
        yield srv


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
    server.gates["anthropic"] = gate = __import__("asyncio").Event()
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
