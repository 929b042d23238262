"""The events bus: typed events, fan-out without ever blocking the publisher, and close."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.events import (
    BY_KIND,
    CATALOGUE,
    ENVELOPE,
    ApprovalAsked,
    EventBus,
    EventPayload,
    JobFinished,
    SubscriptionClosed,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnReset,
    TurnStarted,
    TurnText,
    TurnThinking,
    event_from_json,
)
from habakkuk.engine.toolkit.approvals import ApprovalRequest
from habakkuk.server.chat import activity

PACKAGE = Path(__file__).resolve().parents[2] / "habakkuk"


def text(n: int) -> TurnText:
    return TurnText(session="s", turn="t", text=str(n))


async def test_every_subscriber_gets_every_event_in_order() -> None:
    bus = EventBus()
    with bus.subscribe() as a, bus.subscribe() as b:
        for n in range(3):
            bus.publish(text(n))
        for sub in (a, b):
            got = [await asyncio.wait_for(sub.get(), 1) for _ in range(3)]
            assert [e.text for e in got if isinstance(e, TurnText)] == ["0", "1", "2"]


async def test_a_slow_subscriber_drops_its_oldest_events_and_never_blocks() -> None:
    bus = EventBus()
    with bus.subscribe(maxsize=4) as slow, bus.subscribe(maxsize=100) as fast:
        for n in range(10):
            bus.publish(text(n))  # returns at once: no await
        assert slow.dropped == 6
        kept = [slow.get_nowait() for _ in range(4)]
        assert [e.text for e in kept if isinstance(e, TurnText)] == ["6", "7", "8", "9"]
        assert fast.dropped == 0


async def test_filter_and_close() -> None:
    bus = EventBus()
    sub = bus.subscribe(lambda e: e.session == "mine")
    bus.publish(TurnReset(session="other", turn="t"))
    bus.publish(TurnReset(session="mine", turn="t"))
    assert (await asyncio.wait_for(sub.get(), 1)).session == "mine"
    assert sub.get_nowait() is None
    sub.close()
    assert bus.subscriber_count == 0


def test_publish_takes_only_an_event_of_the_catalogue() -> None:
    with pytest.raises(TypeError, match="publish takes an event of the catalogue"):
        EventBus().publish("turn.text")  # type: ignore[arg-type]  # a value the types forbid, on purpose


async def test_closing_a_subscription_ends_a_reader_iterating_it() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    seen: list[EventPayload] = []
    first = asyncio.Event()

    async def read() -> None:
        async for event in subscription:
            seen.append(event)
            first.set()

    reader = asyncio.create_task(read())
    bus.publish(text(1))
    await asyncio.wait_for(first.wait(), 5)  # the reader took it and waits for the next
    subscription.close()
    await asyncio.wait_for(reader, 5)  # ends: it does not wait for an event that never comes
    assert seen == [text(1)]


async def test_closing_a_subscription_wakes_a_reader_waiting_in_get() -> None:
    bus = EventBus()
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)  # the reader is now blocked on the empty queue
    subscription.close()
    with pytest.raises(SubscriptionClosed):
        await asyncio.wait_for(waiting, 5)
    with pytest.raises(SubscriptionClosed):  # and every later get() says so at once
        await asyncio.wait_for(subscription.get(), 5)
    assert subscription.get_nowait() is None


# -- the catalogue and its JSON ---------------------------------------------------------------

REQUEST = ApprovalRequest("main", "s1", "t1", "exec", {"command": "ls"}, "run ls", id="apr_1")
SAMPLES: dict[str, dict[str, Any]] = {
    "turn.start": {"turn": "t1", "agent": "main", "compact": False},
    "turn.end": {"turn": "t1", "status": "done", "reply": "Hi.", "error": ""},
    "turn.text": {"turn": "t1", "text": "Hel"},
    "turn.thinking": {"turn": "t1", "text": "hmm"},
    "turn.tool_call": {"turn": "t1", "call_id": "c1", "tool": "read"},
    "turn.tool_args": {"turn": "t1", "call_id": "c1", "arguments": '{"pa'},
    "turn.reset": {"turn": "t1"},
    "turn.message": {
        "turn": "t1",
        "model": "remote/m",
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "stop_reason": "end_turn",
    },
    "turn.compaction": {"turn": "t1", "tokens_before": 9000, "tokens_after": 2000, "dropped": 12},
    "tool.start": {"call_id": "c1", "tool": "read", "title": "read a.txt", "input": {"path": "a"}},
    "tool.end": {
        "call_id": "c1",
        "tool": "read",
        "is_error": False,
        "status": "ok",
        "seconds": 0.25,
        "preview": "hello",
    },
    "approval.pending": {"id": "apr_1", "request": REQUEST},
    "approval.answered": {"id": "apr_1"},
    "approval.withdrawn": {"id": "apr_1"},
    "approval.review": {
        "agent": "main",
        "turn": "t1",
        "tool": "exec",
        "summary": "run ls",
        "decision": "allow",
        "reason": "harmless",
        "model": "mock/judge",
    },
    "question.pending": {"id": "qst_1", "request": {"questions": []}},
    "question.answered": {"id": "qst_1"},
    "question.withdrawn": {"id": "qst_1"},
    "job.finished": {"job": "t1", "job_kind": "turn", "status": "done", "attempts": 1},
    "delegate.start": {
        "turn": "t1",
        "call_id": "call_1",
        "job": "sub_1",
        "child_session": "ses_sub_1",
        "agent": "main",
        "task": "Count the files.",
        "background": False,
    },
    "delegate.end": {
        "job": "sub_1",
        "child_session": "ses_sub_1",
        "status": "done",
        "seconds": 1.5,
    },
    "board.card": {
        "card": "card_1",
        "title": "Write the report",
        "status": "todo",
        "assignee": "ops",
        "revision": 1,
    },
    "config.reload": {
        "applied": ["hooks"],
        "restart": ["providers"],
        "invalid": "",
    },
    "session.renamed": {"title": "Lisbon trip plans", "source": "generated"},
    "goal.change": {
        "goal": "goal_1",
        "status": "running",
        "counted": 2,
        "budget": 10,
        "notice": "",
    },
    "node.change": {
        "node": "phone",
        "change": "connected",
        "platform": "browser",
        "caps": ["system.notify"],
    },
}


def test_the_samples_cover_the_whole_catalogue_with_each_kinds_exact_fields() -> None:
    assert set(SAMPLES) == set(BY_KIND) == {cls.kind for cls in CATALOGUE}
    for kind, data in SAMPLES.items():
        own = {f.name for f in fields(BY_KIND[kind]) if f.name not in ENVELOPE}
        assert own == set(data), kind


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_kind_round_trips_through_its_json(kind: str) -> None:
    event = BY_KIND[kind](session="s1", at=1700000000.5, **SAMPLES[kind])
    wire = event.to_json()
    assert wire["kind"] == kind and wire["session"] == "s1" and wire["at"] == 1700000000.5
    assert set(wire["data"]) == set(SAMPLES[kind])
    assert json.loads(json.dumps(wire)) == wire  # plain JSON, objects as dicts
    again = event_from_json(json.loads(json.dumps(wire)))
    assert type(again) is type(event) and again.to_json() == wire
    if kind != "approval.pending":  # its request comes back as a dict
        assert again == event
    assert event.data == SAMPLES[kind]


def test_an_unknown_kind_in_json_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown event kind 'turn\.nope'"):
        event_from_json({"kind": "turn.nope", "session": "s", "data": {}})


def test_the_approval_request_travels_as_its_fields() -> None:
    wire = ApprovalAsked(session="s1", id="apr_1", request=REQUEST).to_json()
    assert wire["data"]["request"] == {
        "agent": "main",
        "session": "s1",
        "turn": "t1",
        "tool": "exec",
        "input": {"command": "ls"},
        "summary": "run ls",
        "reason": "",
        "id": "apr_1",
        "call_id": "",
    }


# The dashboard's activity items (/live, /api/live) exactly as the code before the typed
# catalogue sent them, from the same events.
ACTIVITY = [
    (
        TurnText(session="s1", turn="t1", text="Hel"),
        '{"kind": "text", "tool": "", "id": "", "input": "", "text": "Hel", '
        '"is_error": false, "turn": "t1", "session": "s1"}',
    ),
    (
        TurnThinking(session="s1", turn="t1", text="hmm"),
        '{"kind": "thinking", "tool": "", "id": "", "input": "", "text": "hmm", '
        '"is_error": false, "turn": "t1", "session": "s1"}',
    ),
    (
        ToolStarted(
            session="s1",
            call_id="c1",
            tool="read",
            title="read a.txt",
            input={"path": "a.txt", "n": 1},
        ),
        '{"kind": "tool_start", "tool": "read", "id": "c1", '
        '"input": "{\\"path\\": \\"a.txt\\", \\"n\\": 1}", "text": "read a.txt", '
        '"is_error": false, "turn": "", "session": "s1"}',
    ),
    (
        ToolEnded(
            session="s1",
            call_id="c1",
            tool="read",
            is_error=False,
            status="ok",
            seconds=0.25,
            preview="hello",
        ),
        '{"kind": "tool_done", "tool": "read", "id": "c1", "input": "", "text": "hello", '
        '"is_error": false, "turn": "", "session": "s1"}',
    ),
    (
        ToolEnded(
            session="s1",
            call_id="c2",
            tool="shell",
            is_error=True,
            status="not_run",
            seconds=None,
            preview="not run",
        ),
        '{"kind": "tool_done", "tool": "shell", "id": "c2", "input": "", "text": "not run", '
        '"is_error": true, "turn": "", "session": "s1"}',
    ),
    (
        TurnReset(session="s1", turn="t1"),
        '{"kind": "retry", "tool": "", "id": "", "input": "", "text": "", '
        '"is_error": false, "turn": "t1", "session": "s1"}',
    ),
    (
        TurnEnded(session="s1", turn="t1", status="done", reply="Hi."),
        '{"kind": "turn_done", "tool": "", "id": "", "input": "", "text": "Hi.", '
        '"is_error": false, "turn": "t1", "session": "s1"}',
    ),
    (
        TurnEnded(session="s1", turn="t1", status="failed", error="boom"),
        '{"kind": "turn_error", "tool": "", "id": "", "input": "", "text": "boom", '
        '"is_error": true, "turn": "t1", "session": "s1"}',
    ),
    (
        TurnEnded(session="s1", turn="t1", status="stopped"),
        '{"kind": "turn_error", "tool": "", "id": "", "input": "", "text": "stopped", '
        '"is_error": true, "turn": "t1", "session": "s1"}',
    ),
    (TurnStarted(session="s1", turn="t1", agent="main"), "null"),
    (JobFinished(session="s1", job="t1", job_kind="turn", status="done", attempts=1), "null"),
]


@pytest.mark.parametrize(("event", "sent"), ACTIVITY)
def test_the_dashboard_gets_the_same_activity_json_as_before(
    event: EventPayload, sent: str
) -> None:
    assert json.dumps(activity(event)) == sent


def test_no_module_dispatches_on_an_event_kind_string() -> None:
    # An event's dotted kind is its wire name only; code dispatches on its class.
    kinds = "|".join(re.escape(k) for k in BY_KIND)
    quoted = re.compile(rf"[\"']({kinds})[\"']")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "events.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if quoted.search(line) or re.search(r"\bkind\.startswith\(\"(turn|tool|approval)", line)
    ]
    assert found == []
