"""The board toolset: board_create, board_list, board_show, board_comment, board_update,
board_complete and board_block (spec 000 "Board").

Each tool acts as the calling agent (`by=ctx.agent`) through the home's board (a
BoardAccess the runtime built the tools with), whose rules decide what the agent may
change: it completes or blocks only cards assigned to it, and updates only cards it
created or holds. Reading, commenting, completing and blocking are allowed in every
permission mode (Risk.READ); creating and updating are network-risk, like delegate, but
bring no outside content into the turn, so they do not taint it. Every reply is read
back from the board after the change. A refused or failed call (no such card, an id
prefix that names two, another agent's card) is an error result, never a failed turn.
"""

from __future__ import annotations

from typing import Any, ClassVar

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext
from habakkuk.engine.toolkit.service_tool import ServiceTool

from .board_text import detail, state_line, table
from .board_types import PRIORITY_RANGE, STATUSES, TEXT_MAX, TITLE_MAX, BoardAccess, NewCard
from .tools import ChatsOf, origin_of

_CARD = {"type": "string", "minLength": 1, "maxLength": 64}
_AGENT = {"type": "string", "maxLength": 64}
_PRIORITY = {"type": "integer", "minimum": PRIORITY_RANGE[0], "maximum": PRIORITY_RANGE[1]}
MAX_DEPENDENCIES = 50
LIST_LIMIT = 100


class BoardTool(ServiceTool[BoardAccess]):
    """What the board tools share: the board they were built with, errors as results."""

    unavailable: ClassVar[str] = "the board is not available in this run"

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("card") or args.get("title") or args.get("status") or "")[:64]


class BoardChange(BoardTool):
    """Creating and updating cards: network-risk, like delegate (read-only mode denies
    it, ask and workspace modes ask), but the card holds only what the agent wrote, so
    running it does not taint the turn."""

    risk: ClassVar[Risk] = Risk.NETWORK
    taints: ClassVar[bool | None] = False


class BoardCreate(BoardChange):
    name = "board_create"
    description = (
        "Put a card on the board: work another agent (the assignee) does later, in its own "
        "session, even after this conversation ends. A card with dependencies starts when "
        "they are all done (they must exist now and cannot be added later). The result or "
        "the reason it was blocked comes back to this session. Priority -100..100, higher "
        "first; with no assignee the card waits until someone assigns it."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": TITLE_MAX},
            "body": {"type": "string", "maxLength": TEXT_MAX},
            "assignee": _AGENT,
            "priority": _PRIORITY,
            "parent": _CARD,
            "depends_on": {"type": "array", "items": _CARD, "maxItems": MAX_DEPENDENCIES},
        },
        "required": ["title"],
        "additionalProperties": False,
    }

    def __init__(self, board: BoardAccess | None, chats: ChatsOf) -> None:
        super().__init__(board)
        self.chats = chats

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        chat = await origin_of(self.chats, ctx)
        new = NewCard(
            title=str(args["title"]).strip(),
            body=str(args.get("body") or "").strip(),
            assignee=str(args.get("assignee") or "").strip(),
            priority=int(args.get("priority") or 0),
            parent=str(args["parent"]).strip() if args.get("parent") else None,
            depends_on=tuple(str(dep).strip() for dep in args.get("depends_on") or ()),
            creator_session=ctx.session,
            reply_to=ReplyTo(chat) if chat else None,
        )
        card = await service.create(new, by=ctx.agent)
        return f"Created {card.id} {card.title!r}: {state_line(card)}."


class BoardList(BoardTool):
    name = "board_list"
    description = (
        "List cards on the board, highest priority first: id, status, priority, assignee, "
        "title and what each waits on. status: open (default: todo, doing, blocked), all, "
        "or one status; assignee: one agent's cards ('' for unassigned ones)."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["open", "all", *STATUSES]},
            "assignee": _AGENT,
        },
        "additionalProperties": False,
    }

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        status = str(args.get("status") or "open")
        assignee = str(args["assignee"]).strip() if "assignee" in args else None
        cards = await service.list_cards(status=status, assignee=assignee, limit=LIST_LIMIT)
        if not cards:
            return f"No {status} cards." if status != "all" else "The board is empty."
        lines = table(cards, width=120)
        if len(cards) == LIST_LIMIT:
            lines.append(f"(the first {LIST_LIMIT}; narrow it with status or assignee)")
        return "\n".join(lines)


class BoardShow(BoardTool):
    name = "board_show"
    description = (
        "One card in full: body, dependencies, result, attempts, comments and events. An "
        "unique id prefix is enough."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"card": _CARD},
        "required": ["card"],
        "additionalProperties": False,
    }

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        return "\n".join(detail(await service.get(str(args["card"]).strip())))


class BoardComment(BoardTool):
    name = "board_comment"
    description = "Add a comment to a card (its assignee reads the comments when it runs)."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "card": _CARD,
            "text": {"type": "string", "minLength": 1, "maxLength": TEXT_MAX},
        },
        "required": ["card", "text"],
        "additionalProperties": False,
    }

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        card = await service.comment(str(args["card"]).strip(), str(args["text"]), by=ctx.agent)
        return f"Commented on {card.id} ({len(card.comments)} comments): {state_line(card)}."


class BoardUpdate(BoardChange):
    name = "board_update"
    description = (
        "Change a card you created or hold: assignee (another agent, '' to unassign), "
        "priority (-100..100), action cancel or reopen. Reassigning or cancelling a card in "
        "progress stops its run."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "card": _CARD,
            "assignee": _AGENT,
            "priority": _PRIORITY,
            "action": {"type": "string", "enum": ["cancel", "reopen"]},
        },
        "required": ["card"],
        "additionalProperties": False,
    }

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        if not any(key in args for key in ("assignee", "priority", "action")):
            raise HabakkukError("give assignee, priority or action (cancel or reopen)")
        card = await service.get(str(args["card"]).strip())  # resolves a prefix once
        # The priority first: an agent that holds (but did not create) the card may no
        # longer change it once it has handed it to another.
        if "priority" in args:
            card = await service.set_priority(card.id, int(args["priority"]), by=ctx.agent)
        if "assignee" in args:
            card = await service.assign(card.id, str(args["assignee"]).strip(), by=ctx.agent)
        if args.get("action") == "cancel":
            card = await service.cancel(card.id, by=ctx.agent)
        elif args.get("action") == "reopen":
            card = await service.reopen(card.id, by=ctx.agent)
        return f"Updated {card.id}: {state_line(card)}, priority {card.priority}."


class BoardComplete(BoardTool):
    name = "board_complete"
    description = (
        "Finish a card assigned to you with its result, including the proof that it is done "
        "(what you checked, the output, the file or commit). The result goes back to whoever "
        "created the card."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "card": _CARD,
            "result": {"type": "string", "minLength": 1, "maxLength": TEXT_MAX},
        },
        "required": ["card", "result"],
        "additionalProperties": False,
    }

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        card = await service.complete(
            str(args["card"]).strip(), str(args["result"]), by=ctx.agent, session=ctx.session
        )
        return f"Completed: {state_line(card)}."


class BoardBlock(BoardTool):
    name = "board_block"
    description = (
        "Block a card assigned to you when you cannot go on without a person: the reason is "
        "the question they must answer. It goes back to whoever created the card."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "card": _CARD,
            "reason": {"type": "string", "minLength": 1, "maxLength": TEXT_MAX},
        },
        "required": ["card", "reason"],
        "additionalProperties": False,
    }

    async def act(self, service: BoardAccess, args: dict[str, Any], ctx: ToolContext) -> str:
        card = await service.block(
            str(args["card"]).strip(),
            str(args["reason"]),
            by=ctx.agent,
            kind="question",
            session=ctx.session,
        )
        return f"Blocked: {state_line(card)}."


def board_tools(board: BoardAccess | None, chats: ChatsOf) -> list[Tool]:
    """The board toolset, on `board` (board_create keeps the turn's chat, from `chats`, as
    where the card's result goes back)."""
    return [
        BoardCreate(board, chats),
        BoardList(board),
        BoardShow(board),
        BoardComment(board),
        BoardUpdate(board),
        BoardComplete(board),
        BoardBlock(board),
    ]
