"""Device nodes over HTTP (spec 000 "Device nodes", spec 001 "Nodes").

For devices, outside the API token (every request carries a pairing code or a node's
secret, checked in constant time against its hash; failures count towards the throttle):

- POST /nodes/pair {code, name, platform?, caps?} -> {name, secret}: redeems a one-time code.
- GET /nodes: the websocket of `habakkuk node run` (hello -> welcome, then invoke/result).
- GET /nodes/events: a browser node's event stream (X-Habakkuk-Node and the secret as a
  bearer token; X-Habakkuk-Caps and X-Habakkuk-Platform say what it offers), each
  invoke an `invoke` event; POST /nodes/result {id, result} answers one.

For the dashboard, behind the API token: GET /api/nodes, POST /api/nodes/pair,
DELETE /api/nodes/{name}. None of these routes exist without a `nodes:` section.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from aiohttp import WSMsgType, web

from habakkuk.engine.timeouts import wait_within
from habakkuk.protocols.nodes.hub import POLICY_VIOLATION, NodeHub, NodeRefused
from habakkuk.protocols.nodes.wire import (
    MAX_MESSAGE_BYTES,
    FrameError,
    caps_of,
    parse_hello,
    parse_result,
    parse_result_body,
)

from .chat import open_stream
from .errors import ApiError
from .inputs import header, read_json
from .served import json_response, server_of

log = logging.getLogger(__name__)

# The seconds a device has to send its hello after the websocket opens.
HELLO_SECONDS = 10.0


def hub_of(request: web.Request) -> NodeHub:
    """The runtime's device nodes (the routes exist only when there are)."""
    hub = server_of(request).runtime.devices
    if hub is None:
        raise ApiError(404, "device nodes are not configured (nodes: in config.yaml)")
    return hub


def _refused(exc: NodeRefused) -> ApiError:
    return ApiError(exc.status, str(exc))


# -- for devices ---------------------------------------------------------------------------


async def pair(request: web.Request) -> web.Response:
    """POST /nodes/pair: a pairing code for a node secret."""
    hub = hub_of(request)
    body = await read_json(request)
    code, name = body.get("code"), body.get("name")
    if not isinstance(code, str) or not isinstance(name, str):
        raise ApiError(400, "send {code, name} (text)")
    platform = body.get("platform", "")
    try:
        caps = caps_of(body.get("caps", []))
        if not isinstance(platform, str) or len(platform) > 64:
            raise FrameError("platform must be text")
        secret = await hub.pair(code, name, platform, caps)
    except FrameError as exc:
        raise ApiError(400, str(exc)) from None
    except NodeRefused as exc:
        raise _refused(exc) from None
    return json_response({"name": name, "secret": secret})


class WebSocketLink:
    """A `habakkuk node run` device's websocket."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(frame, separators=(",", ":")))

    async def close(self, code: int, reason: str) -> None:
        await self.ws.close(code=code, message=reason.encode()[:120])


async def socket(request: web.Request) -> web.WebSocketResponse:
    """GET /nodes: a device's websocket."""
    hub = hub_of(request)
    server = server_of(request)
    ws = web.WebSocketResponse(heartbeat=hub.heartbeat, max_msg_size=MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    server.track_stream()
    link = WebSocketLink(ws)
    try:
        message = await wait_within(ws.receive(), HELLO_SECONDS)
        if message.type != WSMsgType.TEXT:
            raise FrameError("the first frame must be a hello text frame")
        hello = parse_hello(message.data)
        record = await hub.login(hello.name, hello.secret)
    except (FrameError, NodeRefused, TimeoutError) as exc:
        why = str(exc) or "no hello in time"
        with contextlib.suppress(Exception):
            await link.send({"type": "error", "error": why})
        await link.close(POLICY_VIOLATION, why)
        return ws
    live = await hub.attach(record, hello.platform, hello.caps, link)
    await link.send({"type": "welcome", "name": live.name, "heartbeat": hub.heartbeat})
    try:
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                hub.deliver(live, parse_result(message.data))
            except FrameError as exc:
                log.warning("node %s sent a bad frame: %s", live.name, exc)
    finally:
        hub.detach(live)
    return ws


class StreamLink:
    """A browser node's event stream: invokes are queued for the handler to write."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.closed: str | None = None

    async def send(self, frame: dict[str, Any]) -> None:
        if self.closed is not None:
            raise ConnectionError(self.closed)
        self.frames.put_nowait(frame)

    async def close(self, code: int, reason: str) -> None:
        self.closed = reason
        self.frames.put_nowait(None)


def _browser_login(request: web.Request) -> tuple[str, str]:
    """The node's name and secret from a browser node's headers (401 when missing)."""
    name = header(request, "X-Habakkuk-Node", limit=64)
    scheme, _, secret = header(request, "Authorization", limit=300).partition(" ")
    if not name or scheme.lower() != "bearer":
        raise ApiError(401, "send X-Habakkuk-Node and the node's secret as a bearer token")
    return name, secret.strip()


async def events(request: web.Request) -> web.StreamResponse:
    """GET /nodes/events: a browser node's invokes as server-sent events."""
    hub = hub_of(request)
    server = server_of(request)
    name, secret = _browser_login(request)
    try:
        record = await hub.login(name, secret)
        caps = caps_of([cap for cap in header(request, "X-Habakkuk-Caps").split(",") if cap])
    except NodeRefused as exc:
        raise _refused(exc) from None
    except FrameError as exc:
        raise ApiError(400, str(exc)) from None
    platform = header(request, "X-Habakkuk-Platform", limit=64) or "browser"
    link = StreamLink()
    response = await open_stream(request)
    server.track_stream()
    live = await hub.attach(record, platform, caps, link)
    try:
        welcome = {"name": live.name, "heartbeat": hub.heartbeat}
        await response.write(f"event: welcome\ndata: {json.dumps(welcome)}\n\n".encode())
        while True:
            try:
                frame = await wait_within(link.frames.get(), hub.heartbeat)
            except TimeoutError:
                await response.write(b": ping\n\n")  # a gone browser fails the write
                continue
            if frame is None:
                closing = {"error": link.closed or "closed"}
                await response.write(f"event: closed\ndata: {json.dumps(closing)}\n\n".encode())
                break
            data = json.dumps(frame, separators=(",", ":"))
            await response.write(f"event: invoke\ndata: {data}\n\n".encode())
    except (ConnectionError, RuntimeError):
        pass
    finally:
        hub.detach(live)
    return response


async def result(request: web.Request) -> web.Response:
    """POST /nodes/result: a browser node's answer to one invoke."""
    hub = hub_of(request)
    name, secret = _browser_login(request)
    try:
        record = await hub.login(name, secret)
    except NodeRefused as exc:
        raise _refused(exc) from None
    live = hub.live.get(name)
    if live is None or live.secret_hash != record.secret_hash:
        raise ApiError(409, f"node {name} has no open event stream")
    body = await read_json(request, limit=MAX_MESSAGE_BYTES)
    try:
        frame = parse_result_body(body)
    except FrameError as exc:
        raise ApiError(400, str(exc)) from None
    if not hub.deliver(live, frame):
        raise ApiError(404, f"no invocation {frame.id} is waiting")
    return json_response({"ok": True})


# -- for the dashboard -----------------------------------------------------------------------


async def list_nodes(request: web.Request) -> web.Response:
    """GET /api/nodes: every paired node, by name."""
    views = await hub_of(request).nodes()
    return json_response({"nodes": [view.to_json() for view in views]})


async def new_code(request: web.Request) -> web.Response:
    """POST /api/nodes/pair: a one-time pairing code."""
    await read_json(request)
    code = await hub_of(request).new_code()
    return json_response({"code": code.code, "expires": code.expires})


async def revoke(request: web.Request) -> web.Response:
    """DELETE /api/nodes/{name}: revoke the node and drop its connection."""
    name = request.match_info["name"]
    if not await hub_of(request).revoke(name):
        raise ApiError(404, f"there is no node {name!r}")
    return json_response({"revoked": name, "at": time.time()})


def setup(app: web.Application, hub: NodeHub | None) -> None:
    """Register the routes when device nodes are configured."""
    if hub is None:
        return
    app.router.add_get("/nodes", socket)
    app.router.add_post("/nodes/pair", pair)
    app.router.add_get("/nodes/events", events)
    app.router.add_post("/nodes/result", result)
    app.router.add_get("/api/nodes", list_nodes)
    app.router.add_post("/api/nodes/pair", new_code)
    app.router.add_delete("/api/nodes/{name}", revoke)
