"""The fake Slack's conversations.history and conversations.replies, as Slack documents them.

https://api.slack.com/methods/conversations.history: the channel's messages, newest
first, that are not replies in a thread (a thread's parent is there), between `oldest`
and `latest` (exclusive unless `inclusive`), at most `limit` (default 100, at most 999)
a page; `has_more` and `response_metadata.next_cursor` page on. A message's `metadata`
(event_type, event_payload) is in the answer only with `include_all_metadata`.

https://api.slack.com/methods/conversations.replies: the thread of `ts` (its parent
first, then its replies, oldest first), with the same window, paging and metadata;
`thread_not_found` when no message has that ts.

Timestamps compare as numbers ("1712345678.000100"); a cursor is the offset into the
window, as opaque to the client as Slack's own.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_LIMIT = 100
MAX_LIMIT = 999


@dataclass
class Stored:
    """A message in a channel, as the history methods see it."""

    ts: str
    text: str
    thread_ts: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    bot_id: str = ""
    user: str = ""


class HistoryError(Exception):
    """An error code the method answers (`{"ok": false, "error": code}`)."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def _number(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1")


def _in_window(ts: str, params: dict[str, Any]) -> bool:
    at = float(ts)
    oldest = _number(params.get("oldest"), 0.0)
    latest = _number(params.get("latest"), float("inf"))
    if _truthy(params.get("inclusive")):
        return oldest <= at <= latest
    return oldest < at < latest


def _page(chosen: list[Stored], params: dict[str, Any]) -> dict[str, Any]:
    limit = int(_number(params.get("limit"), DEFAULT_LIMIT)) or DEFAULT_LIMIT
    limit = max(1, min(MAX_LIMIT, limit))
    cursor = str(params.get("cursor") or "")
    start = int(base64.b64decode(cursor).decode().removeprefix("next:")) if cursor else 0
    page = chosen[start : start + limit]
    more = start + limit < len(chosen)
    metadata = _truthy(params.get("include_all_metadata"))
    answer: dict[str, Any] = {
        "messages": [_message(m, metadata=metadata) for m in page],
        "has_more": more,
        "response_metadata": {
            "next_cursor": base64.b64encode(f"next:{start + limit}".encode()).decode()
            if more
            else ""
        },
    }
    return answer


def _message(stored: Stored, *, metadata: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "message", "ts": stored.ts, "text": stored.text}
    if stored.bot_id:
        message["bot_id"] = stored.bot_id
    if stored.user:
        message["user"] = stored.user
    if stored.thread_ts:
        message["thread_ts"] = stored.thread_ts
    if metadata and stored.metadata:
        message["metadata"] = dict(stored.metadata)
    return message


def history(messages: Sequence[Stored], params: dict[str, Any]) -> dict[str, Any]:
    """conversations.history over one channel's `messages` (in the order posted)."""
    top = [m for m in messages if not m.thread_ts or m.thread_ts == m.ts]
    chosen = sorted(
        (m for m in top if _in_window(m.ts, params)), key=lambda m: float(m.ts), reverse=True
    )
    return _page(chosen, params)


def replies(messages: Sequence[Stored], params: dict[str, Any]) -> dict[str, Any]:
    """conversations.replies of the thread `params["ts"]` in one channel's `messages`."""
    parent = str(params.get("ts", ""))
    if not parent:
        raise HistoryError("invalid_arguments")
    thread = [m for m in messages if m.ts == parent or m.thread_ts == parent]
    if not thread:
        raise HistoryError("thread_not_found")
    chosen = sorted((m for m in thread if _in_window(m.ts, params)), key=lambda m: float(m.ts))
    return _page(chosen, params)
