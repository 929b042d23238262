"""The Discord Gateway websocket, spoken with aiohttp directly.

Not discord.py: it hides the session id, the sequence number and resuming inside its
client, and those are exactly what exactly-once needs in our hands (saved in control.db
after each event is handed to the gateway, so a resume after a restart replays what was
missed); it is also a big dependency for one websocket and a few REST calls.

One connection (`GatewayClient.run` loops over them):

1. Hello (op 10) gives `heartbeat_interval`: a heartbeat (op 1, carrying the last
   sequence number) goes out after a random part of it (jitter), then every interval.
   Each must be acknowledged (op 11) before the next is due; one that is not means a
   zombie connection: it is closed and resumed.
2. Identify (op 2, with our intents) for a new session, whose READY gives `session_id`
   and `resume_gateway_url`; or Resume (op 6, the session and the last sequence number)
   on `resume_gateway_url`, after which Discord replays every event we missed, then
   RESUMED.
3. Dispatches (op 0) are handed on, each channel's in order (lanes.py); the
   state (session, sequence, resume URL) is saved once every event up to it was handled,
   never before.
4. Reconnect (op 7) and any resumable close: close and resume at once. Invalid Session
   (op 9): d=true resume, d=false a fresh Identify after 1-5 s. The close codes Discord
   documents as not reconnectable (4004 authentication failed, 4010-4014 shard, version
   and intents) are a FatalAdapterError; 4007 and 4009 mean the session is gone (a fresh
   Identify).

A frame reader runs apart from the dispatch handling, so acknowledgements keep being read
while a slow event is handled (a slow database never looks like a zombie connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from .adapter import Beat, FatalAdapterError, SendError
from .lanes import Lanes
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

# Gateway intents: GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT (privileged).
INTENTS = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15)
API_VERSION = 10
FATAL_CLOSE_CODES = {
    4004: "authentication failed (check the bot token)",
    4010: "invalid shard",
    4011: "sharding required",
    4012: "invalid API version",
    4013: "invalid intents",
    4014: (
        "disallowed intents (turn on the Message Content intent: Developer Portal > "
        "your application > Bot > Privileged Gateway Intents)"
    ),
}
# The session is gone after these: reconnect with a fresh Identify.
SESSION_GONE_CLOSE_CODES = {4007, 4009}
# Closing with 1000 or 1001 ends the session; any other code keeps it resumable.
RESUMABLE_CLOSE = 4000
# Connections in a row that end before READY or RESUMED; then `run` gives up (SendError)
# and the supervisor's backoff takes over, so a server that refuses us is not hammered.
MAX_UNREADY = 3
# In a burst of events, the position is saved at least this often (and at its end).
SAVE_EVERY = 50


@dataclass
class GatewayState:
    """What a resume needs, kept in the channel store as JSON."""

    session_id: str = ""
    seq: int | None = None
    resume_url: str = ""

    @property
    def resumable(self) -> bool:
        return bool(self.session_id and self.resume_url and self.seq is not None)

    def dumps(self) -> str:
        return json.dumps(
            {"session_id": self.session_id, "seq": self.seq, "resume_url": self.resume_url}
        )

    @classmethod
    def loads(cls, text: str | None) -> GatewayState:
        """The saved state; an empty one for nothing saved or something unreadable."""
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        seq = data.get("seq")
        return cls(
            str(data.get("session_id") or ""),
            seq if isinstance(seq, int) else None,
            str(data.get("resume_url") or ""),
        )

    def forget(self) -> None:
        """The session cannot be resumed: the next connection identifies afresh."""
        self.session_id, self.seq, self.resume_url = "", None, ""


@dataclass(frozen=True)
class Dispatch:
    """One event (op 0): its name, sequence number and data."""

    type: str
    seq: int
    data: dict[str, Any]


@dataclass(frozen=True)
class _Control:
    """Something the reader saw that ends the connection: op 7, op 9 or the socket's end."""

    op: int  # 7 Reconnect, 9 Invalid Session, 0 the socket closed (or a zombie)
    resumable: bool = True
    close_code: int | None = None


# What the handler loop is told when an event finished handling (the position may move).
_PROGRESS = _Control(-1)


def _lane(event: Dispatch) -> str:
    """Events of one channel (a DM, a server channel, a thread) are handled in order."""
    return str(event.data.get("channel_id") or "")


DispatchHandler = Callable[[Dispatch], Awaitable[None]]
SaveState = Callable[[GatewayState], Awaitable[None]]
WsSession = Callable[[], aiohttp.ClientSession]


class GatewayClient:
    """The bot's gateway connection, reconnected and resumed until it cannot be."""

    def __init__(
        self,
        token: str,
        session: WsSession,
        state: GatewayState,
        save: SaveState,
        *,
        intents: int = INTENTS,
        invalid_session_delay: tuple[float, float] = (1.0, 5.0),
    ):
        self._token = token
        self._session = session
        self.state = state
        self._save = save
        self.intents = intents
        self.invalid_session_delay = invalid_session_delay
        self.connections = 0  # websocket connections made (the benchmark reads it)

    async def run(self, gateway_url: str, on_dispatch: DispatchHandler, beat: Beat) -> None:
        """Connect and stay connected, resuming after drops; raises FatalAdapterError for a
        fatal close code and SendError when connections keep failing."""
        unready = 0
        while True:
            ready = await self._connection(gateway_url, on_dispatch, beat)
            unready = 0 if ready else unready + 1
            if unready >= MAX_UNREADY:
                raise SendError(f"the Discord gateway closed {unready} connections in a row")

    async def _connection(self, gateway_url: str, on_dispatch: DispatchHandler, beat: Beat) -> bool:
        """One websocket connection; True when it reached READY or RESUMED."""
        resuming = self.state.resumable
        base = self.state.resume_url if resuming else gateway_url
        url = URL(base).with_query(v=str(API_VERSION), encoding="json")
        try:
            ws = await self._session().ws_connect(
                url,
                max_msg_size=0,  # READY and GUILD_CREATE can be large
                autoping=True,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=2.0),
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(
                f"cannot open the Discord gateway: {type(exc).__name__}: {exc}"
            ) from None
        self.connections += 1
        connection = _Connection(ws, self, on_dispatch, beat)
        try:
            control = await connection.run(resuming)
        finally:
            await connection.close()
        await self._after(control)
        return connection.ready

    async def _after(self, control: _Control) -> None:
        """Decide how the next connection starts: resume, fresh Identify, or not at all."""
        code = control.close_code
        if control.op == 0 and code in FATAL_CLOSE_CODES:
            raise FatalAdapterError(f"Discord closed the gateway: {code} {FATAL_CLOSE_CODES[code]}")
        if (control.op == 9 and not control.resumable) or code in SESSION_GONE_CLOSE_CODES:
            self.state.forget()
            await self._save(self.state)
            if control.op == 9:
                # Discord asks for a pause of 1-5 s before identifying again.
                await asyncio.sleep(random.uniform(*self.invalid_session_delay))
        log.info("discord gateway: reconnecting (op %s, close code %s)", control.op, code)

    # -- what a connection sends -----------------------------------------------------

    def identify(self) -> dict[str, Any]:
        return {
            "op": 2,
            "d": {
                "token": self._token,
                "intents": self.intents,
                "properties": {"os": "linux", "browser": "habakkuk", "device": "habakkuk"},
            },
        }

    def resume(self) -> dict[str, Any]:
        return {
            "op": 6,
            "d": {"token": self._token, "session_id": self.state.session_id, "seq": self.state.seq},
        }


class _Connection:
    """One websocket: a frame reader, a heartbeat and the dispatch handling in order."""

    def __init__(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        client: GatewayClient,
        on_dispatch: DispatchHandler,
        beat: Beat,
    ):
        self.ws = ws
        self.client = client
        self.on_dispatch = on_dispatch
        self.beat = beat
        self.ready = False
        self._inbox: asyncio.Queue[Dispatch | _Control] = asyncio.Queue()
        self._acked = True
        self._send_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._lanes: Lanes[Dispatch] | None = None
        self.received = client.state.seq

    async def send(self, payload: dict[str, Any]) -> None:
        async with self._send_lock:
            await self.ws.send_str(json.dumps(payload))

    async def heartbeat_now(self) -> None:
        # the last sequence number received (handled or not), as Discord asks
        await self.send({"op": 1, "d": self.received})

    async def run(self, resuming: bool) -> _Control:
        hello = await self._hello()
        if hello is None:
            return _Control(0, close_code=self.ws.close_code)
        self.beat()
        self._tasks = [
            asyncio.create_task(self._read(), name="discord:read"),
            asyncio.create_task(self._heartbeat(hello), name="discord:heartbeat"),
        ]
        await self.send(self.client.resume() if resuming else self.client.identify())
        state = self.client.state
        saved = state.seq
        lanes: Lanes[Dispatch] = Lanes(
            self.on_dispatch, lambda: self._inbox.put_nowait(_PROGRESS), name="discord"
        )
        self._lanes = lanes
        while True:
            item = await self._inbox.get()
            if isinstance(item, _Control):
                if item is not _PROGRESS:
                    through = await lanes.drain()
                    state.seq = through if through is not None else state.seq
                    if state.seq != saved:
                        await self.client._save(state)
                    return item
            else:
                if item.type == "READY":
                    state.session_id = str(item.data.get("session_id") or "")
                    state.resume_url = str(item.data.get("resume_gateway_url") or "")
                    self.ready = True
                elif item.type == "RESUMED":
                    self.ready = True
                lane = _lane(item)
                if not lane:  # READY, RESUMED, a guild's events: after all before them
                    await lanes.drain()
                await lanes.submit(lane, item.seq, item)
                self.beat()
            through = lanes.through()
            if through is None:
                continue
            state.seq = through
            # Saved only once the events up to it were handled: a crash before this
            # replays them, and the gateway drops what it has already seen. In a burst,
            # once per SAVE_EVERY events and at its end (a crash replays at most that many).
            if lanes.idle or through - (saved or 0) >= SAVE_EVERY:
                await self.client._save(state)
                saved = state.seq

    async def _hello(self) -> float | None:
        """The heartbeat interval in seconds from op 10, or None when the socket closed."""
        message = await self.ws.receive()
        if message.type != aiohttp.WSMsgType.TEXT:
            return None
        payload = json.loads(message.data)
        if payload.get("op") != 10:
            raise SendError(f"the Discord gateway did not say hello (op {payload.get('op')})")
        return float(payload["d"]["heartbeat_interval"]) / 1000

    async def _read(self) -> None:
        """Read frames until the socket ends; dispatches and endings go to the handler."""
        control = _Control(0)
        try:
            async for message in self.ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    continue  # we never ask for compressed (binary) payloads
                payload = json.loads(message.data)
                op = payload.get("op")
                if op == 0:
                    self.received = int(payload["s"])
                    data = payload.get("d")
                    self._inbox.put_nowait(
                        Dispatch(
                            str(payload.get("t")),
                            int(payload["s"]),
                            data if isinstance(data, dict) else {},
                        )
                    )
                elif op == 11:
                    self._acked = True
                    self.beat()
                elif op == 1:
                    await self.heartbeat_now()  # Discord asked for one now
                elif op == 7:
                    control = _Control(7)
                    break
                elif op == 9:
                    control = _Control(9, resumable=bool(payload.get("d")))
                    break
        except (aiohttp.ClientError, ValueError, KeyError, TypeError) as exc:
            log.info("discord gateway: reading failed: %s", exc)
        if control.op == 0:
            control = _Control(0, close_code=self.ws.close_code)
        self._inbox.put_nowait(control)

    async def _heartbeat(self, interval: float) -> None:
        """Heartbeats: the first after jitter, then every interval; a missing ACK ends it."""
        await asyncio.sleep(interval * random.random())
        while True:
            if not self._acked:
                log.info("discord gateway: no heartbeat ACK; a zombie connection, resuming")
                self._inbox.put_nowait(_Control(0))
                return
            self._acked = False
            try:
                await self.heartbeat_now()
            except (aiohttp.ClientError, ConnectionError) as exc:
                log.info("discord gateway: heartbeat failed: %s", exc)
                return  # the reader sees the socket end
            await asyncio.sleep(interval)

    async def close(self) -> None:
        """Stop the reader and heartbeat and close the socket, keeping the session
        resumable (never 1000: that would end it, and a restart could not resume)."""
        for task in self._tasks:
            task.cancel()
        try:
            if self._lanes is not None:
                await self._lanes.cancel()
            for task in self._tasks:
                await cancel_and_wait(task)
        finally:
            with contextlib.suppress(Exception):
                await self.ws.close(code=RESUMABLE_CLOSE)
