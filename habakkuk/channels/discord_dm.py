"""Discord addresses that name a user: sent to as a channel first, then to their DM channel.

Discord sends only to channel ids; `habakkuk send --to dc:<user id>` (or any delivery
addressed to a person rather than a chat) names a user. Such a send is tried as a channel
first (most addresses are channels, and that costs nothing extra); when Discord answers
404 Unknown Channel (10003), the user's DM channel is opened with
`POST /users/@me/channels {"recipient_id": <id>}` and the send goes there. The mapping is
kept in memory only: opening the DM again after a restart is idempotent (Discord returns
the same channel), so persisting it would save one request and cost a table.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .adapter import Undeliverable
from .discord_rest import DiscordBadRequest, DiscordRefused, DiscordRest

UNKNOWN_CHANNEL = 10003
CANNOT_MESSAGE_USER = 50007  # the user's privacy settings, or no server shared
T = TypeVar("T")


class DirectChannels:
    """User id -> DM channel id, learned when a send to the user id as a channel fails."""

    def __init__(self, rest: DiscordRest, limit: int = 1000):
        self._rest = rest
        self._limit = limit
        self._dms: OrderedDict[str, str] = OrderedDict()

    def channel(self, chat: str) -> str:
        """Where to send for `chat`: its DM channel once known, else `chat` itself."""
        return self._dms.get(chat, chat)

    async def at(self, chat: str, call: Callable[[str], Awaitable[T]]) -> T:
        """Run `call(channel)` for `chat`; on Unknown Channel for an id not yet mapped, open
        the DM of the user with that id and run it there."""
        channel = self.channel(chat)
        try:
            return await call(channel)
        except DiscordRefused as exc:
            if exc.code != UNKNOWN_CHANNEL or channel != chat:
                raise
        return await call(await self.open(chat))

    async def open(self, user: str) -> str:
        """The DM channel id of `user` (POST /users/@me/channels), remembered; Undeliverable
        when Discord knows no such user or the user takes no messages from the bot."""
        try:
            dm = await self._rest.request(
                "POST", "/users/@me/channels", json_body={"recipient_id": user}
            )
        except (DiscordRefused, DiscordBadRequest) as exc:
            if exc.code == CANNOT_MESSAGE_USER:
                reason = f"user {user} takes no direct messages from the bot"
            else:
                reason = f"{user} is neither a channel nor a user the bot knows"
            raise Undeliverable(f"Discord: {reason} ({exc})") from None
        channel = str(dm.get("id", "")) if isinstance(dm, dict) else ""
        if not channel:
            raise Undeliverable(f"Discord: opening the DM with {user} returned no channel id")
        self._dms[user] = channel
        while len(self._dms) > self._limit:
            self._dms.popitem(last=False)
        return channel
