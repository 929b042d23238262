"""`habakkuk node run` on the device: pair once, then hold the websocket to /nodes.

The node's secret, from POST /nodes/pair, is kept in node.json (mode 0600, in the
device's Habakkuk home) and sent only in the hello frame of each connection; the server
keeps its hash. After the welcome the server sends invoke frames; each runs as its own
task and answers with a result frame. Both sides ping (aiohttp's heartbeat). A dropped
connection is retried with jittered backoff (1 s doubling to 1 min, reset after a
minute connected); a refusal (an error frame, a policy-violation close, a 401) ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import platform as platform_module
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.errors import HabakkukError

from .capabilities import Capabilities
from .hub import POLICY_VIOLATION
from .wire import MAX_MESSAGE_BYTES, FrameError, Invoke, parse_invoke

log = logging.getLogger(__name__)

PING_SECONDS = 20.0
FIRST_BACKOFF, MAX_BACKOFF, STEADY_SECONDS = 1.0, 60.0, 60.0


class NodeClientError(HabakkukError):
    """Pairing or connecting failed for good (the server refused, or node.json is bad)."""


@dataclass(frozen=True)
class NodeIdentity:
    """What node.json holds: the server, this node's name and its secret."""

    server: str
    name: str
    secret: str


def read_identity(path: Path) -> NodeIdentity | None:
    """node.json, or None when there is none; NodeClientError when it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return NodeIdentity(str(data["server"]), str(data["name"]), str(data["secret"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NodeClientError(f"{path}: not a node.json ({exc})") from None


def write_identity(path: Path, identity: NodeIdentity) -> None:
    """Write node.json with mode 0600 (its folder 0700), atomically."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(identity.__dict__, out)
    os.replace(temp, path)
    os.chmod(path, 0o600)


def socket_url(server: str) -> str:
    """The /nodes websocket address of a server's http(s) base URL."""
    base = server.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base.removeprefix("https://") + "/nodes"
    if base.startswith("http://"):
        return "ws://" + base.removeprefix("http://") + "/nodes"
    raise NodeClientError(f"{server}: the server must be an http:// or https:// URL")


def this_platform() -> str:
    """A short name of this device's system (linux, darwin, ...)."""
    return f"{platform_module.system().lower()}-{platform_module.machine().lower()}"


async def pair(server: str, code: str, name: str, caps: list[str]) -> NodeIdentity:
    """Redeem a pairing code at POST /nodes/pair: this node's identity."""
    import aiohttp

    socket_url(server)  # checks the scheme
    body = {"code": code, "name": name, "platform": this_platform(), "caps": caps}
    async with (
        aiohttp.ClientSession() as session,
        session.post(server.rstrip("/") + "/nodes/pair", json=body) as response,
    ):
        try:
            answer = await response.json(content_type=None)
        except ValueError:
            answer = {}
        if response.status != 200 or not isinstance(answer.get("secret"), str):
            why = answer.get("error") if isinstance(answer, dict) else None
            raise NodeClientError(f"pairing refused ({response.status}): {why or 'no secret'}")
        return NodeIdentity(server.rstrip("/"), name, answer["secret"])


class NodeClient:
    """One device's connection loop."""

    def __init__(
        self,
        identity: NodeIdentity,
        caps: Capabilities,
        *,
        say: Callable[[str], None] = print,
        ping_seconds: float = PING_SECONDS,
    ) -> None:
        self.identity = identity
        self.caps = caps
        self.say = say
        self.ping_seconds = ping_seconds
        self.connected = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Connect and serve until refused (NodeClientError) or cancelled."""
        from habakkuk.engine.i18n import t

        backoff = FIRST_BACKOFF
        while True:
            began = time.monotonic()
            try:
                await self._session()
                why = "closed"
            except NodeClientError:
                raise
            except Exception as exc:  # OSError, timeouts, aiohttp's client errors
                why = str(exc) or type(exc).__name__
            self.connected.clear()
            if time.monotonic() - began >= STEADY_SECONDS:
                backoff = FIRST_BACKOFF
            wait = backoff * random.uniform(0.5, 1.0)
            self.say(t("node.retrying", reason=why, seconds=f"{wait:.1f}"))
            await asyncio.sleep(wait)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _session(self) -> None:
        import aiohttp

        from habakkuk.engine.i18n import t

        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                socket_url(self.identity.server),
                heartbeat=self.ping_seconds,
                max_msg_size=MAX_MESSAGE_BYTES,
            ) as ws,
        ):
            hello = {
                "type": "hello",
                "name": self.identity.name,
                "secret": self.identity.secret,
                "caps": self.caps.names,
                "platform": this_platform(),
            }
            await ws.send_str(json.dumps(hello))
            first = await ws.receive(timeout=30)
            if first.type != aiohttp.WSMsgType.TEXT:
                self._refused_on_close(ws.close_code)
                raise ConnectionError(f"the server closed the connection ({ws.close_code})")
            frame = json.loads(first.data)
            if frame.get("type") != "welcome":
                raise NodeClientError(t("node.refused", reason=frame.get("error", "refused")))
            self.connected.set()
            self.say(
                t(
                    "node.connected",
                    server=self.identity.server,
                    caps=", ".join(self.caps.names) or "-",
                )
            )
            try:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.TEXT:
                        continue
                    try:
                        invoke = parse_invoke(message.data)
                    except FrameError as exc:
                        log.warning("bad frame from the server: %s", exc)
                        continue
                    if invoke is not None:
                        self._start(ws, invoke)
            finally:
                for task in list(self._tasks):
                    task.cancel()
            self._refused_on_close(ws.close_code)

    def _refused_on_close(self, code: int | None) -> None:
        """A policy-violation close: refused for good (revoked, paired again)."""
        from habakkuk.engine.i18n import t

        if code == POLICY_VIOLATION:
            raise NodeClientError(t("node.cut_off"))

    def _start(self, ws: Any, invoke: Invoke) -> None:
        task = asyncio.create_task(self._answer(ws, invoke))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, ws: Any, invoke: Invoke) -> None:
        result = await self.caps.invoke(invoke.command, invoke.args)
        frame = {"type": "result", "id": invoke.id, "result": result.to_json()}
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_str(json.dumps(frame, separators=(",", ":")))
