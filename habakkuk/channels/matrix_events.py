"""A /sync answer parsed at the edge: typed rooms, messages and invites.

Only what the adapter acts on is read: joined rooms' `m.room.message` events (text,
files, voice), the `m.room.encryption` state or an `m.room.encrypted` event (the room is
encrypted: the bot cannot read it), member changes (a room's size decides private or
group) and invites addressed to the bot. The filter sent with each sync asks for no more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def sync_filter(me: str) -> dict[str, Any]:
    """The /sync filter: no presence, account data, receipts or typing; in rooms, the
    events the adapter reads, not its own (each send would otherwise wake the long poll
    to bring back what the bot just said). Members come lazily (only the senders')."""
    return {
        "presence": {"types": []},
        "account_data": {"types": []},
        "room": {
            "account_data": {"types": []},
            "ephemeral": {"types": []},
            "state": {"types": ["m.room.encryption", "m.room.member"], "lazy_load_members": True},
            "timeline": {
                "types": [
                    "m.room.message",
                    "m.room.encrypted",
                    "m.room.encryption",
                    "m.room.member",
                ],
                "not_senders": [me],
                "limit": 100,
            },
        },
    }


VOICE_KEY = "org.matrix.msc3245.voice"
FILE_TYPES = frozenset({"m.image", "m.file", "m.audio", "m.video"})


def encode_id(room_or_event: str) -> str:
    """A Matrix id written without colons (an Address is `CHANNEL:CHAT[:THREAD]`):
    `!abc:example.org` becomes `!abc%3Aexample.org`; `%` itself is `%25`."""
    return room_or_event.replace("%", "%25").replace(":", "%3A")


def decode_id(text: str) -> str:
    """The Matrix id `encode_id` wrote."""
    return text.replace("%3A", ":").replace("%3a", ":").replace("%25", "%")


@dataclass(frozen=True)
class Message:
    """One `m.room.message` event in a joined room."""

    room: str
    event_id: str
    sender: str
    ts: int
    msgtype: str
    body: str
    formatted_body: str = ""
    # a file's mxc:// URI, name, media type and size (m.image, m.file, m.audio, m.video)
    url: str = ""
    filename: str = ""
    mimetype: str = ""
    size: int | None = None
    voice: bool = False
    thread: str = ""  # the thread's root event (rel_type m.thread)
    reply_to: str = ""  # the event this one answers (m.in_reply_to)
    mentions: tuple[str, ...] = ()  # m.mentions user_ids
    edit: bool = False  # an m.replace of an earlier message


@dataclass
class RoomUpdate:
    """What one sync said about one joined room."""

    room: str
    messages: list[Message] = field(default_factory=list)
    encrypted: bool = False
    members_changed: bool = False
    joined_count: int | None = None


@dataclass(frozen=True)
class Invite:
    """The bot was invited to `room` by `inviter`."""

    room: str
    inviter: str


@dataclass(frozen=True)
class SyncBatch:
    """One /sync answer."""

    next_batch: str
    rooms: list[RoomUpdate]
    invites: list[Invite]


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_sync(body: dict[str, Any], me: str) -> SyncBatch:
    """A /sync answer as a SyncBatch (events of `me`, the bot, are left out)."""
    rooms = _dict(body.get("rooms"))
    updates = []
    for room_id, room in _dict(rooms.get("join")).items():
        update = RoomUpdate(str(room_id))
        summary = _dict(_dict(room).get("summary"))
        joined = summary.get("m.joined_member_count")
        if isinstance(joined, int):
            update.joined_count = joined
        state = _list(_dict(_dict(room).get("state")).get("events"))
        timeline = _list(_dict(_dict(room).get("timeline")).get("events"))
        for raw in [*state, *timeline]:
            event = _dict(raw)
            kind = event.get("type")
            if kind in ("m.room.encryption", "m.room.encrypted"):
                update.encrypted = True
            elif kind == "m.room.member":
                update.members_changed = True
            elif (
                kind == "m.room.message" and event.get("sender") != me and "state_key" not in event
            ):
                message = parse_message(str(room_id), event)
                if message is not None:
                    update.messages.append(message)
        updates.append(update)
    invites = []
    for room_id, room in _dict(rooms.get("invite")).items():
        for raw in _list(_dict(_dict(room).get("invite_state")).get("events")):
            event = _dict(raw)
            membership = _dict(event.get("content")).get("membership")
            if (
                event.get("type") == "m.room.member"
                and event.get("state_key") == me
                and membership == "invite"
            ):
                invites.append(Invite(str(room_id), str(event.get("sender", ""))))
                break
    return SyncBatch(str(body.get("next_batch", "")), updates, invites)


def parse_message(room: str, event: dict[str, Any]) -> Message | None:
    """An m.room.message event as a Message (None when it has no event id or content)."""
    content = _dict(event.get("content"))
    event_id = event.get("event_id")
    if not isinstance(event_id, str) or not content:
        return None
    relates = _dict(content.get("m.relates_to"))
    info = _dict(content.get("info"))
    size = info.get("size")
    mentions = _list(_dict(content.get("m.mentions")).get("user_ids"))
    thread = ""
    if relates.get("rel_type") == "m.thread" and isinstance(relates.get("event_id"), str):
        thread = relates["event_id"]
    reply_to = _dict(relates.get("m.in_reply_to")).get("event_id")
    # In a thread, a client's fallback reply points at the thread's last event: not a
    # reply the person wrote (is_falling_back), so not "a reply to the bot".
    if relates.get("is_falling_back"):
        reply_to = None
    return Message(
        room=room,
        event_id=event_id,
        sender=str(event.get("sender", "")),
        ts=int(event.get("origin_server_ts") or 0),
        msgtype=str(content.get("msgtype", "")),
        body=str(content.get("body", "")),
        formatted_body=str(content.get("formatted_body", ""))
        if content.get("format") == "org.matrix.custom.html"
        else "",
        url=str(content.get("url", "")),
        filename=str(content.get("filename", "")),
        mimetype=str(info.get("mimetype", "")),
        size=size if isinstance(size, int) else None,
        voice=VOICE_KEY in content,
        thread=thread,
        reply_to=reply_to if isinstance(reply_to, str) else "",
        mentions=tuple(str(u) for u in mentions),
        edit=relates.get("rel_type") == "m.replace",
    )


def without_reply_fallback(body: str) -> str:
    """A reply's body without the quoted fallback older clients put first
    (`> <@alice:x> original` lines, then a blank line)."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> <"):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    return "\n".join(lines[index:]).lstrip("\n")
