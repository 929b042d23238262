"""signal-cli's JSON as typed values: the `receive` events of its HTTP daemon and the
errors of its JSON-RPC answers.

The daemon (`signal-cli daemon --http`, man page signal-cli-jsonrpc(5)) pushes each
received envelope as a Server-Sent Event `receive` whose data is
`{"account": "+49...", "envelope": {...}}` (an `exception` beside it when decryption
failed). An envelope names its sender (`sourceUuid`, the ACI, and `sourceNumber` when
the number is known) and carries at most one of dataMessage, syncMessage,
receiptMessage, typingMessage, editMessage, callMessage, storyMessage. Only a
dataMessage with words or files is a message for us; the rest is read and dropped here.

JSON-RPC errors carry signal-cli's own codes: -1 a user error (the recipient is not
registered, not a group member, a bad parameter), -3 an I/O error, -4 an untrusted
identity (the person's safety number changed), -5 rate limited, -32602 a bad parameter
such as an account this daemon does not have. A failed send's per-recipient results
ride in `error.data.response.results` (type UNREGISTERED_FAILURE, NETWORK_FAILURE,
RATE_LIMIT_FAILURE with retryAfterSeconds, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable

USER_ERROR = -1
IO_ERROR = -3
UNTRUSTED_KEY_ERROR = -4
RATE_LIMIT_ERROR = -5
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
DEFAULT_RETRY_SECONDS = 60.0
# The one character Signal puts in the text where a mention stands.
MENTION_MARK = "\ufffc"


@dataclass(frozen=True)
class Mention:
    """A mention inside a message's text (offsets in UTF-16 code units)."""

    start: int
    length: int
    uuid: str = ""
    number: str = ""
    name: str = ""


@dataclass(frozen=True)
class Quote:
    """The message a message answers: its timestamp and author."""

    id: int
    author_uuid: str = ""
    author_number: str = ""
    text: str = ""


@dataclass(frozen=True)
class FileRef:
    """An attachment signal-cli has downloaded already; `getAttachment` reads it by id."""

    id: str
    content_type: str
    filename: str = ""
    size: int | None = None
    voice_note: bool = False


@dataclass(frozen=True)
class DataMessage:
    """A message a person sent (to us, or to a group we are in)."""

    timestamp: int
    text: str = ""
    group_id: str = ""
    mentions: tuple[Mention, ...] = ()
    quote: Quote | None = None
    attachments: tuple[FileRef, ...] = ()
    # a reaction, a remote delete or a group update comes as a data message too
    is_control: bool = False


@dataclass(frozen=True)
class Envelope:
    """One received envelope; `data` is None for what is not a person's message."""

    account: str
    source_uuid: str
    source_number: str
    source_name: str
    timestamp: int
    data: DataMessage | None = None
    error: str = ""


@dataclass(frozen=True)
class SendResult:
    """One recipient's result of a send, as signal-cli reports it."""

    type: str
    retry_after: float | None = None


@dataclass
class RpcError:
    """A JSON-RPC error answer."""

    code: int
    message: str
    results: list[SendResult] = field(default_factory=list)


def parse_event(data: str) -> Envelope | None:
    """The data of a `receive` event as an Envelope (None when it holds no envelope).

    ValueError names what is wrong when the data is not the JSON signal-cli writes."""
    body = json.loads(data)
    if not isinstance(body, dict):
        raise ValueError("a receive event's data is not a JSON object")
    if body.get("method") == "receive" and isinstance(body.get("params"), dict):
        body = body["params"]  # the jsonRpc mode's notification wrapper
    envelope = body.get("envelope")
    if not isinstance(envelope, dict):
        return None
    exception = body.get("exception")
    error = ""
    if isinstance(exception, dict):
        error = f"{exception.get('type', 'error')}: {exception.get('message', '')}".strip(": ")
    return Envelope(
        account=_str(body.get("account")),
        source_uuid=_str(envelope.get("sourceUuid")),
        source_number=_str(envelope.get("sourceNumber")),
        source_name=_str(envelope.get("sourceName")),
        timestamp=_int(envelope.get("timestamp")),
        data=_data_message(envelope.get("dataMessage")),
        error=error,
    )


def _data_message(raw: object) -> DataMessage | None:
    if not isinstance(raw, dict):
        return None
    group = raw.get("groupInfo")
    group_id = _str(group.get("groupId")) if isinstance(group, dict) else ""
    control = (
        raw.get("reaction") is not None
        or raw.get("remoteDelete") is not None
        or (isinstance(group, dict) and group.get("type") == "UPDATE")
        or bool(raw.get("isExpirationUpdate"))
    )
    return DataMessage(
        timestamp=_int(raw.get("timestamp")),
        text=_str(raw.get("message")),
        group_id=group_id,
        mentions=tuple(_mention(m) for m in _list(raw.get("mentions"))),
        quote=_quote(raw.get("quote")),
        attachments=tuple(_file(a) for a in _list(raw.get("attachments")) if a.get("id")),
        is_control=control,
    )


def _mention(raw: dict[str, Any]) -> Mention:
    return Mention(
        start=_int(raw.get("start")),
        length=_int(raw.get("length")),
        uuid=_str(raw.get("uuid")),
        number=_str(raw.get("number")),
        name=_str(raw.get("name")),
    )


def _quote(raw: object) -> Quote | None:
    if not isinstance(raw, dict):
        return None
    return Quote(
        id=_int(raw.get("id")),
        author_uuid=_str(raw.get("authorUuid")),
        author_number=_str(raw.get("authorNumber")),
        text=_str(raw.get("text")),
    )


def _file(raw: dict[str, Any]) -> FileRef:
    size = raw.get("size")
    return FileRef(
        id=_str(raw.get("id")),
        content_type=_str(raw.get("contentType")) or "application/octet-stream",
        filename=_str(raw.get("filename")),
        size=int(size) if isinstance(size, int) else None,
        voice_note=bool(raw.get("voiceNote")),
    )


def parse_error(raw: object) -> RpcError:
    """A JSON-RPC `error` member as an RpcError."""
    if not isinstance(raw, dict):
        return RpcError(0, "a malformed JSON-RPC error")
    results: list[SendResult] = []
    data = raw.get("data")
    response = data.get("response") if isinstance(data, dict) else None
    if isinstance(response, dict):
        for item in _list(response.get("results")):
            retry = item.get("retryAfterSeconds")
            results.append(
                SendResult(
                    _str(item.get("type")),
                    float(retry) if isinstance(retry, int | float) else None,
                )
            )
    return RpcError(_int(raw.get("code")), _str(raw.get("message")), results)


def mapped_error(method: str, error: RpcError, account: str) -> Exception:
    """The adapter error a signal-cli error means for the delivery worker and supervisor."""
    message = f"{method}: {error.code} {error.message}".strip()
    lowered = error.message.lower()
    kinds = {r.type for r in error.results}
    if error.code == RATE_LIMIT_ERROR or "ratelimit" in lowered.replace(" ", ""):
        waits = [r.retry_after for r in error.results if r.retry_after is not None]
        return RetryAfter(message, max(waits) if waits else DEFAULT_RETRY_SECONDS)
    if error.code == INVALID_PARAMS and "account" in lowered:
        return FatalAdapterError(
            f"{message} (the daemon has no account {account}: register or link it with "
            f"signal-cli -a {account} register / link)"
        )
    if error.code == UNTRUSTED_KEY_ERROR:
        return Undeliverable(
            f"{message} (the person's safety number changed: "
            f"signal-cli -a {account} trust -a <their number>, once verified)"
        )
    if error.code == USER_ERROR:
        if "NETWORK_FAILURE" in kinds:
            return SendError(message)
        return Undeliverable(message)
    return SendError(message)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _list(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class SseEvent:
    """One Server-Sent Event being read: its `event:` name and `data:` lines."""

    def __init__(self) -> None:
        self.name = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        """Read one line; returns the event when a blank line ends it."""
        if not line:
            return self if self.data else None
        if line.startswith(":"):
            return None  # a comment: signal-cli's keepalive
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            self.name = value
        elif key == "data":
            self.data.append(value)
        return None
