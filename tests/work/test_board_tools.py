"""The board toolset on a real Board (control.db in a tmp home): through the turn loop (a
fake model server on 127.0.0.1) and by direct calls through the registry."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.registry import ToolContext, ToolRegistry
from habakkuk.engine.toolkit.taint import Taint
from habakkuk.work.board_tools import board_tools
from habakkuk.work.board_types import USER, NewCard
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall

BOARD_TOOLS = (
    "board_create",
    "board_list",
    "board_show",
    "board_comment",
    "board_update",
    "board_complete",
    "board_block",
)


def config(url: str, *, mode: str = "full") -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n"
        f"  main:\n    model: remote/gpt-fake\n    mode: {mode}\n"
        "  other:\n    model: remote/gpt-fake\n"
        "  third:\n    model: remote/gpt-fake\n"
    )


@pytest.fixture
def srv(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("REMOTE_KEY", "k")
    return model_server


@pytest.fixture
async def runtime(runtime_factory: Any, srv: FakeModelServer) -> Any:
    return await runtime_factory(config(srv.base_url))


def context(runtime: Any, agent: str = "main", *, mode: str = "full", **extra: Any) -> ToolContext:
    spec = runtime.config.agents[agent]
    return ToolContext(
        agent=agent,
        session=f"ses_{agent}",
        turn="t",
        workspace=spec.workspace_path,
        mode=mode,
        home=runtime.home.root,
        blobs=runtime.blobs,
        bus=runtime.bus,
        taint=Taint(),
        **extra,
    )


async def call(
    runtime: Any, tool: str, args: Any, agent: str = "main", *, ctx: ToolContext | None = None
) -> Any:
    allowed = {t.name for t in runtime.tools.tools_for(["board"])}
    used = ctx or context(runtime, agent)
    return await runtime.tools.call(ToolUseBlock("c1", tool, args), used, allowed)


def card_id_in(text: str) -> str:
    return next(word.strip(".,:;()'") for word in text.split() if word.startswith("card_"))


async def test_the_board_toolset_is_registered_and_on_by_default(runtime: Any) -> None:
    names = {t.name for t in runtime.tools.tools_for(["board"])}
    assert names == set(BOARD_TOOLS)
    assert "board" in runtime.config.agents["main"].toolsets


async def test_a_turn_creates_a_card_and_lists_it(runtime: Any, srv: FakeModelServer) -> None:
    session = (await runtime.sessions.new_session("main")).id
    # Unassigned, so a dispatcher started with the workers leaves it on the board.
    create = {"title": "Write the report", "priority": 5, "body": "Q3"}
    srv.script(
        Reply(tool_calls=[ToolCall("board_create", create)]),
        Reply(tool_calls=[ToolCall("board_list", {})]),
        Reply(text="Queued."),
    )
    runtime.start_workers(channels=False)
    submitted = await runtime.turns.submit(session, "hand the report to other")
    outcome = await wait_within(runtime.turns.wait_turn(submitted), 30)
    assert outcome.status == "done", outcome.error
    created, listed = [
        r for m in await runtime.sessions.messages(session) for r in m.message.tool_results
    ]
    assert not created.is_error, created.text
    card = await runtime.board.get(card_id_in(created.text))
    assert (card.title, card.assignee, card.priority, card.body) == (
        "Write the report",
        "",
        5,
        "Q3",
    )
    assert (card.created_by, card.creator_session, card.reply_to) == ("main", session, None)
    assert f"{card.id} is {card.status}" in created.text
    assert card.id in listed.text and "Write the report" in listed.text


async def test_a_card_created_in_a_chat_keeps_the_chats_reply_address(
    runtime: Any, srv: FakeModelServer
) -> None:
    runtime.channel_service()  # the outbox that knows a turn's chat (no adapter runs)
    session = (await runtime.sessions.new_session("main")).id
    srv.script(
        Reply(tool_calls=[ToolCall("board_create", {"title": "Chase the invoice"})]),
        Reply(text="On the board."),
    )
    runtime.start_workers(channels=False)
    address = ReplyTo("telegram:42", "7", "telegram:42")
    submitted = await runtime.turns.submit(session, "put it on the board", reply_to=address)
    outcome = await wait_within(runtime.turns.wait_turn(submitted), 30)
    assert outcome.status == "done", outcome.error
    (card,) = await runtime.board.list_cards()
    assert card.reply_to == ReplyTo("telegram:42") and card.creator_session == session


async def test_the_assignee_completes_its_card_and_the_creator_cannot(runtime: Any) -> None:
    created = await call(runtime, "board_create", {"title": "Fix the build", "assignee": "other"})
    card_id = card_id_in(created.text)
    refused = await call(runtime, "board_complete", {"card": card_id, "result": "done"})
    assert refused.is_error and refused.text.startswith("board_complete: ")
    assert (await runtime.board.get(card_id)).status == "todo"
    done = await call(
        runtime, "board_complete", {"card": card_id, "result": "CI green: run 41"}, "other"
    )
    assert not done.is_error, done.text
    assert f"{card_id} is done" in done.text
    stored = await runtime.board.get(card_id)
    assert (stored.status, stored.result) == ("done", "CI green: run 41")


async def test_blocking_asks_a_question_that_the_card_keeps(runtime: Any) -> None:
    card = await runtime.board.create(NewCard(title="Book travel", assignee="other"), by=USER)
    blocked = await call(
        runtime, "board_block", {"card": card.id, "reason": "Which dates?"}, "other"
    )
    assert not blocked.is_error, blocked.text
    assert f"{card.id} is blocked" in blocked.text and "Which dates?" in blocked.text
    stored = await runtime.board.get(card.id)
    assert (stored.status, stored.blocked_kind, stored.blocked_reason) == (
        "blocked",
        "question",
        "Which dates?",
    )
    other_agent = await call(
        runtime, "board_block", {"card": card.id, "reason": "mine now"}, "third"
    )
    assert other_agent.is_error


async def test_comment_show_and_update_read_the_card_back(runtime: Any) -> None:
    created = await call(runtime, "board_create", {"title": "Tidy docs", "assignee": "other"})
    card_id = card_id_in(created.text)
    commented = await call(runtime, "board_comment", {"card": card_id, "text": "see #12"}, "third")
    assert not commented.is_error and card_id in commented.text
    updated = await call(
        runtime, "board_update", {"card": card_id, "assignee": "third", "priority": -3}
    )
    assert not updated.is_error, updated.text
    assert "priority -3" in updated.text and "assigned to third" in updated.text
    shown = await call(runtime, "board_show", {"card": card_id})
    assert "Tidy docs" in shown.text and "third: see #12" in shown.text
    cancelled = await call(runtime, "board_update", {"card": card_id, "action": "cancel"})
    assert f"{card_id} is cancelled" in cancelled.text
    reopened = await call(runtime, "board_update", {"card": card_id, "action": "reopen"})
    assert f"{card_id} is todo" in reopened.text
    assert (await runtime.board.get(card_id)).status == "todo"


async def test_an_agent_cannot_update_a_card_it_neither_created_nor_holds(runtime: Any) -> None:
    card = await runtime.board.create(NewCard(title="Someone's", assignee="other"), by=USER)
    result = await call(runtime, "board_update", {"card": card.id, "action": "cancel"}, "third")
    assert result.is_error and result.text.startswith("board_update: ")
    assert (await runtime.board.get(card.id)).status == "todo"


async def test_board_update_without_a_change_says_what_to_give(runtime: Any) -> None:
    card = await runtime.board.create(NewCard(title="t"), by=USER)
    result = await call(runtime, "board_update", {"card": card.id})
    assert result.is_error and "give assignee, priority or action" in result.text


async def test_a_dependency_that_does_not_exist_is_an_error_result(runtime: Any) -> None:
    result = await call(
        runtime, "board_create", {"title": "Second", "depends_on": ["card_0000000000"]}
    )
    assert result.is_error and "card_0000000000" in result.text
    assert await runtime.board.list_cards(status="all") == []


async def test_a_card_waiting_on_another_says_so(runtime: Any) -> None:
    first = await runtime.board.create(NewCard(title="First"), by=USER)
    created = await call(runtime, "board_create", {"title": "Second", "depends_on": [first.id]})
    assert not created.is_error, created.text
    assert f"waiting on {first.id} (todo)" in created.text


@pytest.mark.parametrize(
    "args",
    [
        {"title": 42},
        {"title": "x" * 5000},
        {"title": "ok", "priority": "high"},
        {"title": "ok", "priority": 101},
        {"title": "ok", "depends_on": "card_1"},
        {"title": "ok", "body": "b" * 30_000},
        {"title": "ok", "shell": "rm -rf /"},
        ["not", "an", "object"],
    ],
)
async def test_hostile_create_inputs_are_error_results(runtime: Any, args: Any) -> None:
    result = await call(runtime, "board_create", args)
    assert result.is_error
    assert await runtime.board.list_cards(status="all") == []


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("board_show", {"card": "card_ffffffffff"}),
        ("board_comment", {"card": "nope", "text": "hi"}),
        ("board_complete", {"card": "card_ffffffffff", "result": "r"}),
        ("board_block", {"card": "card_ffffffffff", "reason": "r"}),
        ("board_update", {"card": "card_ffffffffff", "priority": 1}),
        ("board_comment", {"card": 7, "text": "hi"}),
        ("board_comment", {"card": "c", "text": "t" * 30_000}),
        ("board_list", {"status": "sideways"}),
    ],
)
async def test_unknown_cards_and_bad_arguments_are_error_results(
    runtime: Any, tool: str, args: dict[str, Any]
) -> None:
    result = await call(runtime, tool, args)
    assert result.is_error and "Traceback" not in result.text


async def test_an_id_prefix_that_names_two_cards_is_an_error_result(runtime: Any) -> None:
    cards = [await runtime.board.create(NewCard(title=f"c{n}"), by=USER) for n in range(17)]
    firsts = [c.id[len("card_")] for c in cards]
    shared = next(ch for ch in firsts if firsts.count(ch) > 1)  # 17 cards, 16 hex digits
    result = await call(runtime, "board_show", {"card": "card_" + shared})
    assert result.is_error and result.text.startswith("board_show: ")
    unique = cards[0].id
    shown = await call(runtime, "board_show", {"card": unique})
    assert not shown.is_error and unique in shown.text


async def test_read_only_mode_reads_comments_completes_and_blocks_but_cannot_create(
    runtime: Any,
) -> None:
    mine = await runtime.board.create(NewCard(title="Mine", assignee="main"), by=USER)
    other = await runtime.board.create(NewCard(title="Also mine", assignee="main"), by=USER)

    def read_only() -> ToolContext:
        return context(runtime, mode="read-only")

    for tool, args in (
        ("board_list", {}),
        ("board_show", {"card": mine.id}),
        ("board_comment", {"card": mine.id, "text": "looking"}),
        ("board_complete", {"card": mine.id, "result": "checked: 3 files"}),
        ("board_block", {"card": other.id, "reason": "which one?"}),
    ):
        result = await call(runtime, tool, args, ctx=read_only())
        assert not result.is_error, (tool, result.text)
    for tool, args in (
        ("board_create", {"title": "new"}),
        ("board_update", {"card": other.id, "priority": 9}),
    ):
        result = await call(runtime, tool, args, ctx=read_only())
        assert result.is_error and "denied" in result.text, (tool, result.text)
    assert (await runtime.board.get(other.id)).priority == 0
    assert len(await runtime.board.list_cards(status="all")) == 2


async def test_creating_and_updating_need_approval_in_workspace_mode_and_unattended_deny(
    runtime: Any,
) -> None:
    result = await call(
        runtime, "board_create", {"title": "x"}, ctx=context(runtime, mode="workspace")
    )
    assert result.is_error and "denied" in result.text  # no approver: unattended
    commented = await call(runtime, "board_list", {}, ctx=context(runtime, mode="workspace"))
    assert not commented.is_error


async def test_creating_and_updating_a_card_does_not_taint_the_turn(runtime: Any) -> None:
    ctx = context(runtime)
    created = await call(runtime, "board_create", {"title": "clean"}, ctx=ctx)
    card_id = card_id_in(created.text)
    await call(runtime, "board_update", {"card": card_id, "priority": 2}, ctx=ctx)
    assert not ctx.taint.tainted


async def test_a_run_without_the_board_says_so(runtime: Any) -> None:
    # The board toolset built without a board (None), called as the registry calls it.
    registry = ToolRegistry()
    for tool in board_tools(None, lambda: None):
        registry.register(tool, "board")
    use = ToolUseBlock("c1", "board_list", {})
    result = await registry.call(use, context(runtime), {"board_list"})
    assert result.is_error and "the board is not available" in result.text


async def test_a_card_or_comment_with_a_control_character_is_an_error_result(
    runtime: Any,
) -> None:
    made = await call(runtime, "board_create", {"title": "Rename \u202etxt.exe"})
    assert made.is_error and "U+202E (RIGHT-TO-LEFT OVERRIDE)" in made.text
    made = await call(runtime, "board_create", {"title": "Ok", "body": "raw\x00byte"})
    assert made.is_error and "U+0000 (NUL) at position 4" in made.text
    card = await runtime.board.create(NewCard("Target"))
    said = await call(runtime, "board_comment", {"card": card.id, "text": "\x1b[2Jgone"})
    assert said.is_error and "U+001B (ESC)" in said.text
    assert [c.title for c in await runtime.board.list_cards(status="all")] == ["Target"]
    assert (await runtime.board.get(card.id)).comments == ()
