"""The board's JSON shapes, written once for the HTTP API (spec 001 "Board"), the CLI's
`--json`, the MCP server and the dashboard."""

from __future__ import annotations

from typing import Any

from .board_types import Card


def card_json(card: Card, *, history: bool = True) -> dict[str, Any]:
    """Spec 001's card: comments and events with `history`, plus what says why a card
    waits (blocked_kind, blocked_reason, waiting_on) and each attempt's session."""
    shape: dict[str, Any] = {
        "id": card.id,
        "title": card.title,
        "body": card.body,
        "assignee": card.assignee,
        "created_by": card.created_by,
        "status": card.status,
        "priority": card.priority,
        "result": card.result,
        "parent": card.parent,
        "depends_on": list(card.depends_on),
        "attempt": card.attempt,
        "session": card.session,
        "created_at": card.created_at,
        "updated_at": card.updated_at,
        "revision": card.revision,
        "blocked_kind": card.blocked_kind,
        "blocked_reason": card.blocked_reason,
        "waiting_on": [{"id": dep, "status": status} for dep, status in card.waiting_on],
        "attempts": [{"attempt": n, "session": s} for n, s in card.attempt_sessions()],
    }
    if history:
        shape["comments"] = [
            {"author": c.author, "text": c.text, "at": c.at} for c in card.comments
        ]
        shape["events"] = [
            {"author": e.author, "kind": e.kind, "text": e.text, "at": e.at} for e in card.events
        ]
    return shape
