"""A fake Home Assistant on 127.0.0.1 that speaks its real REST and WebSocket APIs.

As in Home Assistant's developer docs (REST API, WebSocket API):
- every REST call needs `Authorization: Bearer <long-lived token>`, else 401
  `401: Unauthorized` (text); GET /api/ says {"message": "API running."};
- GET /api/states lists state objects (entity_id, state, attributes, last_changed,
  last_updated, context);
- POST /api/services/<domain>/<service> with the service data as JSON answers the list of
  states that changed; turn_on, turn_off, lock and unlock change the named entities here;
  an unknown service is 400 {"message": "Service not found."};
- GET /api/history/period/<start>?filter_entity_id=...&end_time=... answers a list per
  entity of its states;
- /api/websocket: auth_required, then auth -> auth_ok or auth_invalid (and close), then
  subscribe_events {id, event_type} -> result {id, success}, and event messages
  {id, type: event, event: {event_type, data, origin, time_fired, context: {id, ...}}}
  under the subscription's id.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from aiohttp import WSMsgType, web

from tests.fakes.loopback import serve_on_loopback

TOKEN = "ha-long-lived-token-0123456789"
SERVICE_STATES = {"turn_on": "on", "turn_off": "off", "lock": "locked", "unlock": "unlocked",
                  "open_cover": "open", "close_cover": "closed"}  # fmt: skip


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def state(entity_id: str, value: str, **attributes: Any) -> dict[str, Any]:
    """A state object as /api/states lists it."""
    stamp = now_iso()
    return {
        "entity_id": entity_id,
        "state": value,
        "attributes": attributes,
        "last_changed": stamp,
        "last_updated": stamp,
        "context": {"id": uuid.uuid4().hex, "parent_id": None, "user_id": None},
    }


@dataclass
class Call:
    """A service call the fake received."""

    domain: str
    service: str
    data: dict[str, Any]


@dataclass
class FakeHomeAssistant:
    """The fake instance: `url` once started (async with)."""

    token: str = TOKEN
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    history_queries: list[dict[str, str]] = field(default_factory=list)
    subscriptions: list[str] = field(default_factory=list)  # event types, every connection
    auth_attempts: list[str] = field(default_factory=list)  # the tokens tried over the socket
    connections: int = 0  # websockets that authenticated
    url: str = ""
    _sockets: list[tuple[web.WebSocketResponse, dict[str, int]]] = field(default_factory=list)
    _runner: web.AppRunner | None = None

    def add(self, entity_id: str, value: str, **attributes: Any) -> None:
        self.states[entity_id] = state(entity_id, value, **attributes)

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/api/", self._root)
        app.router.add_get("/api/states", self._states)
        app.router.add_post("/api/services/{domain}/{service}", self._service)
        app.router.add_get("/api/history/period/{start}", self._history)
        app.router.add_get("/api/websocket", self._websocket)
        self._runner, port = await serve_on_loopback(app)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drop()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- REST ------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    def _refuse(self) -> web.Response:
        return web.Response(status=401, text="401: Unauthorized")

    async def _root(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refuse()
        return web.json_response({"message": "API running."})

    async def _states(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refuse()
        return web.json_response(list(self.states.values()))

    async def _service(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refuse()
        domain, service = request.match_info["domain"], request.match_info["service"]
        data = await request.json() if request.can_read_body else {}
        self.calls.append(Call(domain, service, data))
        if service not in SERVICE_STATES:
            return web.json_response({"message": "Service not found."}, status=400)
        named = data.get("entity_id", [])
        entities = [named] if isinstance(named, str) else list(named)
        changed = []
        for entity in entities:
            if entity in self.states:
                old = self.states[entity]
                new = state(entity, SERVICE_STATES[service], **old["attributes"])
                self.states[entity] = new
                changed.append(new)
                await self.fire_state(entity, old, new)
        return web.json_response(changed)

    async def _history(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._refuse()
        query = dict(request.query)
        query["start"] = request.match_info["start"]
        self.history_queries.append(query)
        entity = query.get("filter_entity_id", "")
        rows = self.history.get(entity, [])
        return web.json_response([rows] if rows else [])

    # -- WebSocket ---------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "auth_required", "ha_version": "2026.12.0"})
        auth = await ws.receive_json()
        self.auth_attempts.append(str(auth.get("access_token", "")))
        if auth.get("type") != "auth" or auth.get("access_token") != self.token:
            await ws.send_json(
                {"type": "auth_invalid", "message": "Invalid access token or password"}
            )
            await ws.close()
            return ws
        await ws.send_json({"type": "auth_ok", "ha_version": "2026.12.0"})
        subscribed: dict[str, int] = {}
        entry = (ws, subscribed)
        self._sockets.append(entry)
        self.connections += 1
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                body = json.loads(message.data)
                if body.get("type") == "subscribe_events":
                    event_type = body.get("event_type", "*")
                    subscribed[event_type] = body["id"]
                    self.subscriptions.append(event_type)
                    await ws.send_json(
                        {"id": body["id"], "type": "result", "success": True, "result": None}
                    )
                elif body.get("type") == "ping":
                    await ws.send_json({"id": body["id"], "type": "pong"})
                else:
                    await ws.send_json(
                        {
                            "id": body.get("id"),
                            "type": "result",
                            "success": False,
                            "error": {"code": "unknown_command", "message": "Unknown command."},
                        }
                    )
        finally:
            if entry in self._sockets:
                self._sockets.remove(entry)
        return ws

    async def fire(
        self, event_type: str, data: dict[str, Any], *, context_id: str | None = None
    ) -> int:
        """Send an event to every subscriber of its type; how many got it."""
        event = {
            "event_type": event_type,
            "data": data,
            "origin": "LOCAL",
            "time_fired": now_iso(),
            "context": {"id": context_id or uuid.uuid4().hex, "parent_id": None, "user_id": None},
        }
        sent = 0
        for ws, subscribed in list(self._sockets):
            number = subscribed.get(event_type) or subscribed.get("*")
            if number is not None and not ws.closed:
                await ws.send_json({"id": number, "type": "event", "event": event})
                sent += 1
        return sent

    async def fire_state(
        self,
        entity_id: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        *,
        context_id: str | None = None,
    ) -> int:
        """A state_changed event for `entity_id` from `old` to `new`."""
        data = {"entity_id": entity_id, "old_state": old, "new_state": new}
        return await self.fire("state_changed", data, context_id=context_id)

    @property
    def subscribed(self) -> bool:
        """Whether some connection has subscribed to at least one event type."""
        return any(subscribed for _, subscribed in self._sockets)

    async def drop(self) -> None:
        """Close every open WebSocket (as a restart of Home Assistant does)."""
        sockets = list(self._sockets)
        self._sockets.clear()
        await asyncio.gather(*(ws.close() for ws, _ in sockets), return_exceptions=True)
