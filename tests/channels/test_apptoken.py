"""The shared app-token cache: one fetch per app, renewed five minutes before expiry,
single-flight under concurrent sends, dropped and retried once when a call finds it
stale."""

from __future__ import annotations

import asyncio

import pytest

from habakkuk.channels.adapter import SendError
from habakkuk.channels.apptoken import RENEW_BEFORE, AppToken, AppTokenCache, StaleToken


class Platform:
    """A token endpoint that counts its fetches and can stall them."""

    def __init__(self, lifetime: float = 7200.0):
        self.lifetime = lifetime
        self.fetched = 0
        self.gate: asyncio.Event | None = None

    async def fetch(self) -> AppToken:
        self.fetched += 1
        if self.gate is not None:
            await self.gate.wait()
        return AppToken(f"token-{self.fetched}", self.lifetime)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_token_is_kept_until_five_minutes_before_it_expires() -> None:
    platform, clock = Platform(lifetime=7200), Clock()
    cache = AppTokenCache(platform.fetch, clock=clock)
    assert await cache.get() == "token-1"
    clock.now += 7200 - RENEW_BEFORE - 1
    assert await cache.get() == "token-1"
    clock.now += 1  # five minutes before expiry: renewed
    assert await cache.get() == "token-2"
    assert platform.fetched == cache.fetches == 2


async def test_concurrent_sends_fetch_one_token() -> None:
    platform = Platform()
    platform.gate = asyncio.Event()
    cache = AppTokenCache(platform.fetch)
    waiting = [asyncio.create_task(cache.get()) for _ in range(20)]
    await asyncio.sleep(0)  # every caller reaches the cache before the fetch answers
    platform.gate.set()
    assert set(await asyncio.gather(*waiting)) == {"token-1"}
    assert platform.fetched == 1


async def test_a_stale_token_is_dropped_and_the_call_retried_once_with_a_fresh_one() -> None:
    platform = Platform()
    cache = AppTokenCache(platform.fetch)
    used: list[str] = []

    async def call(token: str) -> str:
        used.append(token)
        if token == "token-1":
            raise StaleToken("code 99991663")
        return "sent"

    assert await cache.call(call) == "sent"
    assert used == ["token-1", "token-2"]
    assert await cache.get() == "token-2"  # the fresh one is kept


async def test_a_fresh_token_called_stale_again_fails_the_send_without_a_loop() -> None:
    platform = Platform()
    cache = AppTokenCache(platform.fetch)
    used: list[str] = []

    async def call(token: str) -> str:
        used.append(token)
        raise StaleToken("code 40014")

    with pytest.raises(SendError, match="fresh access token was refused"):
        await cache.call(call)
    assert used == ["token-1", "token-2"]
    assert platform.fetched == 2


async def test_a_stale_answer_to_an_old_token_keeps_the_newer_one() -> None:
    platform = Platform()
    cache = AppTokenCache(platform.fetch)
    assert await cache.get() == "token-1"
    cache.drop("token-1")
    assert await cache.get() == "token-2"
    cache.drop("token-1")  # a late stale answer for the old token
    assert await cache.get() == "token-2"
    assert platform.fetched == 2


async def test_an_empty_token_is_an_error_not_a_cached_blank() -> None:
    async def fetch() -> AppToken:
        return AppToken("", 7200)

    cache = AppTokenCache(fetch)
    with pytest.raises(SendError, match="empty access token"):
        await cache.get()
