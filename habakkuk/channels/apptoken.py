"""App access tokens for the platforms that hand one out per app (Feishu/Lark, DingTalk,
WeCom): one cache per adapter, so every send of that app shares one token.

A token is fetched once and kept until five minutes before the lifetime the platform
gave it (`RENEW_BEFORE`), so no send carries a token about to lapse. Fetching is
single-flight: concurrent sends that find no fresh token wait for one fetch instead of
each asking the platform (which may revoke the previous token on every new one, as
WeCom's gettoken rate limit punishes). A platform may still call a token stale before
its time (revoked, rotated by another process of the same app): the call raises
`StaleToken`, `call` drops that token and runs the request once more with a fresh one;
a second stale answer is a plain SendError (the delivery retries later).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .adapter import SendError

RENEW_BEFORE = 300.0  # seconds before expiry a token is renewed
T = TypeVar("T")


class StaleToken(SendError):
    """The platform refused the token as invalid or expired (its stale-token code)."""


@dataclass(frozen=True)
class AppToken:
    """A token and how many seconds the platform said it lives."""

    value: str
    lifetime: float


Fetch = Callable[[], Awaitable[AppToken]]
Clock = Callable[[], float]


class AppTokenCache:
    """One app's access token: fetched once, renewed `renew_before` seconds before its
    expiry, dropped when a call finds it stale."""

    def __init__(
        self, fetch: Fetch, *, renew_before: float = RENEW_BEFORE, clock: Clock = time.monotonic
    ):
        self._fetch = fetch
        self._renew_before = renew_before
        self._clock = clock
        self._token = ""
        self._until = 0.0  # when the token is due for renewal (clock time)
        self._lock = asyncio.Lock()
        self.fetches = 0  # how many tokens were fetched (health, tests)

    async def get(self) -> str:
        """A token fresh for at least `renew_before` more seconds (fetched when not)."""
        if self._token and self._clock() < self._until:
            return self._token
        async with self._lock:
            # Another caller may have fetched while this one waited for the lock.
            if self._token and self._clock() < self._until:
                return self._token
            found = await self._fetch()
            self.fetches += 1
            if not found.value:
                raise SendError("the platform returned an empty access token")
            self._token = found.value
            self._until = self._clock() + max(0.0, found.lifetime - self._renew_before)
            return self._token

    def drop(self, token: str) -> None:
        """Forget `token` when it is still the cached one (a stale answer to an older
        token must not drop the fresh one another call already fetched)."""
        if token == self._token:
            self._token, self._until = "", 0.0

    async def call(self, use: Callable[[str], Awaitable[T]]) -> T:
        """`use(token)`; when the platform calls the token stale, once more with a fresh
        one."""
        token = await self.get()
        try:
            return await use(token)
        except StaleToken:
            self.drop(token)
        token = await self.get()
        try:
            return await use(token)
        except StaleToken as exc:
            self.drop(token)
            raise SendError(f"a fresh access token was refused too: {exc}") from None
