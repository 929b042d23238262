"""One browser driven over CDP: its tabs, the guard on every request, dialogs, downloads.

Pages attach at the browser level and start paused (Target.setAutoAttach with
waitForDebuggerOnStart); a page we drive (every page of a browser we launched; in mode
connect, the tabs we open and popups they open) gets Fetch interception and the same
auto-attach for its frames and workers before it runs, so its first request is checked
too. Any other new page is resumed at once. Each paused request goes through the
UrlGuard: refused documents become [blocked: ...] notes and refused subresources a
count, both reported by the next tool result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from habakkuk.engine.timeouts import wait_within

from .cdp import BrowserGone, CdpConnection, CdpError, CdpEvent
from .guard import UrlGuard
from .snapshot import RefTable

log = logging.getLogger(__name__)

_CHILD_TYPES = frozenset({"iframe", "worker", "shared_worker", "service_worker"})


@dataclass
class Tab:
    """A page we drive."""

    target: str
    session: str
    url: str = "about:blank"
    title: str = ""
    opened_by_us: bool = True
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    navigating: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Download:
    """A download Chrome announced: its guid, suggested name and final state."""

    guid: str
    url: str
    name: str
    done: asyncio.Future[str]


@dataclass
class CallNotes:
    """What happened during a call that its result reports."""

    blocked_documents: list[str] = field(default_factory=list)
    blocked_requests: int = 0
    dialogs: list[str] = field(default_factory=list)
    popups: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The notes as lines for a tool result ("" when there are none)."""
        lines = [f"[blocked: {why}]" for why in self.blocked_documents]
        if self.blocked_requests:
            lines.append(f"[blocked {self.blocked_requests} other request(s) of the page]")
        lines += [f"[dialog: {d}]" for d in self.dialogs]
        lines += [f"[a popup opened and is now the current tab: {u}]" for u in self.popups]
        return "\n".join(lines)


class Browser:
    """A connected browser (launched by us, or someone else's in mode connect)."""

    def __init__(
        self,
        connection: CdpConnection,
        guard: UrlGuard,
        *,
        launched: bool,
        refs: RefTable | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.conn = connection
        self.guard = guard
        self.launched = launched
        self.refs = refs or RefTable()
        self.tabs: dict[str, Tab] = {}  # by target id, in opening order
        self.current: str | None = None
        self.notes = CallNotes()
        self.accept_dialogs = False
        self.downloads: dict[str, Download] = {}
        self.download_started: asyncio.Queue[Download] = asyncio.Queue()
        self._sessions: dict[str, str] = {}  # session id -> target id (driven ones)
        self._tab_ready: dict[str, asyncio.Future[Tab]] = {}
        self._creating = 0
        self._on_close = on_close
        self.pid: int | None = None  # a launched browser's process (its group's leader)

    @property
    def alive(self) -> bool:
        """Whether the connection is still open."""
        return not self.conn.closed.is_set()

    async def start(self) -> None:
        """Read events and attach to pages (a launched browser's first tab is adopted)."""
        self.conn.on_event(self._on_event)
        self.conn.start()
        await self.conn.send(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
        )
        if self.launched:  # the first tab: adopted before any call looks for a tab
            targets = await self.conn.send("Target.getTargets")
            for info in targets.get("targetInfos", []):
                if info.get("type") == "page":
                    await self._wait_tab(str(info["targetId"]))
                    self.current = str(info["targetId"])

    async def close(self) -> None:
        """Mode connect: close the tabs we opened and detach. Launched: just disconnect."""
        if not self.launched and self.alive:
            for tab in list(self.tabs.values()):
                if tab.opened_by_us:
                    with contextlib.suppress(CdpError, BrowserGone, TimeoutError):
                        await self.conn.send(
                            "Target.closeTarget", {"targetId": tab.target}, timeout=5
                        )
        if self._on_close is not None:
            await self._on_close()
        else:
            await self.conn.close()

    # -- tabs -----------------------------------------------------------------------

    async def new_tab(self, url: str = "about:blank", *, background: bool = False) -> Tab:
        """Open a tab of ours (paused until the guard is on it) and return it ready."""
        self._creating += 1
        try:
            result = await self.conn.send(
                "Target.createTarget", {"url": "about:blank", "background": background}
            )
        finally:
            self._creating -= 1
        target = str(result["targetId"])
        tab = await self._wait_tab(target)
        if not background:
            self.current = target
        if url != "about:blank":
            await self.conn.send("Page.navigate", {"url": url}, tab.session)
        return tab

    async def _wait_tab(self, target: str) -> Tab:
        if target in self.tabs:
            return self.tabs[target]
        future = self._tab_ready.setdefault(target, asyncio.get_running_loop().create_future())
        return await wait_within(future, 30)

    async def current_tab(self) -> Tab:
        """The tab actions go to (one is opened when there is none)."""
        current = self.current
        if current is not None and current in self.tabs:
            return self.tabs[current]
        if self.tabs:
            self.current = next(reversed(self.tabs))
            return self.tabs[self.current]
        return await self.new_tab()

    async def other_tabs(self) -> list[tuple[str, str, str]]:
        """(target, title, url) of the pages we do not drive (mode connect: the owner's)."""
        found = await self.conn.send("Target.getTargets")
        return [
            (str(info["targetId"]), str(info.get("title", "")), str(info.get("url", "")))
            for info in found.get("targetInfos", [])
            if info.get("type") == "page" and info.get("targetId") not in self.tabs
        ]

    async def attach(self, target: str) -> Tab:
        """Drive a page someone else opened (it stays open when we close)."""
        result = await self.conn.send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}
        )
        info = {"targetId": target, "url": "", "title": ""}
        await self._drive(str(result["sessionId"]), target, info, popup=False)
        tab = self.tabs[target]
        tab.opened_by_us = False
        self.current = target
        return tab

    async def select(self, tab: Tab) -> None:
        """Make `tab` the current one and bring it to the front.

        Chromium throttles a tab in the background: a click dispatched to it waits about
        five seconds for the input's acknowledgement, so a selected tab is shown first.
        """
        self.current = tab.target
        await self.conn.send("Page.bringToFront", session=tab.session)

    async def close_tab(self, tab: Tab) -> None:
        """Close one of our tabs."""
        await self.conn.send("Target.closeTarget", {"targetId": tab.target})
        self._drop(tab.target)

    def _drop(self, target: str) -> None:
        tab = self.tabs.pop(target, None)
        if tab is not None:
            self._sessions.pop(tab.session, None)
            self.refs.forget(target)
        if self.current == target:
            self.current = next(reversed(self.tabs), None) if self.tabs else None

    def take_notes(self) -> CallNotes:
        """The notes gathered since the last call, and a fresh set."""
        notes, self.notes = self.notes, CallNotes()
        return notes

    # -- events ---------------------------------------------------------------------

    def _on_event(self, event: CdpEvent) -> Awaitable[None] | None:
        method = event.method
        if method == "Target.attachedToTarget":
            return self._attached(event)
        if method == "Fetch.requestPaused":
            return self._request(event)
        if method == "Page.javascriptDialogOpening":
            return self._dialog(event)
        target = self._sessions.get(event.session)
        tab = self.tabs.get(target) if target else None
        if method == "Target.detachedFromTarget":
            gone = self._sessions.pop(str(event.params.get("sessionId")), None)
            if gone:  # a page ("" for a frame's or a worker's session)
                self._drop(gone)
        elif method == "Target.targetDestroyed":
            self._drop(str(event.params.get("targetId")))
        elif tab is not None and method == "Page.frameNavigated":
            frame = event.params.get("frame", {})
            if not frame.get("parentId"):
                tab.url = str(frame.get("url", tab.url))
                self.refs.forget(tab.target)
                if event.params.get("type") == "BackForwardCacheRestore":
                    tab.loaded.set()  # restored whole: Chromium fires no load event for it
        elif tab is not None and method in (
            "Page.frameStartedLoading",
            "Page.frameStartedNavigating",
        ):
            if event.params.get("frameId") == tab.target:
                tab.loaded.clear()
                tab.navigating.set()
        elif tab is not None and method == "Page.loadEventFired":
            tab.loaded.set()
        elif method == "Browser.downloadWillBegin":
            self._download_began(event.params)
        elif method == "Browser.downloadProgress":
            download = self.downloads.get(str(event.params.get("guid")))
            state = event.params.get("state")
            finished = state in ("completed", "canceled")
            if download is not None and finished and not download.done.done():
                download.done.set_result(str(state))
        return None

    async def _attached(self, event: CdpEvent) -> None:
        info = event.params.get("targetInfo", {})
        session = str(event.params.get("sessionId"))
        kind = info.get("type")
        target = str(info.get("targetId"))
        parent = event.session  # "" for browser-level attachments
        driven_parent = parent in self._sessions
        try:
            if kind == "page" and not parent:
                opener = info.get("openerId")
                ours = self.launched or self._creating > 0 or opener in self.tabs
                if ours:
                    await self._drive(session, target, info, popup=opener in self.tabs)
            elif kind in _CHILD_TYPES and driven_parent:
                await self._guard_child(session, kind == "iframe")
            await self.conn.send("Runtime.runIfWaitingForDebugger", session=session)
        except (CdpError, BrowserGone) as exc:
            log.debug("attaching %s %s: %s", kind, target, exc)
            with contextlib.suppress(CdpError, BrowserGone):
                await self.conn.send("Runtime.runIfWaitingForDebugger", session=session)

    async def _guard_child(self, session: str, frame: bool) -> None:
        # A worker may not have the Fetch domain in every version: the proxy still checks
        # its connections (launched browsers), so a refusal here is not fatal.
        with contextlib.suppress(CdpError):
            await self.conn.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
        self._sessions[session] = self._sessions.get(session, "")
        if frame:
            await self.conn.send(
                "Target.setAutoAttach",
                {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
                session,
            )

    async def _drive(self, session: str, target: str, info: dict[str, Any], popup: bool) -> None:
        tab = Tab(
            target, session, str(info.get("url") or "about:blank"), str(info.get("title", ""))
        )
        tab.opened_by_us = self._creating > 0 or popup or self.launched
        self._sessions[session] = target
        await self.conn.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
        await self.conn.send("Page.enable", session=session)
        await self.conn.send(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True},
            session,
        )
        self.tabs[target] = tab
        if popup:
            self.current = target
            self.notes.popups.append(tab.url)
        waiter = self._tab_ready.pop(target, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(tab)

    async def _request(self, event: CdpEvent) -> None:
        params = event.params
        request = params.get("request", {})
        url = str(request.get("url", ""))
        document = params.get("resourceType") == "Document"
        reason = await self.guard.check(url, document=document)
        request_id = params.get("requestId")
        try:
            if reason is None:
                await self.conn.send(
                    "Fetch.continueRequest", {"requestId": request_id}, event.session
                )
                return
            if document:
                self.notes.blocked_documents.append(reason)
            else:
                self.notes.blocked_requests += 1
            await self.conn.send(
                "Fetch.failRequest",
                {"requestId": request_id, "errorReason": "BlockedByClient"},
                event.session,
            )
        except (CdpError, BrowserGone) as exc:
            log.debug("fetch %s: %s", url, exc)

    async def _dialog(self, event: CdpEvent) -> None:
        kind = str(event.params.get("type", "alert"))
        message = str(event.params.get("message", ""))[:300]
        accept = kind in ("alert", "beforeunload") or self.accept_dialogs
        verb = "accepted" if accept else "dismissed"
        self.notes.dialogs.append(f"{kind} {message!r} was {verb}")
        with contextlib.suppress(CdpError, BrowserGone):
            await self.conn.send("Page.handleJavaScriptDialog", {"accept": accept}, event.session)

    def _download_began(self, params: dict[str, Any]) -> None:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        download = Download(
            str(params.get("guid")),
            str(params.get("url", "")),
            str(params.get("suggestedFilename") or "download"),
            future,
        )
        self.downloads[download.guid] = download
        self.download_started.put_nowait(download)
