"""One Socket Mode connection: read frames, hand envelopes over in order, acknowledge them.

Slack sends `hello` when the socket is ready, then envelopes; each is acknowledged by
sending back `{"envelope_id": ...}`. We acknowledge an envelope once its message has been
handed to the gateway (which awaits the durable enqueue), in the order they came: a crash
before that leaves it unacknowledged, and Slack sends it again on the next connection,
where the gateway drops it if it was handled after all. The hand-off takes milliseconds;
one slower than Slack's 3 s (a large attachment downloaded first) makes Slack resend the
envelope, which queues behind the first in its chat's lane and is dropped as seen.

Envelopes are handed over by one worker task per chat (a lane; at most LANES at once),
so a chat's messages keep their order, a slow chat does not hold up the others, and the
reader keeps answering pings meanwhile. A `disconnect` frame (Slack rotates connections:
`warning`, `refresh_requested`) ends the session after the envelopes already read are
handled; the adapter opens a new one.

Keepalive: we ping every `ping_every` seconds and answer Slack's pings; any frame,
ping or pong is a beat. A socket silent for three ping periods is closed as dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from habakkuk.engine.timeouts import wait_within

from .adapter import Beat, FatalAdapterError, SendError
from .slack_events import Frame, Payload, SlackAction, SlackCommand, SlackMessage, parse_frame
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

Handle = Callable[[Payload], Awaitable[None]]
# Disconnect reasons after which Slack will not take a new connection of this app.
FATAL_REASONS = {
    "link_disabled": "Socket Mode is turned off for this app (Settings > Socket Mode)",
}
DRAIN_SECONDS = 8.0  # Slack closes a socket about 10 s after its `warning`
# Chats handled side by side: one slow hand-off (a large attachment downloaded first)
# must not hold up every other chat of every workspace on the one connection.
LANES = 8


def lane_of(payload: Payload | None) -> str:
    """The chat an envelope belongs to: its envelopes are handed over in order."""
    if isinstance(payload, SlackMessage | SlackAction):
        return f"{payload.team}-{payload.channel}"
    if isinstance(payload, SlackCommand):
        return f"{payload.team}-{payload.channel}"
    return ""


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
        self._lanes: dict[str, asyncio.Queue[Frame]] = {}
        self._workers: set[asyncio.Task[None]] = set()
        self._handling = asyncio.Semaphore(LANES)
        self._failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._send_lock = asyncio.Lock()
        self._heard = 0.0

    async def run(self) -> str:
        """Serve the socket; the `disconnect` reason, or ConnectionLost / FatalAdapterError."""
        loop = asyncio.get_running_loop()
        self._heard = loop.time()
        pinger = asyncio.create_task(self._ping(), name="slack:ping")
        try:
            reason = await self._read()
            # Hand over what was read before the socket goes (bounded: Slack closes it).
            with contextlib.suppress(TimeoutError):
                await wait_within(self._drained(), DRAIN_SECONDS)
            return reason
        finally:
            await cancel_and_wait(pinger)
            for worker in list(self._workers):
                await cancel_and_wait(worker)
            if self._failed.done():
                self._failed.exception()  # raised above, or superseded by another error
            with contextlib.suppress(Exception):
                await self.ws.close()

    async def _drained(self) -> None:
        while self._workers:
            waiting: set[asyncio.Future[None]] = {*self._workers, self._failed}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if self._failed.done():
                self._failed.result()

    async def _read(self) -> str:
        loop = asyncio.get_running_loop()
        while True:
            receiving = asyncio.ensure_future(self.ws.receive())
            either: set[asyncio.Future[Any]] = {receiving, self._failed}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if self._failed.done():  # a hand-off failed (the gateway's database)
                receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
                self._failed.result()
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
                elif frame.envelope_id and frame.payload is None:
                    await self._ack(frame.envelope_id)  # nothing we answer
                elif frame.envelope_id:
                    self._enqueue(frame)
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

    def _enqueue(self, frame: Frame) -> None:
        """Queue the envelope in its chat's lane (started when the chat has none)."""
        key = lane_of(frame.payload)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = asyncio.Queue()
            worker = asyncio.create_task(self._work(key, lane), name=f"slack:lane:{key}")
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        lane.put_nowait(frame)

    async def _work(self, key: str, lane: asyncio.Queue[Frame]) -> None:
        """One chat's envelopes in order; the lane ends when it runs empty."""
        try:
            while not lane.empty():
                frame = lane.get_nowait()
                assert frame.payload is not None
                async with self._handling:
                    await self.handle(frame.payload)
                self.beat()
                await self._ack(frame.envelope_id)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if not self._failed.done():
                self._failed.set_exception(exc)
        finally:
            if self._lanes.get(key) is lane:
                del self._lanes[key]

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
