"""One attendance of a meeting (spec 000 "Meetings"): a dedicated browser joins as a
named guest, turns captions on, reads them into the transcript, and leaves on request,
at the time limit, when left alone, or when the call ends.

Every step probes the page (page_script.py) and classifies it (patterns.py); the step
does what that state asks: follow a launcher page, fill the pre-join page, wait in the
lobby, or stay in the call. A browser that dies is replaced and the meeting joined
again (twice at most per attempt); the transcript only grows, and the assembler is
seeded with its last lines so captions still on screen are not written twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from habakkuk.tools.browser.actions import press_keys
from habakkuk.tools.browser.cdp import BrowserGone, CdpError, CdpEvent
from habakkuk.tools.browser.session import Browser, Tab

from . import page_script
from .assembler import Assembler
from .media import media_flags, write_fake_media
from .patterns import (
    DENIED,
    ENDED,
    IN_CALL,
    INVALID,
    LAUNCHER,
    LOBBY,
    PLATFORMS,
    PRE_JOIN,
    UNKNOWN,
    Platform,
    Probe,
    any_label,
    classify,
    matches,
)
from .record import ENDED as ENDED_STATE
from .record import FAILED, JOINING, LEFT, Meeting, MeetingStore
from .record import IN_CALL as IN_CALL_STATE
from .record import LOBBY as LOBBY_STATE

log = logging.getLogger(__name__)

ANNOUNCEMENT = " has joined to take notes."
SEED_LINES = 30  # the transcript's last lines a resumed attendance will not write again
REPLACEMENTS = 2  # browsers replaced per attempt


@dataclass(frozen=True)
class AttendSettings:
    """The timings of an attendance (spec defaults; tests shorten them)."""

    step: float = 3.0  # between probes in the call
    join_step: float = 1.0  # between probes while joining
    lobby_timeout: float = 15 * 60
    stuck_timeout: float = 3 * 60  # any other page that does not change
    alone_timeout: float = 5 * 60
    captions_retry: float = 2 * 60
    quiet: float = 5.0  # a caption block unchanged this long is finished
    announce: bool = True


# Launches the dedicated browser of an attendance: (its profile, extra flags) -> Browser.
Launcher = Callable[[Path, tuple[str, ...]], Awaitable[Browser]]


class AttendanceFailed(Exception):
    """The attendance cannot go on; the message says why (it ends the record failed)."""


@dataclass
class _Call:
    """What one attendance knows between steps."""

    meeting: Meeting
    platform: Platform
    assembler: Assembler
    joined: bool = False
    muted: set[int] = field(default_factory=set)
    named: bool = False
    announced: bool = False
    captions_at: float = -1e18  # the last try to turn captions on
    shortcut_tried: bool = False
    observing: bool = False
    lobby_since: float | None = None
    alone_since: float | None = None
    final_seen: dict[str, int] = field(default_factory=dict)
    page: str = ""  # the last probe's fingerprint
    page_since: float = 0.0


class Attendance:
    """Attends meetings of a home's store with browsers from `launcher`."""

    def __init__(
        self,
        store: MeetingStore,
        launcher: Launcher,
        settings: AttendSettings = AttendSettings(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.launcher = launcher
        self.settings = settings
        self.clock = clock

    async def attend(self, meeting: Meeting) -> Meeting:
        """Attend `meeting` until it is over; its final record."""
        platform = PLATFORMS.get(meeting.platform)
        if platform is None:
            return self.store.update(
                meeting, state=FAILED, reason=f"unknown platform {meeting.platform!r}"
            )
        assembler = Assembler(self.settings.quiet)
        assembler.seed(self.store.lines(meeting.id)[-SEED_LINES:])
        call = _Call(meeting, platform, assembler)
        replaced = 0
        while True:
            try:
                return await self._in_browser(call)
            except (BrowserGone, ConnectionError) as exc:
                self._flush(call)
                if replaced >= REPLACEMENTS:
                    return self._finish(call, FAILED, f"the browser kept crashing ({exc})")
                replaced += 1
                log.warning("meeting %s: the browser died; joining again", meeting.id)
                call.joined = call.observing = call.named = False
                call.muted.clear()
            except AttendanceFailed as exc:
                return self._finish(call, FAILED, str(exc))

    async def _in_browser(self, call: _Call) -> Meeting:
        folder = self.store.dir_of(call.meeting.id)
        audio, video = write_fake_media(folder)
        flags = ("--lang=en-US", *media_flags(audio, video))
        browser = await self.launcher(folder / "profile", flags)
        try:
            tab = await browser.current_tab()
            await self._prepare(browser, tab, call)
            result = await browser.conn.send(
                "Page.navigate", {"url": call.meeting.url}, tab.session, timeout=60
            )
            if result.get("errorText"):
                raise AttendanceFailed(f"{call.meeting.url} did not load: {result['errorText']}")
            call.page_since = self.clock()
            call.meeting = self.store.update(call.meeting, state=JOINING, reason="")
            while True:
                done = await self._step(browser, tab, call)
                if done is not None:
                    return done
                self._write(call, call.assembler.tick(self.clock()))
                await asyncio.sleep(self.settings.step if call.joined else self.settings.join_step)
        finally:
            with contextlib.suppress(Exception):
                await browser.close()

    async def _prepare(self, browser: Browser, tab: Tab, call: _Call) -> None:
        """The ordinary user agent, the captions' binding and its listener."""
        version = await browser.conn.send("Browser.getVersion")
        agent = str(version.get("userAgent", "")).replace("HeadlessChrome", "Chrome")
        if agent:
            await browser.conn.send(
                "Emulation.setUserAgentOverride",
                {"userAgent": agent, "acceptLanguage": "en-US"},
                tab.session,
            )
        await browser.conn.send("Runtime.enable", {}, tab.session)
        await browser.conn.send("Runtime.addBinding", {"name": page_script.BINDING}, tab.session)

        def on_event(event: CdpEvent) -> None:
            if event.method != "Runtime.bindingCalled" or event.session != tab.session:
                return
            if event.params.get("name") != page_script.BINDING:
                return
            self._captions(call, str(event.params.get("payload") or ""))

        browser.conn.on_event(on_event)

    def _captions(self, call: _Call, payload: str) -> None:
        """A report of the page's observer: feed the assembler, write finished lines."""
        try:
            report = json.loads(payload)
            changed = list(report.get("changed") or [])
            removed = list(report.get("removed") or [])
        except (ValueError, AttributeError, TypeError):
            return
        now = self.clock()
        lines = []
        for block in changed:
            if isinstance(block, dict) and isinstance(block.get("id"), int):
                lines += call.assembler.update(
                    block["id"], str(block.get("speaker") or ""), str(block.get("text") or ""), now
                )
        for block_id in removed:
            if isinstance(block_id, int):
                lines += call.assembler.remove(block_id)
        self._write(call, lines)

    def _write(self, call: _Call, lines: list[Any]) -> None:
        self.store.append_lines(call.meeting.id, lines)

    def _flush(self, call: _Call) -> None:
        self._write(call, call.assembler.flush())

    async def _step(self, browser: Browser, tab: Tab, call: _Call) -> Meeting | None:
        """One probe and what its state asks; the final record once it is over."""
        now = self.clock()
        probe = Probe.from_page(await self._eval(browser, tab, call.platform, "probe"))
        state = classify(call.platform, probe)
        if self.store.leave_asked(call.meeting.id):
            await self._leave(browser, tab, call)
            return self._finish(call, LEFT, "asked to leave")
        if state in (ENDED, DENIED, INVALID) or (state == UNKNOWN and call.joined):
            seen = call.final_seen[state] = call.final_seen.get(state, 0) + 1
            needed = 4 if state == UNKNOWN else 2
            if state == INVALID:
                return self._finish(
                    call, FAILED, f"the link is invalid: {probe.title or call.meeting.url}"
                )
            if seen >= needed:
                reason = {ENDED: "the call ended", DENIED: "the host did not let Habakkuk in"}
                if state == DENIED:
                    return self._finish(call, FAILED, reason[DENIED])
                return self._finish(call, ENDED_STATE, reason.get(state, "the page left the call"))
            return None
        call.final_seen.clear()
        fingerprint = probe.fingerprint()
        if fingerprint != call.page:
            call.page, call.page_since = fingerprint, now
        if state == IN_CALL:
            return await self._in_call(browser, tab, call, probe, now)
        if state == LOBBY:
            if call.lobby_since is None:
                call.lobby_since = now
                call.meeting = self.store.update(call.meeting, state=LOBBY_STATE)
            if now - call.lobby_since >= self.settings.lobby_timeout:
                raise AttendanceFailed("nobody let Habakkuk in from the lobby")
            return None
        await self._click(browser, tab, call.platform, call.platform.dismiss_buttons)
        if state == LAUNCHER:
            await self._click(browser, tab, call.platform, call.platform.launcher_button)
        elif state == PRE_JOIN:
            await self._pre_join(browser, tab, call, probe)
        if now - call.page_since >= self.settings.stuck_timeout:
            raise AttendanceFailed(f"the page stayed at {probe.title or '(no title)'!r}")
        return None

    async def _pre_join(self, browser: Browser, tab: Tab, call: _Call, probe: Probe) -> None:
        """Type the name, turn microphone and camera off (once each), ask to join."""
        platform = call.platform
        wants_name = any(matches(platform.name_field, f) for f in probe.fields)
        if not call.named and wants_name:
            call.named = bool(
                await self._eval(browser, tab, platform, "focus", platform.name_field)
            )
            if call.named:
                await browser.conn.send(
                    "Input.insertText", {"text": call.meeting.name}, tab.session
                )
        for index, pattern in enumerate(platform.mute_buttons):
            if index not in call.muted and any_label(pattern, probe.buttons):
                await self._click(browser, tab, platform, pattern)
                call.muted.add(index)
        await self._click(browser, tab, platform, platform.join_button)

    async def _in_call(
        self, browser: Browser, tab: Tab, call: _Call, probe: Probe, now: float
    ) -> Meeting | None:
        platform = call.platform
        if not call.joined:
            call.joined = True
            call.lobby_since = None
            first = call.meeting.joined_at if call.meeting.joined_at is not None else now
            call.meeting = self.store.update(call.meeting, state=IN_CALL_STATE, joined_at=first)
        if self.settings.announce and not call.announced:
            call.announced = await self._announce(browser, tab, call)
        captions_shown = any_label(platform.captions_off, probe.buttons)
        retry = now - call.captions_at >= self.settings.captions_retry or not probe.captions
        if not captions_shown and retry:
            await self._captions_on(browser, tab, call, probe, now)
        if probe.captions or any_label(platform.captions_off, probe.buttons):
            call.observing = bool(await self._eval(browser, tab, platform, "observe"))
        joined_at = call.meeting.joined_at or now
        if now - joined_at >= call.meeting.duration_limit:
            await self._leave(browser, tab, call)
            return self._finish(call, LEFT, "the time limit passed")
        if matches(platform.alone_text, probe.text):
            call.alone_since = call.alone_since if call.alone_since is not None else now
            if now - call.alone_since >= self.settings.alone_timeout:
                await self._leave(browser, tab, call)
                return self._finish(call, LEFT, "everyone else had left")
        else:
            call.alone_since = None
        return None

    async def _captions_on(
        self, browser: Browser, tab: Tab, call: _Call, probe: Probe, now: float
    ) -> None:
        """Press the deepest captions control showing; Meet's shortcut once per round."""
        platform = call.platform
        for pattern in reversed(platform.captions_on):
            if any_label(pattern, probe.buttons):
                await self._click(browser, tab, platform, pattern)
                if pattern == platform.captions_on[-1]:
                    call.captions_at = now
                return
        if platform.shortcut and not call.shortcut_tried:
            call.shortcut_tried = True
            await press_keys(browser, tab, platform.shortcut)
            return
        call.captions_at, call.shortcut_tried = now, False

    async def _announce(self, browser: Browser, tab: Tab, call: _Call) -> bool:
        """Post the note-taker's greeting in the meeting chat (opening it first)."""
        platform = call.platform
        if not await self._eval(browser, tab, platform, "focus", platform.chat_field):
            await self._click(browser, tab, platform, platform.chat_button)
            if not await self._eval(browser, tab, platform, "focus", platform.chat_field):
                return False
        text = call.meeting.name + ANNOUNCEMENT
        await browser.conn.send("Input.insertText", {"text": text}, tab.session)
        await press_keys(browser, tab, "Enter")
        return True

    async def _leave(self, browser: Browser, tab: Tab, call: _Call) -> None:
        """Press Leave, confirm when asked, and see the page leave the call (a few steps
        at most: the record says it left either way)."""
        self._flush(call)
        platform = call.platform
        with contextlib.suppress(CdpError, BrowserGone, TimeoutError):
            if not await self._click(browser, tab, platform, platform.leave_button):
                return
            for _ in range(5):
                await asyncio.sleep(self.settings.join_step)
                probe = Probe.from_page(await self._eval(browser, tab, platform, "probe"))
                if classify(platform, probe) != IN_CALL:
                    return
                await self._click(browser, tab, platform, platform.leave_confirm)

    def _finish(self, call: _Call, state: str, reason: str) -> Meeting:
        self._flush(call)
        call.meeting = self.store.update(
            call.meeting, state=state, reason=reason, ended_at=self.clock()
        )
        return call.meeting

    async def _eval(
        self, browser: Browser, tab: Tab, platform: Platform, op: str, arg: str = ""
    ) -> Any:
        result = await browser.conn.send(
            "Runtime.evaluate",
            {"expression": page_script.call(platform, op, arg), "returnByValue": True},
            tab.session,
            timeout=30,
        )
        if "exceptionDetails" in result:
            return None  # a page mid-navigation: the next step probes again
        return result.get("result", {}).get("value")

    async def _click(self, browser: Browser, tab: Tab, platform: Platform, pattern: str) -> bool:
        """A real mouse click in the middle of the control `pattern` names; False when
        none shows."""
        found = await self._eval(browser, tab, platform, "find", pattern)
        if not isinstance(found, dict):
            return False
        x, y = float(found.get("x", 0)), float(found.get("y", 0))
        conn = browser.conn
        await conn.send(
            "Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, tab.session
        )
        for kind in ("mousePressed", "mouseReleased"):
            await conn.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
                tab.session,
            )
        return True
