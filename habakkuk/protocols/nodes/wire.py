"""The frames devices and the server exchange, as typed values (spec 000 "Device nodes").

Over the websocket to /nodes each frame is one JSON object with a `type`:
`hello {name, secret, caps, platform}` (device, first), `welcome {name}` or
`error {error}` (server), `invoke {id, command, args}` (server) and
`result {id, result: {text, files, error}}` (device), files as `{name, data}` with the
bytes in base64. A browser node gets the same invoke frames as server-sent events and
posts the result object to POST /nodes/result.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

# A file a result carries, decoded, and a whole frame as sent (spec: 25 MB and 48 MB).
MAX_FILE_BYTES = 25 * 1024 * 1024
MAX_FRAME_BYTES = 48 * 1024 * 1024
# A websocket message may be the base64 of a full frame (4/3 of it) and its JSON.
MAX_MESSAGE_BYTES = MAX_FRAME_BYTES * 4 // 3 + 64 * 1024


class FrameError(ValueError):
    """A frame that is not what the protocol says, with why."""


@dataclass(frozen=True)
class NodeFile:
    """A file a device sends or receives."""

    name: str
    data: bytes

    def to_json(self) -> dict[str, str]:
        """The file as the wire carries it (base64)."""
        return {"name": self.name, "data": base64.b64encode(self.data).decode("ascii")}


@dataclass(frozen=True)
class NodeResult:
    """What a device answered to one invoke: text, files, or an error."""

    text: str = ""
    files: tuple[NodeFile, ...] = ()
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """The `result` object of a result frame."""
        return {
            "text": self.text,
            "files": [item.to_json() for item in self.files],
            "error": self.error,
        }


@dataclass(frozen=True)
class Hello:
    """A device's first frame."""

    name: str
    secret: str
    caps: tuple[str, ...]
    platform: str


@dataclass(frozen=True)
class Invoke:
    """A command for a device."""

    id: str
    command: str
    args: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The invoke frame."""
        return {"type": "invoke", "id": self.id, "command": self.command, "args": self.args}


@dataclass(frozen=True)
class ResultFrame:
    """A device's answer to the invoke `id`."""

    id: str
    result: NodeResult


def _text(value: Any, what: str, limit: int = 4096) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise FrameError(f"{what} must be text (at most {limit} characters)")
    return value


def caps_of(value: Any) -> tuple[str, ...]:
    """A list of capability names (dotted words), deduplicated in order."""
    if not isinstance(value, list) or len(value) > 64:
        raise FrameError("caps must be a list of at most 64 command names")
    return tuple(dict.fromkeys(_text(cap, "a capability", 64) for cap in value))


def _obj(raw: str | bytes) -> dict[str, Any]:
    if len(raw) > MAX_MESSAGE_BYTES:
        raise FrameError("the frame is over 48 MB")
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise FrameError("a frame must be a JSON object") from None
    if not isinstance(value, dict):
        raise FrameError("a frame must be a JSON object")
    return value


def parse_hello(raw: str | bytes) -> Hello:
    """The hello frame; FrameError otherwise."""
    frame = _obj(raw)
    if frame.get("type") != "hello":
        raise FrameError("the first frame must be hello")
    return Hello(
        _text(frame.get("name"), "name", 64),
        _text(frame.get("secret"), "secret", 256),
        caps_of(frame.get("caps", [])),
        _text(frame.get("platform", ""), "platform", 64),
    )


def parse_result_body(frame: dict[str, Any]) -> ResultFrame:
    """A result frame's (or POST /nodes/result's) object: {id, result}."""
    ident = _text(frame.get("id"), "id", 128)
    body = frame.get("result")
    if not isinstance(body, dict):
        raise FrameError("result must be an object {text, files, error}")
    files = body.get("files") or []
    if not isinstance(files, list):
        raise FrameError("result.files must be a list")
    decoded: list[NodeFile] = []
    for item in files:
        if not isinstance(item, dict):
            raise FrameError("each file must be an object {name, data}")
        name = _text(item.get("name"), "a file's name", 255)
        data = _text(item.get("data"), "a file's data", MAX_FRAME_BYTES * 2)
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise FrameError(f"{name}: data is not base64") from None
        if len(content) > MAX_FILE_BYTES:
            raise FrameError(f"{name} is over 25 MB")
        decoded.append(NodeFile(name, content))
    text = body.get("text") or ""
    error = body.get("error") or ""
    return ResultFrame(
        ident,
        NodeResult(
            _text(text, "result.text", MAX_FRAME_BYTES), tuple(decoded), _text(error, "error")
        ),
    )


def parse_result(raw: str | bytes) -> ResultFrame:
    """A result frame; FrameError for anything else."""
    frame = _obj(raw)
    if frame.get("type") != "result":
        raise FrameError(f"unexpected frame type {frame.get('type')!r}")
    return parse_result_body(frame)


def parse_invoke(raw: str | bytes) -> Invoke | None:
    """An invoke frame, or None for another known frame type (the device ignores it)."""
    frame = _obj(raw)
    if frame.get("type") != "invoke":
        return None
    args = frame.get("args") or {}
    if not isinstance(args, dict):
        raise FrameError("args must be an object")
    return Invoke(_text(frame.get("id"), "id", 128), _text(frame.get("command"), "command"), args)
