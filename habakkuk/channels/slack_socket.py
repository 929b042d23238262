"""One Socket Mode connection: read frames, hand envelopes over in order, acknowledge them.

Slack sends `hello` when the socket is ready, then envelopes; each is acknowledged by
sending back `{"envelope_id": ...}`. We acknowledge an envelope once its message has been
handed to the gateway (which awaits the durable enqueue), in the order they came: a crash
before that leaves it unacknowledged, and Slack sends it again on the next connection,
where the gateway drops it if it was handled after all. The hand-off takes milliseconds;
one slower than Slack's 3 s (a large attachment downloaded first) makes Slack resend the
envelope, which queues behind the first and is dropped as seen.

Envelopes are handled by a worker task so the reader keeps answering pings meanwhile. A
`disconnect` frame (Slack rotates connections: `warning`, `refresh_requested`) ends the
session after the envelopes already read are handled; the adapter opens a new one.

Keepalive: we ping every `ping_every` seconds and answer Slack's pings; any frame,
ping or pong is a beat. A socket silent for three ping periods is closed as dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable

import aiohttp

from habakkuk.engine.timeouts import wait_within

from .adapter import Beat, FatalAdapterError, SendError
from .slack_events import Frame, Payload, parse_frame
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

Handle = Callable[[Payload], Awaitable[None]]
# Disconnect reasons after which Slack will not take a new connection of this app.
FATAL_REASONS = {
    "link_disabled": "Socket Mode is turned off for this app (Settings > Socket Mode)",
}
DRAIN_SECONDS = 8.0  # Slack closes a socket about 10 s after its `warning`


class ConnectionLost(SendError):
    """The socket closed without a `disconnect` frame (dropped, or silent too long)."""


class SocketSession:
    """Reads one websocket until it ends; `run` returns the disconnect reason."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        handle: Handle,
        beat: Beat,
        *,
        ping_every: float,
    ):
        self.ws = ws
        self.handle = handle
        self.beat = beat
        self.ping_every = ping_every
        self.hello = False
        self._queue: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._send_lock = asyncio.Lock()
        self._heard = 0.0

    async def run(self) -> str:
        """Serve the socket; the `disconnect` reason, or ConnectionLost / FatalAdapterError."""
        loop = asyncio.get_running_loop()
        self._heard = loop.time()
        worker = asyncio.create_task(self._work(), name="slack:envelopes")
        pinger = asyncio.create_task(self._ping(), name="slack:ping")
        try:
            reason = await self._read(worker)
            self._queue.put_nowait(None)  # handle what was read, then stop
            with contextlib.suppress(TimeoutError):
                await wait_within(asyncio.shield(worker), DRAIN_SECONDS)
            failure = worker.exception() if worker.done() else None
            if failure is not None:
                raise failure
            return reason
        finally:
            await cancel_and_wait(pinger)
            await cancel_and_wait(worker)
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def _read(self, worker: asyncio.Task[None]) -> str:
        loop = asyncio.get_running_loop()
        while True:
            receiving = asyncio.ensure_future(self.ws.receive())
            done, _ = await asyncio.wait({receiving, worker}, return_when=asyncio.FIRST_COMPLETED)
            if receiving not in done:  # the worker failed (the gateway's database)
                receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
                failure = worker.exception()
                raise failure if failure is not None else ConnectionLost("handler stopped")
            message = receiving.result()
            self._heard = loop.time()
            if message.type == aiohttp.WSMsgType.TEXT:
                self.beat()
                frame = parse_frame(str(message.data))
                if frame is None:
                    log.info("slack: ignoring a frame that is not a JSON object with a type")
                    continue
                if frame.type == "hello":
                    self.hello = True
                elif frame.type == "disconnect":
                    if frame.reason in FATAL_REASONS:
                        raise FatalAdapterError(FATAL_REASONS[frame.reason])
                    return frame.reason or "disconnect"
                elif frame.envelope_id:
                    self._queue.put_nowait(frame)
            elif message.type == aiohttp.WSMsgType.PING:
                self.beat()
                await self.ws.pong(message.data)
            elif message.type == aiohttp.WSMsgType.PONG:
                self.beat()
            elif message.type in (
                aiohttp.WSMsgType.CLOSE,
                aiohttp.WSMsgType.CLOSING,
                aiohttp.WSMsgType.CLOSED,
                aiohttp.WSMsgType.ERROR,
            ):
                code = self.ws.close_code
                raise ConnectionLost(f"the Socket Mode connection closed (code {code})")

    async def _work(self) -> None:
        while True:
            frame = await self._queue.get()
            if frame is None:
                return
            if frame.payload is not None:
                await self.handle(frame.payload)
                self.beat()
            await self._ack(frame.envelope_id)

    async def _ack(self, envelope_id: str) -> None:
        async with self._send_lock:
            try:
                await self.ws.send_str(json.dumps({"envelope_id": envelope_id}))
            except (ConnectionError, RuntimeError, aiohttp.ClientError) as exc:
                # Unacknowledged: Slack sends it again on the next connection.
                raise ConnectionLost(f"could not acknowledge an envelope: {exc}") from None

    async def _ping(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.ping_every)
            if loop.time() - self._heard > 3 * self.ping_every:
                log.info("slack: no frame for %.0fs; closing the socket", 3 * self.ping_every)
                with contextlib.suppress(Exception):
                    await self.ws.close()
                return
            with contextlib.suppress(ConnectionError, RuntimeError, aiohttp.ClientError):
                await self.ws.ping(b"habakkuk")
