"""The board's JSON API (spec 001 "Board").

Every handler is a thin adapter over the host's `board` (BoardAccess): it checks the
input, calls one method, reads the card back and answers with habakkuk.work.board_views'
`card_json`, which `habakkuk board ... --json`, the MCP server and the dashboard use too.
Changes are made as the user (created_by "user"), who may change any card.

- GET /api/board?status=open|all|STATUS&assignee=&limit=200: {"cards": [...]}, highest
  priority first then oldest, without comments and events. An empty assignee lists every
  card; status "open" is todo, doing and blocked.
- GET /api/board/{id}: one card with its comments and events (a unique id prefix is enough).
- POST /api/board {"title", "body"?, "assignee"?, "priority"?, "parent"?, "depends_on"?}:
  201 with the card.
- POST /api/board/{id}/assign {"assignee"} ("" unassigns), .../priority {"priority"},
  .../comment {"text"}, .../cancel {}, .../reopen {}: the card, read back.

Errors: bad input 400 (unknown field, not JSON, wrong types, an id that is not a card id,
a limit out of range), 413 for a body over BODY_LIMIT, an unknown agent or card 404, a
change the board's rules refuse (BoardRefused: a finished card changed, a card out of
attempts) 409 with the rule's one-line reason. 501 without the service.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from habakkuk.work.board_types import (
    PRIORITY_RANGE,
    STATUSES,
    TEXT_MAX,
    TITLE_MAX,
    USER,
    BoardAccess,
    BoardRefused,
    Card,
    NewCard,
)
from habakkuk.work.board_views import card_json

from .errors import ApiError
from .inputs import query_int, read_json
from .served import field, json_response, only_fields, server_of

# A card's texts are at most TEXT_MAX characters (up to 4 bytes each in UTF-8) plus a title.
BODY_LIMIT = 4 * TEXT_MAX + 16 * 1024
ADD_FIELDS = {"title", "body", "assignee", "priority", "parent", "depends_on"}
LIST_LIMIT = (1, 1000)
MAX_DEPENDENCIES = 100
NAME_CHARS = 200
# A card id or a unique prefix of one ("card_" optional): letters, digits and "_" only,
# so "../", slashes and control characters never reach the store.
_CARD_ID = re.compile(r"[A-Za-z0-9_]{1,64}")
_STATUS_WORDS = ("open", "all", *STATUSES)

Action = Callable[[], Awaitable[Card]]


def _board(request: web.Request) -> BoardAccess:
    runtime = server_of(request).runtime
    board: BoardAccess | None = getattr(runtime, "board", None)
    if board is None:
        raise ApiError(501, "this process has no board service")
    return board


def card_id(value: str, name: str = "card id") -> str:
    """A card id (or prefix) as given in a path or body; ApiError 400 for anything else."""
    if not _CARD_ID.fullmatch(value):
        shown = value if len(value) <= 80 else value[:80] + "…"
        raise ApiError(400, f"{name} {shown!r} is not a card id (letters, digits and _)")
    return value


def _path_id(request: web.Request) -> str:
    return card_id(request.match_info["id"])


async def _read_back(board: BoardAccess, act: Action, *, status: int = 200) -> web.Response:
    """Run one change and answer with the card as stored after it (with its history:
    every BoardAccess change returns the card read back)."""
    try:
        changed = await act()
    except BoardRefused as exc:
        raise ApiError(409, str(exc)) from None
    return json_response(card_json(changed), status=status)


def _agent(request: web.Request, name: str) -> str:
    """An agent named in a body: "" stays "" (unassigned); an unknown one is 404."""
    name = name.strip()
    if not name:
        return ""
    return server_of(request).runtime.config.agent(name).name  # ConfigError: 404


def _priority(body: dict[str, Any], *, required: bool) -> int:
    value: int = field(body, "priority", int, required=required, default=0)
    low, high = PRIORITY_RANGE
    if not low <= value <= high:
        raise ApiError(400, f"priority must be between {low} and {high}")
    return value


def _text(body: dict[str, Any], name: str, limit: int, *, required: bool = False) -> str:
    value: str = field(body, name, str, required=required, default="")
    value = value.strip()
    if required and not value:
        raise ApiError(400, f"{name} must not be empty")
    if len(value) > limit:
        raise ApiError(400, f"{name} is longer than {limit} characters")
    return value


def _dependencies(body: dict[str, Any]) -> tuple[str, ...]:
    given: list[Any] = field(body, "depends_on", list, default=[])
    if len(given) > MAX_DEPENDENCIES:
        raise ApiError(400, f"depends_on has more than {MAX_DEPENDENCIES} cards")
    found: list[str] = []
    for item in given:
        if not isinstance(item, str):
            raise ApiError(400, "depends_on must be a list of card ids")
        dep = card_id(item.strip(), "depends_on")
        if dep not in found:
            found.append(dep)
    return tuple(found)


async def board_list(request: web.Request) -> web.Response:
    """GET /api/board?status=open&assignee=&limit=200: {"cards": [...]} without history."""
    board = _board(request)
    status = request.query.get("status") or "open"
    if status not in _STATUS_WORDS:
        raise ApiError(400, f"status must be one of {', '.join(_STATUS_WORDS)}, not {status!r}")
    assignee = request.query.get("assignee", "").strip() or None
    if assignee is not None and len(assignee) > NAME_CHARS:
        raise ApiError(400, f"assignee is longer than {NAME_CHARS} characters")
    limit = query_int(request, "limit", 200, *LIST_LIMIT)
    cards = await board.list_cards(status=status, assignee=assignee, limit=limit)
    return json_response({"cards": [card_json(c, history=False) for c in cards]})


async def board_show(request: web.Request) -> web.Response:
    """GET /api/board/{id}: one card with its comments and events."""
    board = _board(request)
    return json_response(card_json(await board.get(_path_id(request))))


async def board_add(request: web.Request) -> web.Response:
    """POST /api/board {"title", "body"?, "assignee"?, "priority"?, "parent"?,
    "depends_on"?}: 201 with the card."""
    board = _board(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, ADD_FIELDS)
    parent: str | None = field(body, "parent", str)
    new = NewCard(
        title=_text(body, "title", TITLE_MAX, required=True),
        body=_text(body, "body", TEXT_MAX),
        assignee=_agent(request, field(body, "assignee", str, default="")),
        priority=_priority(body, required=False),
        parent=card_id(parent.strip(), "parent") if parent and parent.strip() else None,
        depends_on=_dependencies(body),
    )
    return await _read_back(board, lambda: board.create(new, by=USER), status=201)


async def board_assign(request: web.Request) -> web.Response:
    """POST /api/board/{id}/assign {"assignee"}: "" unassigns; a card in progress has its
    run stopped and goes back to todo."""
    board = _board(request)
    target = _path_id(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"assignee"})
    assignee = _agent(request, field(body, "assignee", str, required=True))
    return await _read_back(board, lambda: board.assign(target, assignee, by=USER))


async def board_priority(request: web.Request) -> web.Response:
    """POST /api/board/{id}/priority {"priority": N}."""
    board = _board(request)
    target = _path_id(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"priority"})
    priority = _priority(body, required=True)
    return await _read_back(board, lambda: board.set_priority(target, priority, by=USER))


async def board_comment(request: web.Request) -> web.Response:
    """POST /api/board/{id}/comment {"text"}."""
    board = _board(request)
    target = _path_id(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"text"})
    text = _text(body, "text", TEXT_MAX, required=True)
    return await _read_back(board, lambda: board.comment(target, text, by=USER))


async def board_cancel(request: web.Request) -> web.Response:
    """POST /api/board/{id}/cancel {}: a running attempt is stopped."""
    board = _board(request)
    target = _path_id(request)
    only_fields(await read_json(request, limit=BODY_LIMIT), set())
    return await _read_back(board, lambda: board.cancel(target, by=USER))


async def board_reopen(request: web.Request) -> web.Response:
    """POST /api/board/{id}/reopen {}: back to todo for another attempt."""
    board = _board(request)
    target = _path_id(request)
    only_fields(await read_json(request, limit=BODY_LIMIT), set())
    return await _read_back(board, lambda: board.reopen(target, by=USER))


def setup(app: web.Application) -> None:
    """Register the board routes."""
    app.router.add_get("/api/board", board_list)
    app.router.add_post("/api/board", board_add)
    app.router.add_get("/api/board/{id}", board_show)
    app.router.add_post("/api/board/{id}/assign", board_assign)
    app.router.add_post("/api/board/{id}/priority", board_priority)
    app.router.add_post("/api/board/{id}/comment", board_comment)
    app.router.add_post("/api/board/{id}/cancel", board_cancel)
    app.router.add_post("/api/board/{id}/reopen", board_reopen)
