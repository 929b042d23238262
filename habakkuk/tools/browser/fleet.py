"""One browser per agent: started by its first call, calls one at a time, closed when idle.

Mode launch starts the configured binary with the profile $HABAKKUK_HOME/browser/<agent>
(0700) behind the pinning proxy; mode connect dials cdp_url. A browser whose connection
closed (it crashed or was killed) is replaced by the next call, whose result says the
earlier tabs are gone. Refs keep counting across replacements, so no number is reused.
`launch_browser` is the launcher every caller shares (a dedicated browser passes its own
profile and extra flags).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.browser_config import BrowserConfig, merged
from habakkuk.engine.timeouts import wait_within

from .cdp import CdpConnection, WebSocketTransport
from .guard import UrlGuard
from .launcher import LaunchSpec, find_binary, launch
from .pinproxy import PinningProxy
from .session import Browser
from .snapshot import RefTable

if TYPE_CHECKING:
    from habakkuk.engine.config import Config

log = logging.getLogger(__name__)


class BrowserUnavailable(Exception):
    """No browser could be started or reached; the message says why and what to do."""


def guard_for(settings: BrowserConfig) -> UrlGuard:
    """The URL guard of a browser section."""
    return UrlGuard(
        allowed_urls=list(settings.allowed_urls),
        blocked_urls=list(settings.blocked_urls),
        allow_private=list(settings.allow_private),
    )


async def launch_browser(
    binary: str,
    profile: Path,
    guard: UrlGuard,
    *,
    headless: bool = True,
    extra_args: tuple[str, ...] = (),
    refs: RefTable | None = None,
) -> Browser:
    """Start a browser on `profile` behind a pinning proxy for `guard`, attached and
    guarded. The toolset's per-agent browsers and dedicated ones (extra flags, their own
    profile) are all started here."""
    proxy = PinningProxy(guard)
    await proxy.start()
    try:
        spec = LaunchSpec(binary, profile, headless, proxy.port, extra_args)
        launched = await launch(spec)
    except BaseException:
        await proxy.close()
        raise

    async def stop() -> None:
        try:
            await launched.stop()
        finally:  # also when the stop is itself stopped: the proxy's tunnels must not outlive it
            await proxy.close()

    browser = Browser(launched.connection, guard, launched=True, refs=refs, on_close=stop)
    browser.pid = launched.process.pid
    try:
        await wait_within(browser.start(), 30)
    except BaseException:
        await stop()
        raise
    return browser


async def connect_browser(url: str, guard: UrlGuard, refs: RefTable | None = None) -> Browser:
    """Work in tabs of a browser someone else runs, at `url` (ws:// or http://)."""
    transport = await WebSocketTransport.open(url)
    browser = Browser(CdpConnection(transport), guard, launched=False, refs=refs)
    await browser.start()
    return browser


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    browser: Browser | None = None
    refs: RefTable = field(default_factory=RefTable)
    idle: asyncio.TimerHandle | None = None
    closing: set[asyncio.Task[None]] = field(default_factory=set)


def agent_settings(config: Config) -> Callable[[str], BrowserConfig]:
    """The browser settings of each agent: the top-level section, its own over it."""

    def settings(agent: str) -> BrowserConfig:
        own = config.agents.get(agent)
        return merged(config.browser, own.browser if own is not None else None)

    return settings


class BrowserFleet:
    """The browsers of a runtime's agents, by agent name."""

    def __init__(
        self,
        home: Path,
        settings: Callable[[str], BrowserConfig],
        guards: Callable[[BrowserConfig], UrlGuard] = guard_for,
    ) -> None:
        self.home = home
        self.settings = settings
        self.guards = guards  # a test's guard may resolve names its own way
        self._slots: dict[str, _Slot] = {}

    @contextlib.asynccontextmanager
    async def use(self, agent: str) -> AsyncIterator[tuple[Browser, str]]:
        """The agent's browser, held for one call; with a note when it was (re)started
        after an earlier one ended."""
        slot = self._slots.setdefault(agent, _Slot())
        async with slot.lock:
            if slot.idle is not None:
                slot.idle.cancel()
            note = ""
            if slot.browser is not None and not slot.browser.alive:
                note = (
                    "[the browser had closed (it crashed or was stopped); a new one was "
                    "started and earlier tabs are gone]"
                )
                await self._close(slot)
            if slot.browser is None:
                slot.browser = await self._start(agent, slot.refs)
            try:
                yield slot.browser, note
            finally:
                timeout = self.settings(agent).idle_timeout
                slot.idle = asyncio.get_running_loop().call_later(timeout, self._idle, agent)

    def _idle(self, agent: str) -> None:
        slot = self._slots.get(agent)
        if slot is None or slot.lock.locked():
            return
        task = asyncio.create_task(self._close_idle(slot))
        slot.closing.add(task)
        task.add_done_callback(slot.closing.discard)

    async def _close_idle(self, slot: _Slot) -> None:
        async with slot.lock:
            await self._close(slot)

    async def _start(self, agent: str, refs: RefTable) -> Browser:
        settings = self.settings(agent)
        guard = self.guards(settings)
        if settings.mode == "connect":
            try:
                return await connect_browser(settings.cdp_url, guard, refs)
            except (OSError, ValueError, KeyError, TimeoutError) as exc:
                raise BrowserUnavailable(
                    f"cannot reach the browser at {settings.cdp_url}: {exc or type(exc).__name__}"
                ) from None
            except Exception as exc:  # aiohttp's errors: the same plain sentence
                raise BrowserUnavailable(
                    f"cannot reach the browser at {settings.cdp_url}: {exc}"
                ) from None
        binary = find_binary(settings.binary)
        if binary is None:
            wanted = settings.binary or "chromium (or Chrome)"
            raise BrowserUnavailable(
                f"no browser found: {wanted} is not installed or not on PATH (install "
                "chromium, or set browser.binary)"
            )
        profile = self.home / "browser" / agent
        (self.home / "browser").mkdir(mode=0o700, exist_ok=True)
        try:
            return await launch_browser(
                binary, profile, guard, headless=settings.headless, refs=refs
            )
        except (OSError, TimeoutError) as exc:
            raise BrowserUnavailable(
                f"{binary} did not start: {exc or type(exc).__name__}"
            ) from None

    async def _close(self, slot: _Slot) -> None:
        browser, slot.browser = slot.browser, None
        if browser is not None:
            try:
                await browser.close()
            except Exception:
                log.exception("closing a browser failed")

    def running(self, agent: str) -> Browser | None:
        """The agent's browser while one is open."""
        slot = self._slots.get(agent)
        return slot.browser if slot is not None else None

    async def close(self) -> None:
        """Close every browser (shutdown): launched ones exit, connect mode's tabs close."""
        for slot in self._slots.values():
            if slot.idle is not None:
                slot.idle.cancel()
            # An idle close under way is let finish (it holds the lock): cancelled halfway,
            # it would leave the browser's proxy listening with its tunnels open.
            async with slot.lock:
                await self._close(slot)
            await asyncio.gather(*slot.closing, return_exceptions=True)
