"""A delegated child's progress in the chat, under its delegate call's card, live.

The delegate tool announces a child (DelegateStarted, session = the parent) and its end
(DelegateEnded); the child's own turn publishes the ordinary turn events with session =
the child session. These tests publish exactly those on the runtime's real bus, as the
delegate tool and the child's turn do, and read what the chat draws.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from habakkuk.engine.events import (
    DelegateEnded,
    DelegateStarted,
    EventPayload,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnStarted,
    TurnText,
)
from habakkuk.engine.llm.types import Message, TextBlock, ToolUseBlock
from habakkuk.screens.chat import ChatScreen
from habakkuk.widgets.child_progress import TEXT_LINES, TOOL_LINES, ChildProgress
from habakkuk.widgets.tool_card import ToolCard
from tests.conftest import WriteConfig, mock_config
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import eventually
from tests.tui.conftest import (
    ChatApp,
    Running,
    chat_of,
    make_app,
    markdown_text,
    ready,
    running,
    runtime_of,
)
from tests.work.delegation_env import config as delegation_config
from tests.work.delegation_env import delegate

PARENT_TURN = "turn_parent000001"
FIXED_TIME = 1_790_000_000.0


async def shown_session(ui: Running, session_id: str | None = None) -> str:
    """A session of the default agent, shown in the chat."""
    session = await ui.runtime.sessions.new_session(None, origin="tui", session_id=session_id)
    await ui.chat.open_session(session.id).wait()
    return session.id


def publish(ui: Running, *events: EventPayload) -> None:
    """Publish on the runtime's bus, as the delegate tool and the child's turn do."""
    for event in events:
        ui.runtime.bus.publish(event)


def delegate_call(
    parent: str,
    call_id: str,
    child: str,
    *,
    agent: str = "researcher",
    at: float | None = None,
    card: bool = True,
) -> list[EventPayload]:
    """The parent's delegate call starting (unless not `card`) and announcing its child."""
    times: dict[str, Any] = {} if at is None else {"at": at}
    events: list[EventPayload] = []
    if card:
        events.append(
            ToolStarted(
                session=parent,
                call_id=call_id,
                tool="delegate",
                title=f"ask {agent}",
                input={"task": f"task of {agent}", "agent": agent},
                **times,
            )
        )
    events.append(
        DelegateStarted(
            session=parent,
            turn=PARENT_TURN,
            call_id=call_id,
            job=f"job_{child}",
            child_session=child,
            agent=agent,
            task=f"task of {agent}",
            background=False,
            **times,
        )
    )
    return events


def _card(ui: Running, call_id: str) -> ToolCard:
    cards = [c for c in ui.screen.query(ToolCard) if c.call_id == call_id]
    assert len(cards) == 1, f"one card for {call_id}, found {len(cards)}"
    return cards[0]


def progress_of(ui: Running, call_id: str) -> ChildProgress:
    return _card(ui, call_id).query_one(ChildProgress)


def followed(ui: Running, call_id: str) -> bool:
    """The card of `call_id` shows a child's progress."""
    return any(c.call_id == call_id and c.query(ChildProgress) for c in ui.screen.query(ToolCard))


def drawn(progress: ChildProgress, part: str) -> str:
    """One part of the child's progress as drawn (status, tools, text); "" until the
    progress has composed its lines (it is mounted first)."""
    found = progress.query(f".child-{part}")
    return str(found.first().render()) if found else ""


async def test_a_childs_progress_shows_live_under_its_delegate_card_then_folds(
    chat_app: ChatApp,
) -> None:
    async with chat_app() as ui:
        parent = await shown_session(ui)
        child = "ses_child00000001"
        publish(ui, *delegate_call(parent, "call_d1", child))
        await eventually(lambda: followed(ui, "call_d1"), what="the child's progress")
        progress = progress_of(ui, "call_d1")
        await eventually(lambda: "researcher" in drawn(progress, "status"), what="its agent")
        assert "queued" in drawn(progress, "status")

        publish(ui, TurnStarted(session=child, turn="turn_child1", agent="researcher"))
        await eventually(lambda: "running" in drawn(progress, "status"), what="running")
        # The child's turn is not the parent's: the chat's own status stays idle.
        assert ui.chat.running_turn is None

        lines = [f"line {n} of the child's notes\n" for n in range(1, 9)]
        publish(ui, *(TurnText(session=child, turn="turn_child1", text=t) for t in lines))
        await eventually(lambda: "line 8" in drawn(progress, "text"), what="the text's tail")
        tail = drawn(progress, "text").splitlines()
        assert tail == [line.strip() for line in lines[-TEXT_LINES:]]
        # The child's text is shown in its card only, never as the parent's reply.
        assert "line 8" not in markdown_text(ui.app)

        publish(
            ui,
            ToolStarted(
                session=child,
                call_id="c1",
                tool="read_file",
                title="notes.md",
                input={"path": "notes.md"},
            ),
        )
        await eventually(
            lambda: "calling read_file" in drawn(progress, "status"), what="the call it makes"
        )
        assert "▶ read_file  notes.md" in drawn(progress, "tools")
        publish(
            ui,
            ToolEnded(
                session=child,
                call_id="c1",
                tool="read_file",
                is_error=False,
                status="ok",
                seconds=0.1,
                preview="…",
            ),
        )
        await eventually(lambda: "✓ read_file  notes.md" in drawn(progress, "tools"), what="ok")
        assert "running" in drawn(progress, "status")

        publish(
            ui,
            TurnEnded(session=child, turn="turn_child1", status="done", reply="summary"),
            DelegateEnded(
                session=parent, job=f"job_{child}", child_session=child, status="done", seconds=4.2
            ),
        )
        await eventually(lambda: progress.ended, what="the child's end")
        await eventually(lambda: "4.2s" in drawn(progress, "status"), what="the summary line")
        summary = drawn(progress, "status")
        assert "researcher  done  4.2s  1 tool call" in summary
        # The child's turn ending is not a turn of the shown session ending.
        assert not ui.seen.of(ChatScreen.TurnFinished)
        assert progress.query_one(".child-tools").styles.display == "none"
        assert progress.query_one(".child-text").styles.display == "none"
        # An ended child's session is no longer followed.
        publish(ui, TurnText(session=child, turn="turn_child2", text="late\n"))
        await ui.pilot.pause()
        assert "late" not in drawn(progress, "text")


async def test_a_child_of_another_session_is_ignored(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        parent = await shown_session(ui)
        other = (await ui.runtime.sessions.new_session(None, origin="tui")).id
        publish(
            ui,
            ToolStarted(session=parent, call_id="call_mine", tool="read_file", title="x", input={}),
        )
        publish(ui, *delegate_call(other, "call_theirs", "ses_elsewhere0001"))
        publish(
            ui,
            TurnStarted(session="ses_elsewhere0001", turn="turn_x", agent="researcher"),
            TurnText(session="ses_elsewhere0001", turn="turn_x", text="not for this chat\n"),
        )
        await eventually(lambda: [c for c in ui.screen.query(ToolCard)], what="our card")
        await ui.pilot.pause()
        assert [c.call_id for c in ui.screen.query(ToolCard)] == ["call_mine"]
        assert not ui.screen.query(ChildProgress)
        assert "not for this chat" not in markdown_text(ui.app)
        assert ui.chat.running_turn is None


async def test_two_children_each_show_under_their_own_card(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        parent = await shown_session(ui)
        publish(ui, *delegate_call(parent, "call_a", "ses_child_a", agent="alpha"))
        # The second call's card is not shown yet when its child is announced.
        publish(ui, *delegate_call(parent, "call_b", "ses_child_b", agent="beta", card=False))
        publish(
            ui,
            TurnStarted(session="ses_child_a", turn="t_a", agent="alpha"),
            TurnStarted(session="ses_child_b", turn="t_b", agent="beta"),
            TurnText(session="ses_child_a", turn="t_a", text="alpha writes\n"),
            TurnText(session="ses_child_b", turn="t_b", text="beta writes\n"),
        )
        for n in range(TOOL_LINES + 2):
            publish(
                ui,
                ToolStarted(
                    session="ses_child_b", call_id=f"b{n}", tool="grep", title=f"g{n}", input={}
                ),
            )
        await eventually(
            lambda: followed(ui, "call_a") and followed(ui, "call_b"), what="both children"
        )
        a, b = progress_of(ui, "call_a"), progress_of(ui, "call_b")
        await eventually(lambda: "alpha writes" in drawn(a, "text"), what="alpha's text")
        await eventually(lambda: f"g{TOOL_LINES + 1}" in drawn(b, "tools"), what="beta's calls")
        assert "beta" not in drawn(a, "text") and "alpha" not in drawn(b, "text")
        assert drawn(a, "tools") == ""
        # Only the last few calls are listed; the older ones are counted.
        tools = drawn(b, "tools").splitlines()
        assert tools[0] == "… 2 earlier" and len(tools) == TOOL_LINES + 1
        publish(
            ui,
            DelegateEnded(
                session=parent,
                job="job_ses_child_a",
                child_session="ses_child_a",
                status="timed out",
                seconds=1800.0,
            ),
        )
        await eventually(lambda: a.ended, what="alpha's end")
        await eventually(lambda: "timed out" in drawn(a, "status"), what="alpha's status")
        assert a.has_class("-failed")
        assert not b.ended and "calling grep" in drawn(b, "status")


async def test_snapshot_of_a_delegate_card_with_a_child_in_progress(
    write_config: WriteConfig, svg_snapshot: SnapshotAssertion
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        runtime = runtime_of(app)
        assert runtime is not None
        parent = "ses_0000000000000001"
        await runtime.sessions.new_session(None, origin="test", session_id=parent)
        await runtime.sessions.seed_session(
            parent,
            [
                Message("user", [TextBlock("Have a researcher summarise notes.md")]),
                Message(
                    "assistant",
                    [
                        TextBlock("Handing that to the researcher."),
                        ToolUseBlock("call_d1", "delegate", {"task": "summarise notes.md"}),
                    ],
                ),
            ],
        )
        await runtime.transcripts.db.write(
            lambda conn: conn.execute(
                "UPDATE sessions SET created_at = ?, updated_at = ?", (FIXED_TIME, FIXED_TIME)
            )
        )
        app.open_session(parent)
        chat = chat_of(app)
        await eventually(lambda: chat.session_id == parent, what="the session")
        child = "ses_child00000001"
        bus = runtime.bus
        for event in delegate_call(parent, "call_d1", child, at=FIXED_TIME):
            bus.publish(event)
        bus.publish(
            TurnStarted(session=child, turn="turn_child1", agent="researcher", at=FIXED_TIME + 1)
        )
        bus.publish(
            ToolStarted(
                session=child,
                call_id="c1",
                tool="read_file",
                title="notes.md",
                input={"path": "notes.md"},
                at=FIXED_TIME + 2,
            )
        )
        bus.publish(
            ToolEnded(
                session=child,
                call_id="c1",
                tool="read_file",
                is_error=False,
                status="ok",
                seconds=0.1,
                preview="…",
                at=FIXED_TIME + 2.5,
            )
        )
        text = "The notes cover three topics:\n- the garden plan\n- the budget\n- the trip"
        bus.publish(TurnText(session=child, turn="turn_child1", text=text, at=FIXED_TIME + 7.3))
        # The card is mounted when the chat takes the delegate call's events: not before.
        await eventually(lambda: bool(app.screen.query(ToolCard)), what="the delegate card")
        progress = app.screen.query_one(ToolCard).query_one
        await eventually(
            lambda: (
                app.screen.query(ChildProgress)
                and "the trip" in drawn(progress(ChildProgress), "text")
            ),
            what="the child's progress",
        )
        await pilot.wait_for_scheduled_animations()
        # Under load a layout pass may still be on its way (CI saw a scrollbar drawn one
        # frame late): the screen is read once two exports in a row agree.
        shot = app.export_screenshot()

        async def settled() -> bool:
            nonlocal shot
            await pilot.pause()
            now = app.export_screenshot()
            same, shot = now == shot, now
            return same

        await eventually(settled, what="the screen to settle")
        assert svg_snapshot == shot


async def test_a_real_delegate_call_shows_its_child_live_then_folds(
    write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: the parent's delegate call (Chat Completions) queues a child of
    `helper` (Anthropic Messages) that lists the workspace; its progress shows under
    the call's card while its model request is held, and folds when it ends."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("notes", encoding="utf-8")
    monkeypatch.setenv("FAKE_KEY", "k")
    async with FakeModelServer() as server:
        write_config(delegation_config(server, workspace))
        server.script(
            Reply(tool_calls=[delegate("count the files", "call_d1", agent="helper")]),
            Reply("The helper says 1."),
            api="chat",
        )
        server.script(
            Reply("Listing.", tool_calls=[ToolCall("list_dir", {"path": "."})]),
            Reply("There is 1 file:\nnotes.md"),
            api="anthropic",
        )
        gate = server.gates["anthropic"] = asyncio.Event()
        async with running(make_app(None)) as ui:
            await ui.send("ask the helper")
            await eventually(lambda: followed(ui, "call_d1"), what="the child under the card")
            progress = progress_of(ui, "call_d1")
            await eventually(
                lambda: any(r.api == "anthropic" for r in server.requests),
                what="the child's model request",
            )
            await eventually(lambda: "running" in drawn(progress, "status"), what="running")
            assert "helper" in drawn(progress, "status") and not progress.ended
            gate.set()
            assert await ui.turn_finished() == "done"
            await eventually(lambda: progress.ended, what="the child's end")
            await eventually(lambda: "done" in drawn(progress, "status"), what="the summary")
            assert "helper  done" in drawn(progress, "status")
            assert "1 tool call" in drawn(progress, "status")
            await eventually(
                lambda: "The helper says 1." in markdown_text(ui.app), what="the parent's reply"
            )
            # The child's words stay in its own session, not in the parent's reply.
            assert "There is 1 file" not in markdown_text(ui.app)
