"""Socket Mode frames parsed into typed values at the edge (nothing past here reads a dict).

A frame is one JSON object: `hello` when the connection is ready, `disconnect` when
Slack is about to close it (reason `warning`, `refresh_requested`, `link_disabled`, ...),
or an envelope (`events_api`, `interactive`, `slash_commands`) with an `envelope_id`
to acknowledge and a payload. The payloads Habakkuk reads become `SlackMessage` (a
`message` or `app_mention` event), `SlackAction` (a Block Kit button pressed) or
`SlackCommand` (a slash command); every other payload parses to None and is only
acknowledged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Message subtypes that are a person writing; every other (message_changed,
# message_deleted, bot_message, channel_join, ...) is not a message to answer.
PERSON_SUBTYPES = frozenset({"", "file_share", "thread_broadcast"})


@dataclass(frozen=True)
class SlackFile:
    id: str
    name: str
    mimetype: str
    size: int | None
    url: str  # url_private_download: fetched with the bot token
    subtype: str = ""


@dataclass(frozen=True)
class SlackMessage:
    """A `message` or `app_mention` event."""

    kind: str
    team: str
    channel: str
    channel_type: str  # im, mpim, channel, group (app_mention has none: a channel)
    ts: str
    thread_ts: str
    user: str
    user_name: str
    bot_id: str
    subtype: str
    text: str
    parent_user_id: str = ""
    files: tuple[SlackFile, ...] = ()


@dataclass(frozen=True)
class SlackAction:
    """A Block Kit button pressed (a `block_actions` interactive payload)."""

    team: str
    channel: str
    user: str
    user_name: str
    trigger_id: str
    value: str
    message_ts: str
    thread_ts: str
    response_url: str


@dataclass(frozen=True)
class SlackCommand:
    """A slash command (`/habakkuk new`)."""

    team: str
    channel: str
    user: str
    user_name: str
    command: str
    text: str
    trigger_id: str


Payload = SlackMessage | SlackAction | SlackCommand


@dataclass(frozen=True)
class Frame:
    """One Socket Mode frame."""

    type: str  # hello, disconnect, events_api, interactive, slash_commands, ...
    envelope_id: str = ""
    reason: str = ""  # of a disconnect
    retry_attempt: int = 0
    payload: Payload | None = field(default=None, compare=False)


def parse_frame(raw: str) -> Frame | None:
    """A text frame as a Frame; None when it is not a JSON object with a type."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return None
    kind = data["type"]
    payload = _dict(data.get("payload"))
    parsed: Payload | None = None
    if kind == "events_api":
        parsed = _event(payload)
    elif kind == "interactive":
        parsed = _action(payload)
    elif kind == "slash_commands":
        parsed = _command(payload)
    return Frame(
        type=kind,
        envelope_id=_str(data.get("envelope_id")),
        reason=_str(data.get("reason")),
        retry_attempt=_int(data.get("retry_attempt")) or 0,
        payload=parsed,
    )


def _event(payload: dict[str, Any]) -> SlackMessage | None:
    if payload.get("type") != "event_callback":
        return None
    event = _dict(payload.get("event"))
    kind = _str(event.get("type"))
    if kind not in ("message", "app_mention"):
        return None
    profile = _dict(event.get("user_profile"))
    files = tuple(
        SlackFile(
            id=_str(item.get("id")),
            name=_str(item.get("name")) or _str(item.get("title")) or "file",
            mimetype=_str(item.get("mimetype")) or "application/octet-stream",
            size=_int(item.get("size")),
            url=_str(item.get("url_private_download")) or _str(item.get("url_private")),
            subtype=_str(item.get("subtype")),
        )
        for item in (_dict(f) for f in _list(event.get("files")))
        if item.get("mode") != "tombstone"
    )
    return SlackMessage(
        kind=kind,
        team=_str(event.get("team")) or _str(payload.get("team_id")),
        channel=_str(event.get("channel")),
        channel_type=_str(event.get("channel_type")) or "channel",
        ts=_str(event.get("ts")),
        thread_ts=_str(event.get("thread_ts")),
        user=_str(event.get("user")),
        user_name=_str(profile.get("display_name"))
        or _str(profile.get("real_name"))
        or _str(profile.get("name")),
        bot_id=_str(event.get("bot_id")),
        subtype=_str(event.get("subtype")),
        text=_str(event.get("text")),
        parent_user_id=_str(event.get("parent_user_id")),
        files=files,
    )


def _action(payload: dict[str, Any]) -> SlackAction | None:
    if payload.get("type") != "block_actions":
        return None
    actions = [_dict(a) for a in _list(payload.get("actions"))]
    if not actions:
        return None
    user = _dict(payload.get("user"))
    container = _dict(payload.get("container"))
    message = _dict(payload.get("message"))
    return SlackAction(
        team=_str(_dict(payload.get("team")).get("id")) or _str(user.get("team_id")),
        channel=_str(_dict(payload.get("channel")).get("id")) or _str(container.get("channel_id")),
        user=_str(user.get("id")),
        user_name=_str(user.get("name")) or _str(user.get("username")),
        trigger_id=_str(payload.get("trigger_id")) or _str(actions[0].get("action_ts")),
        value=_str(actions[0].get("value")),
        message_ts=_str(container.get("message_ts")) or _str(message.get("ts")),
        thread_ts=_str(container.get("thread_ts")) or _str(message.get("thread_ts")),
        response_url=_str(payload.get("response_url")),
    )


def _command(payload: dict[str, Any]) -> SlackCommand | None:
    command = _str(payload.get("command"))
    if not command:
        return None
    return SlackCommand(
        team=_str(payload.get("team_id")),
        channel=_str(payload.get("channel_id")),
        user=_str(payload.get("user_id")),
        user_name=_str(payload.get("user_name")),
        command=command,
        text=_str(payload.get("text")),
        trigger_id=_str(payload.get("trigger_id")),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
