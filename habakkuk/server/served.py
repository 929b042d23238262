"""What every route shares: the server serving it (a Protocol), JSON answers, body fields.

Routes find the server as `server_of(request)`, typed `Served`: what they use of
habakkuk.server.app.HttpServer, which installs itself under SERVER_KEY. Keeping this
below app.py lets app.py import the route modules without their importing it back.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from .errors import ApiError

if TYPE_CHECKING:
    from habakkuk.channels.adapter import Address
    from habakkuk.channels.service import ChannelService
    from habakkuk.engine.config import HttpConfig
    from habakkuk.services.live_calls import LiveCalls

    from .health_types import Readiness
    from .host import ServerHost
    from .webstore import WebStore


@dataclass
class Attachment:
    """A file sent with a web chat message."""

    filename: str
    content_type: str
    data: bytes


class WebChat(Protocol):
    """What the routes use of the web chat channel (habakkuk.server.chat.WebChannel)."""

    typing: dict[str, str]
    closing: asyncio.Event

    @property
    def service(self) -> ChannelService:
        """The running chat channels the web account belongs to."""
        ...

    def address(self, conversation: str) -> Address:
        """The channel address of a web conversation."""
        ...

    async def handle(
        self,
        conversation: str,
        text: str,
        *,
        agent: str | None = None,
        client_id: str | None = None,
        attachments: list[Attachment] | None = None,
    ) -> dict[str, Any]:
        """One message from the web, through the gateway."""
        ...


class MetricsView(Protocol):
    """What GET /metrics uses of the server's metrics (habakkuk.server.metrics.Metrics)."""

    async def render(self) -> bytes:
        """The Prometheus text."""
        ...


class HealthView(Protocol):
    """What GET /healthz uses of the health monitor (habakkuk.server.health.HealthMonitor)."""

    def body(self) -> bytes:
        """The JSON answer, from memory."""
        ...


class ReadinessView(Protocol):
    """What GET /readyz uses of the probe (habakkuk.server.readiness.ReadinessProbe)."""

    async def check(self) -> Readiness:
        """Every readiness check, now."""
        ...


class Served(Protocol):
    """What the routes use of the HTTP server serving them (habakkuk.server.app.HttpServer)."""

    runtime: ServerHost
    config: HttpConfig
    token: str | None
    keepalive_seconds: float
    typing_seconds: float
    body_seconds: float  # a request body arrives within this, or the answer is 408
    started_at: float

    @property
    def channel(self) -> WebChat:
        """The web chat channel."""
        ...

    @property
    def live(self) -> LiveCalls:
        """Live mode's calls: the voice model's tool, the transcript, the end."""
        ...

    @property
    def metrics(self) -> MetricsView:
        """The server's Prometheus metrics."""
        ...

    @property
    def health(self) -> HealthView:
        """Liveness from memory, for /healthz."""
        ...

    @property
    def readiness(self) -> ReadinessView:
        """The live checks, for /readyz."""
        ...

    def track_stream(self) -> None:
        """Register the current handler as a long-lived stream, cancelled on stop."""

    def token_matches(self, header: str) -> bool:
        """True when `Authorization` carries the token (constant-time compare)."""
        ...

    def web_store(self) -> WebStore:
        """web.db; only valid while the server runs."""
        ...


UPLOAD_LIMIT = 25 * 1024 * 1024

# Typed keys for what handlers find on the application.
SERVER_KEY: web.AppKey[Served] = web.AppKey("server", Served)


def server_of(request: web.Request) -> Served:
    """The server serving this request (habakkuk.server.app.HttpServer)."""
    return request.app[SERVER_KEY]


def json_response(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response (UTF-8, compact)."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate from the client echoed back: JSON escapes it.
        data = json.dumps(body, separators=(",", ":")).encode("ascii")
    return web.Response(
        body=data,
        status=status,
        content_type="application/json",
        charset="utf-8",
        headers=headers,
    )


def field(
    body: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    *,
    required: bool = False,
    default: Any = None,
) -> Any:
    """One field of a JSON body with its type checked; ApiError 400 when wrong."""
    if name not in body or body[name] is None:
        if required:
            raise ApiError(400, f"{name} is required")
        return default
    value = body[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise ApiError(400, f"{name} must be {_kind_word(kinds)}")
    if not isinstance(value, kinds):
        raise ApiError(400, f"{name} must be {_kind_word(kinds)}")
    return value


def _kind_word(kinds: tuple[type, ...]) -> str:
    words = {str: "a string", int: "an integer", bool: "true or false", dict: "an object"}
    words |= {list: "a list", float: "a number"}
    return " or ".join(words.get(k, k.__name__) for k in kinds)


def only_fields(body: dict[str, Any], allowed: set[str]) -> None:
    """Reject unknown fields (strict bodies under /api/)."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(allowed))})")
