"""Tools hold the services they use, by type, from the moment their toolset is built.

A call's ToolContext carries the call and the engine's services only; the board, the
memory, the schedules, the sub-agents, the background processes and the chats' outbox
are bound to their tools when the runtime builds them (engine/toolkit/service_tool.py),
so a toolset works on a fake of its service as on the runtime's own.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.agent.turn import TurnDeps
from habakkuk.engine.events import EventBus
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.store import BlobStore
from habakkuk.engine.toolkit.registry import ToolContext, ToolRegistry
from habakkuk.engine.toolkit.service_tool import ServiceTool
from habakkuk.runtime import Runtime
from habakkuk.work.board_tools import board_tools
from habakkuk.work.board_types import USER, Card, NewCard
from tests.conftest import mock_config
from tests.fakes.board import FakeBoard


class Chats:
    """The outbox as the board tools see it: every turn answers one chat."""

    def __init__(self, chat: str) -> None:
        self.chat = chat

    async def chat_of(self, turn: str, session: str) -> str | None:
        return self.chat


def context(tmp_path: Path) -> ToolContext:
    return ToolContext(
        agent="main",
        session="ses_1",
        turn="turn_1",
        workspace=tmp_path,
        mode="full",
        home=tmp_path,
        blobs=BlobStore(tmp_path / "blobs"),
        bus=EventBus(),
    )


class RecordingBoard(FakeBoard):
    """The board's fake, keeping what each create was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[NewCard] = []

    async def create(self, new: NewCard, *, by: str = USER) -> Card:
        self.asked.append(new)
        return await super().create(new, by=by)


async def test_a_toolset_works_on_the_fake_it_was_built_with(tmp_path: Path) -> None:
    board = RecordingBoard()
    registry = ToolRegistry()
    for tool in board_tools(board, lambda: Chats("telegram:42")):
        registry.register(tool, "board")
    use = ToolUseBlock("c1", "board_create", {"title": "Chase the invoice"})
    made = await registry.call(use, context(tmp_path), {"board_create"})
    assert not made.is_error, made.text
    # The card went to the fake, from this session, answering the chat the bound outbox
    # named for the turn.
    [asked] = board.asked
    assert (asked.title, asked.creator_session) == ("Chase the invoice", "ses_1")
    assert asked.reply_to == ReplyTo("telegram:42")
    assert [card.created_by for card in await board.list_cards()] == ["main"]


def test_no_call_context_carries_a_service_as_an_object() -> None:
    for holder in (ToolContext, TurnDeps):
        untyped = [f.name for f in dataclasses.fields(holder) if "object" in str(f.type)]
        assert untyped == [], f"{holder.__name__}: {untyped}"


async def test_the_runtime_binds_each_toolset_to_its_own_services(
    runtime_factory: Any,
) -> None:
    runtime: Runtime = await runtime_factory(
        mock_config(extra="channels:\n  web:\n    type: web\n")
    )

    def bound(name: str) -> object:
        tool = runtime.tools.get(name)
        assert isinstance(tool, ServiceTool), name
        return tool.bound

    assert bound("memory_save") is runtime.memory
    assert bound("skill_view") is runtime.skills
    assert bound("schedule_list") is runtime.schedules
    assert bound("board_list") is runtime.board
    assert getattr(runtime.tools.get("delegate"), "delegation", None) is runtime.delegation
    assert getattr(runtime.tools.get("process_kill"), "processes", None) is runtime.processes
    # The outbox is the channel service once the runtime runs it (it is made after the tools).
    send_file: Any = runtime.tools.get("send_file")
    assert send_file.outbox_of() is None
    channels = runtime.channel_service()
    assert send_file.outbox_of() is channels
