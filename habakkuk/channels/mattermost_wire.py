"""Mattermost's posts in the gateway's terms, and what the adapter keeps between runs.

A post (`data.post` of a `posted` event, a JSON string, or one of a channel's posts) is
taken unless it is ours, a system message (`type`) or deleted. A direct channel
(`channel_type` D) is always addressed; in a channel or group (O, P, G) the bot answers
when @-mentioned (its username in the text, or its id in the event's `mentions`), or a
command. A thread (`root_id`) is its own conversation. Files come as the post's
`metadata.files` (FileInfo: id, name, mime_type, size), fetched later by id.
"""

from __future__ import annotations

import json
import mimetypes
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from habakkuk.engine.home import write_private_file

from .adapter import Attachment, InboundMessage

DIRECT = "D"


@dataclass
class Seen:
    """One channel the bot has read: its type and the newest post handed on (ms)."""

    type: str
    since: int


PRESSED_KEPT = 500  # the nonces of the newest prompts answered by a button, kept


@dataclass
class MattermostState:
    """The channels seen and the newest post of each handed to the gateway, so that a
    reconnect fetches only what was posted while the socket was down; the secret in the
    buttons' URL and the key their context is signed with (kept, so a button posted
    before a restart still works after it); and the prompts already answered by a
    button (a replayed press is refused)."""

    path: Path
    channels: dict[str, Seen] = field(default_factory=dict)
    secret: str = ""
    key: str = ""
    pressed: list[str] = field(default_factory=list)
    # the newest post (ms) the bot's channels had at the last connect: a channel unknown
    # and posted in after it was first opened while we were away
    horizon: int = 0

    @classmethod
    def load(cls, path: Path) -> MattermostState:
        """The state in `path` (empty when there is none yet or it cannot be read)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        if not isinstance(data, dict):
            return cls(path)
        channels = data.get("channels")
        state = cls(path)
        for key, value in channels.items() if isinstance(channels, dict) else ():
            if isinstance(value, dict) and isinstance(value.get("since"), int):
                state.channels[str(key)] = Seen(str(value.get("type") or ""), value["since"])
        horizon = data.get("horizon")
        state.horizon = horizon if isinstance(horizon, int) else 0
        buttons = data.get("buttons")
        if isinstance(buttons, dict):
            state.secret = str(buttons.get("secret") or "")
            state.key = str(buttons.get("key") or "")
            pressed = buttons.get("pressed")
            state.pressed = [str(p) for p in pressed] if isinstance(pressed, list) else []
        return state

    def keys(self) -> bool:
        """Make the buttons' URL secret and signing key when there are none yet (256
        random bits each); True when they were made now (then save)."""
        if self.secret and self.key:
            return False
        self.secret, self.key = secrets.token_urlsafe(32), secrets.token_hex(32)
        return True

    def press(self, nonce: str) -> None:
        """Remember that the prompt of `nonce` was answered by a button."""
        if nonce not in self.pressed:
            self.pressed = [*self.pressed, nonce][-PRESSED_KEPT:]

    def note(self, channel: str, kind: str, at: int) -> None:
        """Remember that the posts of `channel` up to `at` were handed on."""
        seen = self.channels.get(channel)
        if seen is None:
            self.channels[channel] = Seen(kind, at)
        else:
            seen.since = max(seen.since, at)
            seen.type = kind or seen.type

    def save(self) -> None:
        """Keep the state (written whole or not at all, 0600)."""
        data: dict[str, Any] = {
            "channels": {
                key: {"type": s.type, "since": s.since} for key, s in self.channels.items()
            }
        }
        if self.horizon:
            data["horizon"] = self.horizon
        if self.secret:
            data["buttons"] = {"secret": self.secret, "key": self.key, "pressed": self.pressed}
        write_private_file(self.path, json.dumps(data) + "\n")


@dataclass(frozen=True)
class Bot:
    """Who the bot is on the server (`GET /api/v4/users/me`)."""

    account: str
    user_id: str
    username: str


def convert(
    bot: Bot,
    post: dict[str, Any],
    channel_type: str,
    *,
    sender: str,
    mentions: frozenset[str] = frozenset(),
) -> InboundMessage | None:
    """A post as an InboundMessage (None for ours, system posts and deleted ones). An
    edit is no new post: it comes as a `post_edited` event, never read, or, in a
    catch-up, as a post created before `since` (skipped there)."""
    if post.get("type") or post.get("delete_at"):
        return None
    user_id = str(post.get("user_id") or "")
    if not user_id or user_id == bot.user_id:
        return None
    text = str(post.get("message") or "")
    attachments = files_of(post)
    group = channel_type != DIRECT
    mentioned = bot.user_id in mentions
    if bot.username:
        pattern = rf"(^|\W)@{re.escape(bot.username)}\b[:,]?\s*"
        mentioned = mentioned or re.search(pattern, text) is not None
        text = re.sub(pattern, r"\1", text)
    text = text.strip()
    if not text and not attachments:
        return None
    name = sender or user_id
    created = post.get("create_at")
    return InboundMessage(
        channel=bot.account,
        chat=str(post.get("channel_id") or ""),
        thread=str(post.get("root_id") or ""),
        message_id=str(post.get("id") or ""),
        sender=name,
        sender_aliases=[user_id],
        sender_name=name,
        text=text,
        attachments=attachments,
        is_group=group,
        addressed=not group or mentioned or text.startswith("/"),
        at=created / 1000 if isinstance(created, int | float) else 0.0,
    )


def files_of(post: dict[str, Any]) -> list[Attachment]:
    """The post's files (its metadata's FileInfos), to download by id."""
    metadata = post.get("metadata")
    infos = metadata.get("files") if isinstance(metadata, dict) else None
    found: list[Attachment] = []
    for info in infos if isinstance(infos, list) else []:
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            continue
        name = str(info.get("name") or info["id"])
        media = str(
            info.get("mime_type") or mimetypes.guess_type(name)[0] or "application/octet-stream"
        )
        kind: Literal["photo", "document", "audio", "video"] = "document"
        if media.startswith("image/"):
            kind = "photo"
        elif media.startswith("audio/"):
            kind = "audio"
        elif media.startswith("video/"):
            kind = "video"
        size = info.get("size")
        found.append(
            Attachment(kind, info["id"], name, media, size if isinstance(size, int) else None)
        )
    return found
