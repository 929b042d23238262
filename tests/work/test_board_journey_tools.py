"""The board's "done when", with the real board tools over the real OpenAI wire: in the
web chat the user asks the agent to split a job into two cards for two agents, the
second depending on the first; the agent calls board_create twice (the second with the
first card's id, read from the first call's result); the dispatcher runs the first as
the researcher's turn, which ends it with board_complete; only then the second starts,
with the first's result in its first message; both results come back to the chat.

The fake model server answers from each request's own content (a responder), as a
model reads its prompt, because the parent's turn, the card turns and the notices call
it in an order no queue can foresee."""

from __future__ import annotations

import re
from typing import Any

import pytest

from habakkuk.work.board_types import attempt_session
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, ToolCall
from tests.helpers import eventually
from tests.server.conftest import serve  # noqa: F401  (the fixture)

CONVERSATION = "w1"
CARD_ID = re.compile(r"\b(card_[0-9a-f]+)\b")


def config(url: str) -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n"
        "  main:\n    model: remote/gpt-fake\n    mode: full\n"
        "  researcher:\n    model: remote/gpt-fake\n    mode: full\n"
        "  writer:\n    model: remote/gpt-fake\n    mode: full\n"
        "board:\n  dispatch_seconds: 600\n"  # only a wake dispatches: no timing luck
    )


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def answer(request: RecordedRequest) -> Reply:
    """What the agents say, read from the conversation the request carries."""
    messages = [m for m in request.json["messages"] if m.get("role") != "system"]
    users = [text_of(m) for m in messages if m.get("role") == "user"]
    tools = [text_of(m) for m in messages if m.get("role") == "tool"]
    first, last = users[0], messages[-1]
    if "split the launch" in first and last.get("role") == "user" and len(users) == 1:
        return Reply(
            tool_calls=[
                ToolCall("board_create", {"title": "Research the venue", "assignee": "researcher"})
            ]
        )
    if "split the launch" in first and len(tools) == 1 and last.get("role") == "tool":
        (research,) = CARD_ID.findall(tools[0])[:1]
        return Reply(
            tool_calls=[
                ToolCall(
                    "board_create",
                    {
                        "title": "Announce the launch",
                        "assignee": "writer",
                        "depends_on": [research],
                    },
                )
            ]
        )
    if "You have been assigned board card" in first and last.get("role") == "user":
        (card,) = CARD_ID.findall(first)[:1]
        title = re.search(r"Title: (.+)", first)
        assert title is not None
        proof = "venue booked, confirmation 4711" if "Research" in title[1] else "post sent"
        if "Result of" in first:  # the announcement sees the research's result
            proof += " (after: " + first.split("Result of", 1)[1].splitlines()[1] + ")"
        return Reply(tool_calls=[ToolCall("board_complete", {"card": card, "result": proof})])
    if last.get("role") == "tool":
        return Reply(text="Done." if "You have been assigned" in first else "Both are on it.")
    latest = users[-1]
    if latest.startswith("Board card"):
        lines = latest.splitlines()
        result = lines[lines.index("Result:") + 1] if "Result:" in lines else ""
        return Reply(text=f"Update: {lines[0]} {result}")
    return Reply(text="noted")


@pytest.fixture
def srv(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("REMOTE_KEY", "k")
    model_server.responder = answer
    return model_server


async def test_a_job_split_into_two_dependent_cards_runs_in_order_and_answers_the_chat(
    serve: Any,  # noqa: F811
    srv: FakeModelServer,
) -> None:
    served = await serve(config(srv.base_url), workers=False)
    runtime = served.runtime
    runtime.start_workers(maintenance=True)  # the dispatcher too, as --serve runs it
    asked = await served.post_json(
        "/api/chat", {"conversation": CONVERSATION, "text": "please split the launch"}
    )

    async def said() -> list[str]:
        events = await served.server.web_store().events(CONVERSATION)
        return [e.text for e in events if e.role == "assistant"]

    async def both_results_back() -> bool:
        return len([t for t in await said() if t.startswith("Update:")]) >= 2

    await eventually(both_results_back, what="both cards' results in the chat", timeout=60)
    replies = await said()
    assert replies[0] == "Both are on it."
    updates = [t for t in replies if t.startswith("Update:")]
    assert len(updates) == 2  # each result once
    assert "'Research the venue'" in updates[0] and "confirmation 4711" in updates[0]
    assert "'Announce the launch'" in updates[1] and "post sent" in updates[1]

    cards = {c.title: c for c in await runtime.board.list_cards(status="all")}
    research = await runtime.board.get(cards["Research the venue"].id)
    announce = await runtime.board.get(cards["Announce the launch"].id)
    assert (research.status, announce.status) == ("done", "done")
    assert research.created_by == announce.created_by == "main"
    assert research.creator_session == asked["session"]
    assert announce.depends_on == (research.id,)
    # The second was claimed only after the first was done, and saw its result.
    completed = next(e.at for e in research.events if e.kind == "completed")
    claimed = next(e.at for e in announce.events if e.kind == "claimed")
    assert claimed >= completed
    assert "confirmation 4711" in announce.result
    first = await runtime.sessions.messages(attempt_session(announce.id, 1))
    assert "venue booked, confirmation 4711" in first[0].message.text
    # Each card ran once, as its assignee's turn.
    assert (research.attempt, announce.attempt) == (1, 1)
    writer = await runtime.sessions.session(attempt_session(announce.id, 1))
    assert writer.agent == "writer" and writer.origin == "board"
    # The chat's agent has the board tools (on by default): they load on demand, so its
    # first request names them in tool_search's description, and those called are listed
    # in the requests after the calls, after the first request's tools.
    first = {t["function"]["name"]: t["function"] for t in srv.requests[0].json["tools"]}
    assert "board_{block,comment,complete,create,list," in first["tool_search"]["description"]
    later = [[t["function"]["name"] for t in r.json.get("tools", [])] for r in srv.requests[1:]]
    assert [*first, "board_create"] in later
