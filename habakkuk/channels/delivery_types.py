"""What a delivery job sends, as typed values, and the one codec of their stored payload.

Every producer (the gateway, the channel service, the runtime, the MCP server,
the CLI commands) builds one of these values; only this module knows the job
payload's format. The format is the one queued jobs already carry in a user's
control.db (`{"kind": "text"|"file"|"poll"|"reply", "to": "CHANNEL:CHAT[:THREAD]",
...}`, a missing kind meaning text), so jobs queued by an older Habakkuk
still deliver. `from_payload` rejects a malformed payload with a MalformedDelivery
that says which field is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .adapter import Address, Button


class MalformedDelivery(ValueError):
    """A stored delivery payload this version cannot read."""


@dataclass(frozen=True)
class TextDelivery:
    """A message; `buttons` rows go under its last chunk where the channel has buttons."""

    to: Address
    text: str
    reply_to: str | None = None
    buttons: tuple[tuple[Button, ...], ...] = ()


@dataclass(frozen=True)
class FileDelivery:
    """A file (sent as `name`, else the path's name) with an optional caption."""

    to: Address
    path: Path
    name: str = ""
    caption: str = ""


@dataclass(frozen=True)
class PollDelivery:
    """A poll; a channel without polls gets it as numbered text."""

    to: Address
    question: str
    options: tuple[str, ...]
    multiple: bool = False


@dataclass(frozen=True)
class ReplyDelivery:
    """A turn's reply: its text is read from the finished turn job when it is sent."""

    to: Address
    turn: str
    reply_to: str | None = None


Delivery = TextDelivery | FileDelivery | PollDelivery | ReplyDelivery


def to_payload(delivery: Delivery) -> dict[str, Any]:
    """The job payload of `delivery` (JSON-safe)."""
    payload: dict[str, Any]
    if isinstance(delivery, TextDelivery):
        payload = {"kind": "text", "to": str(delivery.to), "text": delivery.text}
        if delivery.reply_to is not None:
            payload["reply_to"] = delivery.reply_to
        if delivery.buttons:
            payload["buttons"] = [
                [{"text": b.text, "data": b.data} for b in row] for row in delivery.buttons
            ]
    elif isinstance(delivery, FileDelivery):
        payload = {
            "kind": "file",
            "to": str(delivery.to),
            "path": str(delivery.path),
            "name": delivery.name,
            "caption": delivery.caption,
        }
    elif isinstance(delivery, PollDelivery):
        payload = {
            "kind": "poll",
            "to": str(delivery.to),
            "question": delivery.question,
            "options": list(delivery.options),
            "multiple": delivery.multiple,
        }
    else:
        payload = {
            "kind": "reply",
            "turn": delivery.turn,
            "to": str(delivery.to),
            "reply_to": delivery.reply_to,
        }
    return payload


def from_payload(payload: Any) -> Delivery:
    """The delivery a stored job payload describes; MalformedDelivery when it is not one."""
    if not isinstance(payload, dict):
        raise MalformedDelivery(f"the payload is {type(payload).__name__}, not an object")
    try:
        to = Address.parse(_text(payload, "to"))
    except ValueError as exc:
        raise MalformedDelivery(f"to: {exc}") from None
    kind = payload.get("kind", "text")  # the oldest text deliveries had no kind
    if kind == "text":
        return TextDelivery(
            to,
            _text(payload, "text"),
            reply_to=_message_id(payload.get("reply_to")),
            buttons=_buttons(payload.get("buttons")),
        )
    if kind == "file":
        return FileDelivery(
            to,
            Path(_text(payload, "path")),
            name=_text(payload, "name", ""),
            caption=_text(payload, "caption", ""),
        )
    if kind == "poll":
        options = payload.get("options")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise MalformedDelivery("options: expected a list of strings")
        multiple = payload.get("multiple", False)
        if not isinstance(multiple, bool):
            raise MalformedDelivery("multiple: expected true or false")
        return PollDelivery(to, _text(payload, "question"), tuple(options), multiple)
    if kind == "reply":
        return ReplyDelivery(
            to, _text(payload, "turn"), reply_to=_message_id(payload.get("reply_to"))
        )
    raise MalformedDelivery(f"unknown delivery kind {kind!r}")


def _text(payload: dict[str, Any], key: str, default: str | None = None) -> str:
    value = payload.get(key, default)
    if value is None:
        raise MalformedDelivery(f"{key}: missing")
    if not isinstance(value, str):
        raise MalformedDelivery(f"{key}: expected a string, got {type(value).__name__}")
    return value


def _message_id(value: Any) -> str | None:
    # Message ids were stored as the platform gave them (a number on some).
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise MalformedDelivery(f"reply_to: expected a message id, got {value!r}")
    return str(value)


def _buttons(raw: Any) -> tuple[tuple[Button, ...], ...]:
    if not raw:
        return ()
    try:
        return tuple(tuple(Button(_text(b, "text"), _text(b, "data")) for b in row) for row in raw)
    except (TypeError, AttributeError, MalformedDelivery):
        raise MalformedDelivery("buttons: expected rows of {text, data}") from None
