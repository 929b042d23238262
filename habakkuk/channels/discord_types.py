"""The Discord objects the adapter reads, parsed from the gateway's JSON at the edge.

Only the fields we use; anything missing takes a neutral default, so an event of a shape
we do not expect is skipped by the adapter rather than failing the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Message flags: a voice message (an audio attachment with a waveform).
IS_VOICE_MESSAGE = 1 << 13
# Message types that carry what a person wrote: DEFAULT and REPLY.
USER_MESSAGE_TYPES = (0, 19)
# Interaction types: a press on a message component (a button).
MESSAGE_COMPONENT = 3


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class DiscordUser:
    id: str
    username: str = ""
    global_name: str = ""
    bot: bool = False

    @classmethod
    def parse(cls, data: Any) -> DiscordUser:
        raw = _dict(data)
        return cls(
            _str(raw.get("id")),
            _str(raw.get("username")),
            _str(raw.get("global_name")),
            bool(raw.get("bot")),
        )

    @property
    def display(self) -> str:
        return self.global_name or self.username


@dataclass(frozen=True)
class DiscordAttachment:
    id: str
    filename: str
    url: str
    content_type: str = ""
    size: int | None = None

    @classmethod
    def parse(cls, data: Any) -> DiscordAttachment:
        raw = _dict(data)
        size = raw.get("size")
        return cls(
            _str(raw.get("id")),
            _str(raw.get("filename")) or "file",
            _str(raw.get("url")),
            _str(raw.get("content_type")),
            size if isinstance(size, int) else None,
        )


@dataclass(frozen=True)
class DiscordMessage:
    """A MESSAGE_CREATE (or a message inside an interaction)."""

    id: str
    channel_id: str
    author: DiscordUser
    content: str = ""
    guild_id: str = ""
    type: int = 0
    flags: int = 0
    webhook_id: str = ""
    timestamp: float = 0.0
    mentions: tuple[str, ...] = ()
    attachments: tuple[DiscordAttachment, ...] = ()
    # the author of the message this one replies to ("" when it is no reply)
    replied_author: str = ""

    @classmethod
    def parse(cls, data: Any) -> DiscordMessage:
        raw = _dict(data)
        replied = _dict(raw.get("referenced_message"))
        kind = raw.get("type", 0)
        flags = raw.get("flags", 0)
        return cls(
            id=_str(raw.get("id")),
            channel_id=_str(raw.get("channel_id")),
            author=DiscordUser.parse(raw.get("author")),
            content=_str(raw.get("content")),
            guild_id=_str(raw.get("guild_id")),
            type=kind if isinstance(kind, int) else -1,
            flags=flags if isinstance(flags, int) else 0,
            webhook_id=_str(raw.get("webhook_id")),
            timestamp=_timestamp(raw.get("timestamp")),
            mentions=tuple(
                _str(_dict(m).get("id")) for m in raw.get("mentions") or [] if isinstance(m, dict)
            ),
            attachments=tuple(
                DiscordAttachment.parse(a)
                for a in raw.get("attachments") or []
                if isinstance(a, dict)
            ),
            replied_author=_str(_dict(replied.get("author")).get("id")),
        )


@dataclass(frozen=True)
class DiscordInteraction:
    """An INTERACTION_CREATE: for us, a button press (type 3)."""

    id: str
    token: str
    type: int
    custom_id: str
    channel_id: str
    guild_id: str
    user: DiscordUser
    message_id: str

    @classmethod
    def parse(cls, data: Any) -> DiscordInteraction:
        raw = _dict(data)
        # In a guild the presser is the member's user; in a DM, `user`.
        user = _dict(raw.get("member")).get("user") or raw.get("user")
        kind = raw.get("type", 0)
        return cls(
            id=_str(raw.get("id")),
            token=_str(raw.get("token")),
            type=kind if isinstance(kind, int) else 0,
            custom_id=_str(_dict(raw.get("data")).get("custom_id")),
            channel_id=_str(raw.get("channel_id")) or _str(_dict(raw.get("channel")).get("id")),
            guild_id=_str(raw.get("guild_id")),
            user=DiscordUser.parse(user),
            message_id=_str(_dict(raw.get("message")).get("id")),
        )


def _timestamp(value: Any) -> float:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return 0.0
