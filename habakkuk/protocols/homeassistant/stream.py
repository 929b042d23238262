"""One connection to Home Assistant's WebSocket API (/api/websocket), following its bus.

The flow is the API's: the server says auth_required, the client sends auth with the
access token, the server answers auth_ok (or auth_invalid, and closes); then one
subscribe_events per event type, each acknowledged by a result, and from then on event
messages carrying the subscription's id. WebSocket pings keep the connection honest, so
a silent network drop ends it within a heartbeat or two.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .events import HaEvent
from .rest import TOKEN_HELP, HaAuthError, HaError

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 30.0
AUTH_SECONDS = 15.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

OnEvent = Callable[[HaEvent], Awaitable[None]]


async def follow(
    url: str,
    token: str,
    token_env: str,
    event_types: Sequence[str],
    on_event: OnEvent,
    *,
    on_connected: Callable[[], None] | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> None:
    """Follow the bus at `url` until the connection ends (then return).

    HaAuthError when the token is refused, HaError when the server breaks the flow;
    aiohttp's and the socket's errors pass through for the caller's reconnect."""
    import aiohttp

    async with (
        aiohttp.ClientSession(trust_env=False) as http,
        http.ws_connect(url, heartbeat=heartbeat, max_msg_size=MAX_MESSAGE_BYTES) as ws,
    ):
        async with asyncio.timeout(AUTH_SECONDS):
            await _authenticate(ws, token, token_env)
            waiting: dict[int, str] = {}
            for number, event_type in enumerate(dict.fromkeys(event_types), 1):
                await ws.send_json(
                    {"id": number, "type": "subscribe_events", "event_type": event_type}
                )
                waiting[number] = event_type
            while waiting:
                for message in await _receive(ws):
                    _acknowledged(message, waiting)
        if on_connected is not None:
            on_connected()
        while True:
            messages = await _receive(ws)
            for message in messages:
                if message.get("type") == "event":
                    event = HaEvent.from_wire(message.get("event"))
                    if event is not None:
                        await on_event(event)
                elif message.get("type") == "result" and not message.get("success", True):
                    log.warning("homeassistant: an error from the server: %s", _error(message))


async def _authenticate(ws: Any, token: str, token_env: str) -> None:
    first = await _receive(ws)
    if not first or first[0].get("type") != "auth_required":
        raise HaError(f"not Home Assistant's WebSocket API (it said {_kind(first)} first)")
    await ws.send_json({"type": "auth", "access_token": token})
    answer = await _receive(ws)
    kind = answer[0].get("type") if answer else None
    if kind == "auth_invalid":
        why = answer[0].get("message") or "invalid access token"
        raise HaAuthError(
            f"Home Assistant refused the token in {token_env} ({why}): it must hold {TOKEN_HELP}"
        )
    if kind != "auth_ok":
        raise HaError(f"Home Assistant answered the auth with {_kind(answer)}")


def _acknowledged(message: dict[str, Any], waiting: dict[int, str]) -> None:
    """Take a subscription's result off `waiting`; HaError when it failed."""
    number = message.get("id")
    if message.get("type") != "result" or not isinstance(number, int) or number not in waiting:
        return
    event_type = waiting.pop(number)
    if not message.get("success"):
        raise HaError(f"subscribe_events {event_type} was refused: {_error(message)}")


async def _receive(ws: Any) -> list[dict[str, Any]]:
    """The next message(s): one object, or the array of a coalesced frame. ConnectionError
    when the connection closed."""
    import aiohttp

    frame = await ws.receive()
    if frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
        raise ConnectionError("Home Assistant closed the connection")
    if frame.type == aiohttp.WSMsgType.ERROR:
        raise ConnectionError(f"the connection failed: {ws.exception()}")
    if frame.type != aiohttp.WSMsgType.TEXT:
        return []
    try:
        parsed = json.loads(frame.data)
    except ValueError:
        raise HaError("Home Assistant sent a message that is not JSON") from None
    items = parsed if isinstance(parsed, list) else [parsed]
    return [item for item in items if isinstance(item, dict)]


def _kind(messages: list[dict[str, Any]]) -> str:
    return repr(messages[0].get("type")) if messages else "nothing"


def _error(message: dict[str, Any]) -> str:
    error = message.get("error")
    if isinstance(error, dict):
        return f"{error.get('code', '?')}: {error.get('message', '')}"
    return "no reason given"
