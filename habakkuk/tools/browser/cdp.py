"""A small Chrome DevTools Protocol client: one connection, every target in flattened
sessions (spec 000 "Browser").

Two transports carry the same JSON messages: the pipe Chrome opens with
--remote-debugging-pipe (it reads commands on fd 3 and writes replies and events on fd
4, each message ended by a NUL byte) and a WebSocket (mode connect). A closed transport
fails every pending command with BrowserGone, which is how a crashed browser shows up.

No PyPI binding: the protocol we use is a few dozen methods, a typed binding pins one
Chrome version's schema, and the pipe framing is ten lines; the client stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

Handler = Callable[["CdpEvent"], Awaitable[None] | None]


class BrowserGone(ConnectionError):
    """The browser's connection closed (it exited, crashed, or we closed it)."""


class CdpError(Exception):
    """Chrome answered a command with an error."""

    def __init__(self, method: str, message: str, code: int = 0) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.message = message
        self.code = code


@dataclass(frozen=True)
class CdpEvent:
    """One event: its method, parameters and the session it came on ("" for the browser)."""

    method: str
    params: dict[str, Any]
    session: str


class Transport(ABC):
    """Where messages go and come from."""

    @abstractmethod
    async def send(self, text: str) -> None:
        """Send one message."""

    @abstractmethod
    async def receive(self) -> str | None:
        """The next message, or None once the connection closed."""

    @abstractmethod
    async def close(self) -> None:
        """Close the connection."""


class PipeTransport(Transport):
    """Chrome's --remote-debugging-pipe: NUL-terminated JSON on two pipe fds."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self._write_fd = write_fd
        self._read_fd = read_fd
        self._buffer = bytearray()
        self._reader: asyncio.StreamReader | None = None
        self._pipe: asyncio.BaseTransport | None = None
        self._closed = False

    async def _open(self) -> asyncio.StreamReader:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=1 << 30)
            protocol = asyncio.StreamReaderProtocol(reader)
            pipe = os.fdopen(self._read_fd, "rb", 0)
            try:
                self._pipe, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
            except BaseException:
                pipe.close()
                raise
            self._reader = reader
        return self._reader

    async def send(self, text: str) -> None:
        if self._closed:
            raise BrowserGone("the browser pipe is closed")
        data = text.encode("utf-8") + b"\0"
        try:
            # Commands are small; a blocking write of a few KB to a pipe Chrome drains.
            view = memoryview(data)
            while view:
                written = os.write(self._write_fd, view)
                view = view[written:]
        except OSError as exc:
            raise BrowserGone(f"the browser pipe is closed ({exc.strerror})") from None

    async def receive(self) -> str | None:
        reader = await self._open()
        try:
            data = await reader.readuntil(b"\0")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        return data[:-1].decode("utf-8", errors="replace")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            os.close(self._write_fd)  # Chrome reads EOF and exits
        if self._pipe is not None:
            self._pipe.close()  # closes the file it reads
        elif self._reader is None:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)


class WebSocketTransport(Transport):
    """A browser's DevTools WebSocket (mode connect)."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse):
        self._session = session
        self._ws = ws

    @classmethod
    async def open(cls, url: str) -> WebSocketTransport:
        """Dial `url`: a ws:// address, or an http:// one read through /json/version."""
        import aiohttp

        session = aiohttp.ClientSession(trust_env=False)
        try:
            if url.startswith(("http://", "https://")):
                async with session.get(url.rstrip("/") + "/json/version") as response:
                    info = await response.json(content_type=None)
                url = str(info["webSocketDebuggerUrl"])
            ws = await session.ws_connect(url, max_msg_size=0, heartbeat=None)
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    async def send(self, text: str) -> None:
        if self._ws.closed:
            raise BrowserGone("the browser's WebSocket is closed")
        try:
            await self._ws.send_str(text)
        except ConnectionError as exc:
            raise BrowserGone(f"the browser's WebSocket closed: {exc}") from None

    async def receive(self) -> str | None:
        import aiohttp

        message = await self._ws.receive()
        if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            data = message.data
            return data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
        return None

    async def close(self) -> None:
        await self._ws.close()
        await self._session.close()


class CdpConnection:
    """Commands with replies, and events to handlers, over one transport."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._handlers: list[Handler] = []
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start reading (once the handlers that must see the first events are on)."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read(), name="cdp-reader")

    def on_event(self, handler: Handler) -> None:
        """Call `handler` with every event (a coroutine handler runs as its own task)."""
        self._handlers.append(handler)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str = "",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send a command and return its result; CdpError when Chrome refused it,
        BrowserGone when the connection closed first, TimeoutError past `timeout`."""
        if self.closed.is_set():
            raise BrowserGone("the browser is gone")
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = (method, future)
        try:
            await self._transport.send(json.dumps(message))
            if timeout is None:
                return await future
            return await wait_within(future, timeout)
        finally:
            self._pending.pop(ident, None)

    def fire(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> None:
        """Send a command whose result no one waits for (its error is only logged)."""

        async def run() -> None:
            try:
                await self.send(method, params, session)
            except (CdpError, BrowserGone) as exc:
                log.debug("cdp %s: %s", method, exc)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self) -> None:
        try:
            while True:
                text = await self._transport.receive()
                if text is None:
                    break
                try:
                    message = json.loads(text)
                except ValueError:
                    continue
                self._dispatch(message)
        finally:
            self._fail_pending()

    def _dispatch(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if ident is not None:
            entry = self._pending.get(ident)
            if entry is None or entry[1].done():
                return
            method, future = entry
            if "error" in message:
                error = message["error"]
                future.set_exception(
                    CdpError(method, str(error.get("message", error)), int(error.get("code", 0)))
                )
            else:
                future.set_result(message.get("result", {}))
            return
        event = CdpEvent(
            str(message.get("method", "")),
            message.get("params", {}),
            str(message.get("sessionId", "")),
        )
        for handler in list(self._handlers):
            try:
                outcome = handler(event)
            except Exception:
                log.exception("cdp event handler failed on %s", event.method)
                continue
            if outcome is not None:
                task = asyncio.ensure_future(outcome)
                self._tasks.add(task)
                task.add_done_callback(_log_failure)
                task.add_done_callback(self._tasks.discard)

    def _fail_pending(self) -> None:
        self.closed.set()
        for method, future in self._pending.values():
            if not future.done():
                future.set_exception(BrowserGone(f"the browser closed during {method}"))

    async def close(self) -> None:
        """Close the transport and stop reading."""
        await self._transport.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        self._fail_pending()
        for task in list(self._tasks):
            task.cancel()


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        if not isinstance(exc, (BrowserGone, CdpError)):
            log.error("cdp event handler failed", exc_info=exc)
