"""The pinning proxy: every connection a launched browser opens, to the address the guard
checked (closing the DNS rebinding gap the spec lists as known).

A browser we launch is told to use this proxy for everything, loopback included
(--proxy-server, --proxy-bypass-list=<-loopback>), so it never resolves a name itself:
the proxy asks the guard (guard.py) for the host's checked addresses and connects to one
of them, so what the browser reaches is what the guard checked, whatever DNS answers
later. It also covers what Fetch interception cannot see (WebSocket handshakes, service
workers). HTTPS goes through CONNECT tunnels (the proxy never sees inside them); plain
HTTP requests are forwarded one per connection (Connection: close).

It listens on 127.0.0.1 on a free port; another local user could use it only to reach
what the guard lets this browser reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from habakkuk.engine.timeouts import wait_within

from .guard import Refused, UrlGuard

log = logging.getLogger(__name__)

Connect = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
_HEAD_LIMIT = 64 * 1024
_DROPPED = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive"})


async def open_tcp(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to `address` (an IP literal: no lookup happens here)."""
    return await wait_within(asyncio.open_connection(address, port), 30)


class PinningProxy:
    """An HTTP proxy on 127.0.0.1 that connects only where `guard` says, pinned."""

    def __init__(self, guard: UrlGuard, connect: Connect = open_tcp) -> None:
        self.guard = guard
        self._connect = connect
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Every accepted connection's writer until its handler is done with it: a handler
        # cancelled before it first ran never reaches its `finally`, so close() closes them.
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.refused = 0  # connections refused (for tests and the per-call count)

    async def start(self) -> int:
        """Listen on a free loopback port; return it."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        """Stop listening and cut every open tunnel."""
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._writers.clear()

    def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            await self._forward(head, reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, TimeoutError) as e:
            log.debug("browser proxy: %s", e)
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _forward(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            return await _answer(writer, 400, "Bad Request")
        if method.upper() == "CONNECT":
            host, _, port_text = target.rpartition(":")
            url = f"https://{target}/"
            path = ""
        else:
            parts = urlsplit(target)
            if parts.scheme.lower() != "http" or not parts.hostname:
                return await _answer(writer, 400, "Bad Request")
            host, port_text = parts.hostname, str(parts.port or 80)
            url = target
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
        host = host.strip("[]")
        try:
            port = int(port_text)
            addresses = await self.guard.addresses(host, url)
        except (Refused, ValueError) as exc:
            self.refused += 1
            log.info("browser proxy refused %s: %s", url, exc)
            return await _answer(writer, 403, "Forbidden")
        if not addresses:
            return await _answer(writer, 502, "Bad Gateway")
        upstream = await self._dial(addresses, port)
        if upstream is None:
            return await _answer(writer, 502, "Bad Gateway")
        up_reader, up_writer = upstream
        try:
            if not path:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await writer.drain()
            else:
                kept = [
                    line
                    for line in lines[1:]
                    if line and line.split(":", 1)[0].strip().lower() not in _DROPPED
                ]
                request = [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
                up_writer.write("\r\n".join(request).encode("latin-1"))
                await up_writer.drain()
            await _splice(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    async def _dial(
        self, addresses: list[str], port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:
            try:
                return await self._connect(address, port)
            except (OSError, TimeoutError):
                continue
        return None


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
    )
    await writer.drain()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if sink.can_write_eof():
                sink.write_eof()


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until the upstream side ends (then the client's side is cut)."""
    outbound = asyncio.create_task(_pipe(reader, up_writer))
    try:
        await _pipe(up_reader, writer)
    finally:
        outbound.cancel()
        await asyncio.gather(outbound, return_exceptions=True)
