"""What a delivery job sends, as typed values, and the one codec of their stored payload.

Every producer (the gateway, the channel service, the runtime, the MCP server,
the CLI commands) builds one of these values; only this module knows the job
payload's format. The format is the one queued jobs already carry in a user's
control.db (`{"kind": "text"|"file"|"poll"|"reply", "to": "CHANNEL:CHAT[:THREAD]",
...}`, a missing kind meaning text), so jobs queued by an older Habakkuk
still deliver. `from_payload` rejects a malformed payload with a MalformedDelivery
that says which field is wrong.

Each delivery is a job payload (engine/payloads.py): its `to_json()` is what the queue
stores, and `DELIVERY_PAYLOAD` reads one back for the delivery kinds' declaration
(`DELIVERIES`, below).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.agent.requests import VOICE_REPLIES, VoiceReply
from habakkuk.engine.jobs import JobKind, declare_kind
from habakkuk.engine.payloads import JsonObject, PayloadError

from .adapter import Address, Button


class MalformedDelivery(PayloadError):
    """A stored delivery payload this version cannot read."""


@dataclass(frozen=True)
class TextDelivery:
    """A message; `buttons` rows go under its last chunk where the channel has buttons."""

    to: Address
    text: str
    reply_to: str | None = None
    buttons: tuple[tuple[Button, ...], ...] = ()

    def to_json(self) -> JsonObject:
        payload: JsonObject = {"kind": "text", "to": str(self.to), "text": self.text}
        if self.reply_to is not None:
            payload["reply_to"] = self.reply_to
        if self.buttons:
            payload["buttons"] = [
                [{"text": b.text, "data": b.data} for b in row] for row in self.buttons
            ]
        return payload


@dataclass(frozen=True)
class FileDelivery:
    """A file (sent as `name`, else the path's name) with an optional caption. `voice`: it
    is a voice note (Ogg Opus) of `duration` seconds, posted as one where the platform
    has them (Adapter.send_voice), else as an audio file."""

    to: Address
    path: Path
    name: str = ""
    caption: str = ""
    voice: bool = False
    duration: float | None = None

    def to_json(self) -> JsonObject:
        payload: JsonObject = {
            "kind": "file",
            "to": str(self.to),
            "path": str(self.path),
            "name": self.name,
            "caption": self.caption,
        }
        if self.voice:
            payload["voice"] = True
            payload["duration"] = self.duration
        return payload


@dataclass(frozen=True)
class PollDelivery:
    """A poll; a channel without polls gets it as numbered text."""

    to: Address
    question: str
    options: tuple[str, ...]
    multiple: bool = False

    def to_json(self) -> JsonObject:
        return {
            "kind": "poll",
            "to": str(self.to),
            "question": self.question,
            "options": list(self.options),
            "multiple": self.multiple,
        }


@dataclass(frozen=True)
class ReplyDelivery:
    """A turn's reply: its text is read from the finished turn job when it is sent.
    `voice`: it is also read aloud as a voice note after the text ("also"), or only so
    ("only"; the text goes when speaking fails)."""

    to: Address
    turn: str
    reply_to: str | None = None
    voice: VoiceReply = ""

    def to_json(self) -> JsonObject:
        payload: JsonObject = {
            "kind": "reply",
            "turn": self.turn,
            "to": str(self.to),
            "reply_to": self.reply_to,
        }
        if self.voice:
            payload["voice"] = self.voice
        return payload


Delivery = TextDelivery | FileDelivery | PollDelivery | ReplyDelivery


def to_payload(delivery: Delivery) -> JsonObject:
    """The job payload of `delivery` (JSON-safe)."""
    return delivery.to_json()


class _DeliveryPayload:
    """The payload type of the delivery kinds: one of the four deliveries."""

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Delivery:
        return from_payload(data)


DELIVERY_PAYLOAD = _DeliveryPayload()
DELIVERY_PREFIX = "delivery:"
# Every delivery kind (one per channel account): a corrupt payload fails its job alone,
# "delivery JOB: FIELD: what is wrong", and the worker goes on with the next. Declared
# here, beside its payload, not in the worker (channels/deliveries.py): a process that
# sends nothing (`habakkuk run`) still has it in the queue's kind registry.
DELIVERIES: JobKind[Delivery] = declare_kind(
    JobKind(DELIVERY_PREFIX, payload=DELIVERY_PAYLOAD, noun="delivery")
)
# The error of a delivery whose part the chat could not get (it was told); the overview
# counts these (services/turns.py unsent_deliveries).
UNSENT_PREFIX = "not sent: "


def from_payload(payload: object) -> Delivery:
    """The delivery a stored job payload describes; MalformedDelivery when it is not one."""
    if not isinstance(payload, Mapping):
        raise MalformedDelivery("", f"the payload is {type(payload).__name__}, not an object")
    try:
        to = Address.parse(_text(payload, "to"))
    except MalformedDelivery:
        raise
    except ValueError as exc:
        raise MalformedDelivery("to", str(exc)) from None
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
            voice=_flag(payload, "voice"),
            duration=_seconds(payload.get("duration")),
        )
    if kind == "poll":
        options = payload.get("options")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise MalformedDelivery("options", "expected a list of strings")
        multiple = payload.get("multiple", False)
        if not isinstance(multiple, bool):
            raise MalformedDelivery("multiple", "expected true or false")
        return PollDelivery(to, _text(payload, "question"), tuple(options), multiple)
    if kind == "reply":
        voice = _text(payload, "voice", "")
        if voice not in VOICE_REPLIES:
            raise MalformedDelivery("voice", f"expected one of {VOICE_REPLIES}, got {voice!r}")
        return ReplyDelivery(
            to,
            _text(payload, "turn"),
            reply_to=_message_id(payload.get("reply_to")),
            voice="also" if voice == "also" else "only" if voice == "only" else "",
        )
    raise MalformedDelivery("", f"unknown delivery kind {kind!r}")


def _text(payload: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = payload.get(key, default)
    if value is None:
        raise MalformedDelivery(key, "missing")
    if not isinstance(value, str):
        raise MalformedDelivery(key, f"expected a string, got {type(value).__name__}")
    return value


def _flag(payload: Mapping[str, Any], key: str) -> bool:
    value = payload.get(key, False)
    if not isinstance(value, bool):
        raise MalformedDelivery(key, "expected true or false")
    return value


def _seconds(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise MalformedDelivery("duration", f"expected seconds, got {value!r}")
    return float(value)


def _message_id(value: object) -> str | None:
    # Message ids were stored as the platform gave them (a number on some).
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise MalformedDelivery("reply_to", f"expected a message id, got {value!r}")
    return str(value)


def _buttons(raw: object) -> tuple[tuple[Button, ...], ...]:
    if not raw:
        return ()
    wrong = MalformedDelivery("buttons", "expected rows of {text, data}")
    if not isinstance(raw, list) or not all(isinstance(row, list) for row in raw):
        raise wrong
    try:
        return tuple(tuple(Button(_text(b, "text"), _text(b, "data")) for b in row) for row in raw)
    except (TypeError, AttributeError, MalformedDelivery):
        raise wrong from None
