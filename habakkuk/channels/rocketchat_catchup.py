"""What was posted to Rocket.Chat while Habakkuk was away, read back on (re)connect.

The realtime stream has no position to resume from, so the adapter keeps one itself: the
time of the newest message it handed to the gateway, in channels/rocketchat-<account>.json
(written whole or not at all). After each subscription, before reading the stream, it asks
for the rooms the bot is in (`GET /api/v1/subscriptions.get`) and each room's messages from
that time on (`im.history`, `channels.history` or `groups.history` by the room's type, with
`oldest` and `inclusive`, newest first in pages of `count`). They go to the gateway oldest
first through the same redelivery check as the stream's, so a message read both ways, or a
second at the same millisecond, is answered once. The first start keeps the server's
time (its Date header) and reads nothing older.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.home import write_private_file

from .adapter import Undeliverable
from .rocketchat_wire import iso_ms, stamp_ms

log = logging.getLogger(__name__)

# The history endpoint of each room type (d: direct, c: channel, p: private group or
# discussion); omnichannel rooms (l) are not the bot's to read.
HISTORY = {"d": "im.history", "c": "channels.history", "p": "groups.history"}
PAGE = 100
MAX_PAGES = 20  # 2,000 messages a room at most: an outage's backlog, not a room's archive

Rest = Callable[[str, str, dict[str, str]], Awaitable[dict[str, Any]]]


@dataclass
class RocketChatState:
    """What Rocket.Chat cannot give back: the time (ms) of the newest message handed on."""

    path: Path
    since: int | None = None

    @classmethod
    def load(cls, path: Path) -> RocketChatState:
        """The state in `path` (no position when there is none yet or it cannot be read)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        since = data.get("since") if isinstance(data, dict) else None
        return cls(path, since if isinstance(since, int) and not isinstance(since, bool) else None)

    def advance(self, ms: int) -> bool:
        """Move the position to `ms` if it is newer; whether it moved (then save)."""
        if self.since is not None and ms <= self.since:
            return False
        self.since = ms
        return True

    def save(self) -> None:
        """Write the position (whole or not at all, 0600)."""
        write_private_file(self.path, json.dumps({"since": self.since}) + "\n")


@dataclass(frozen=True)
class Missed:
    """A message posted while away, with its room's type."""

    message: dict[str, Any]
    room_type: str
    at: int


async def missed(rest: Rest, since: int) -> list[Missed]:
    """Every message of every room the bot is in from `since` (ms) on, oldest first. A room
    the server will not show (HTTP 400/403/404) is skipped; other failures raise."""
    answer = await rest("GET", "subscriptions.get", {})
    rooms = answer.get("update")
    found: list[Missed] = []
    for room in rooms if isinstance(rooms, list) else []:
        if not isinstance(room, dict):
            continue
        rid, kind = room.get("rid"), str(room.get("t") or "")
        endpoint = HISTORY.get(kind)
        if not isinstance(rid, str) or endpoint is None:
            continue
        try:
            found += await _room(rest, endpoint, rid, kind, since)
        except Undeliverable as exc:
            log.warning("rocketchat: cannot read what was missed in %s: %s", rid, exc)
    found.sort(key=lambda item: item.at)
    return found


async def _room(rest: Rest, endpoint: str, rid: str, kind: str, since: int) -> list[Missed]:
    found: list[Missed] = []
    for page in range(MAX_PAGES):
        params = {
            "roomId": rid,
            "oldest": iso_ms(since),
            "inclusive": "true",
            "count": str(PAGE),
            "offset": str(page * PAGE),
        }
        answer = await rest("GET", endpoint, params)
        messages = answer.get("messages")
        batch = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        for message in batch:
            at = stamp_ms(message.get("ts"))
            if at is not None and at >= since:
                found.append(Missed(message, kind, at))
        if len(batch) < PAGE:
            break
    found.reverse()  # the server gives newest first: now oldest first, ties included
    return found
