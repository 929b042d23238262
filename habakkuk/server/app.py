"""The aiohttp application: conventions of every endpoint, and the server's lifecycle.

Conventions (spec 001 "Conventions"), applied by middlewares before a handler runs:

- With `mcp_server.http: true`, /mcp is the MCP server over Streamable HTTP behind
  the same token (it was not mounted before, so it answered 404).
- Without `http.token_env` the server listens only on loopback and answers only
  requests whose Host is a loopback name, so a web page cannot reach it through
  DNS rebinding. With a token, every path but /healthz, /readyz, the static
  dashboard, the webhooks (which check their own secret) and a public /metrics needs
  `Authorization: Bearer <token>`, compared in constant time. /healthz (liveness,
  from memory) and /readyz (the stores answer, the queue depth read now, each
  channel's state; 503 naming what fails) tell nothing but states and depth.
- Requests a browser marks `Sec-Fetch-Site: cross-site` or `same-site` get 403.
- POST and PUT take `application/json` only (415); the multipart chat form needs
  the X-Habakkuk-Client header, which a cross-site form cannot set.
- Errors are `{"error": "..."}` (OpenAI's shape under /v1/); a 500 says nothing
  about its cause, which goes to the log.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from habakkuk.channels.webhook import CALLBACK_TYPES, WEBHOOK_TYPES
from habakkuk.engine.config import HttpConfig, is_loopback_host
from habakkuk.engine.errors import ConfigError, HabakkukError, NotFound
from habakkuk.services.live_calls import LiveCalls

from . import (
    a2a_api,
    api,
    board_api,
    budget_api,
    channel_hooks,
    chat,
    chat_files,
    dashboard,
    health,
    memory_api,
    metrics,
    nodes_api,
    openai_compat,
    readiness,
    realtime_api,
    schedules_api,
    skills_api,
    voice,
    webhooks,
)
from .chat import WebChannel
from .errors import ApiError
from .health import HealthMonitor
from .inputs import BODY_SECONDS, JSON_LIMIT, header, read_body
from .metrics import Metrics
from .readiness import ReadinessProbe
from .served import SERVER_KEY, UPLOAD_LIMIT, Served, json_response, server_of
from .webstore import WebStore

if TYPE_CHECKING:
    from .host import ServerHost

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# -- middlewares ---------------------------------------------------------------------------


# Paths every client may ask without the token (the dashboard's page holds no data).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/", "/app"})


def _is_public(request: web.Request, server: Served) -> bool:
    path = request.path
    if path in PUBLIC_PATHS or path.startswith("/app/"):
        return True
    if path.startswith(("/hooks/", "/channels/")):
        return True  # each hook checks its own secret, each webhook channel its platform's
    if path == "/nodes" or path.startswith("/nodes/"):
        return True  # devices carry a pairing code or their node secret (nodes_api.py)
    if server.runtime.config.a2a is not None and a2a_api.is_a2a_path(path):
        return True  # public cards; /a2a checks the A2A token itself (a2a_api.py)
    return path == "/metrics" and server.config.metrics.public


def _error_body(
    request: web.Request, status: int, message: str, param: str | None
) -> dict[str, Any]:
    if request.path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "server_error"
        if status == 401:
            kind = "authentication_error"
        return {"error": {"message": message, "type": kind, "param": param, "code": None}}
    if (
        request.method == "POST"
        and server_of(request).runtime.config.a2a is not None
        and a2a_api.is_a2a_path(request.path)
    ):
        return a2a_api.http_error_body(request, status, message)  # a JSON-RPC error
    return {"error": message}


def error_response(
    request: web.Request, status: int, message: str, param: str | None = None
) -> web.Response:
    """An error in the shape the path's clients expect."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    response = json_response(_error_body(request, status, message, param), status, headers)
    if status == 408:
        # The body never came whole: what is left of it cannot be told from a next request.
        response.force_close()
    return response


@web.middleware
async def conventions_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The request checks, then the handler; every failure becomes a JSON error.

    A 500 keeps its details in the log. (One middleware, not two: it is on every
    request's path.)
    """
    try:
        check_request(request)
        return await handler(request)
    except ApiError as exc:
        return error_response(request, exc.status, exc.message, exc.param)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = {404: "not found", 405: "method not allowed"}.get(exc.status, exc.reason)
        if exc.status == 413:
            message = "request body is too large"
        return error_response(request, exc.status, message)
    except NotFound as exc:
        return error_response(request, 404, str(exc))
    except ConfigError as exc:
        # The facade raises ConfigError for an unknown agent name.
        return error_response(request, 404 if "is not configured" in str(exc) else 400, str(exc))
    except HabakkukError as exc:
        return error_response(request, 400, str(exc))
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception:
        log.exception("HTTP %s %s failed", request.method, loggable_path(request.path))
        return error_response(request, 500, "internal error (see the server log)")


def loggable_path(path: str) -> str:
    """`path` as the log may keep it: a channel's URL past its account can be a secret
    (BlueBubbles' `/channels/<account>/<secret>`), so it is cut."""
    parts = path.split("/", 3)
    if len(parts) == 4 and parts[1] == "channels":
        return f"/channels/{parts[2]}/…"
    return path


def check_request(request: web.Request) -> None:
    """Host, Sec-Fetch-Site, bearer token and content type, in that order."""
    server = server_of(request)
    if server.token is None and not loopback_addressed(request.headers.get("Host", "")):
        raise ApiError(403, "this server answers only requests addressed to a loopback name")
    site = request.headers.get("Sec-Fetch-Site", "").lower()
    if site in ("cross-site", "same-site"):
        raise ApiError(403, "cross-site requests are refused")
    if (
        server.token is not None
        and not _is_public(request, server)
        and not server.token_matches(header(request, "Authorization"))
    ):
        raise ApiError(401, "missing or wrong bearer token")
    if request.method in ("POST", "PUT") and not request.path.startswith(("/hooks/", "/channels/")):
        ctype = request.content_type
        multipart_chat = request.path == "/api/chat" and ctype == "multipart/form-data"
        if multipart_chat:
            if "X-Habakkuk-Client" not in request.headers:
                raise ApiError(403, "a multipart chat message needs the X-Habakkuk-Client header")
        elif ctype != "application/json":
            raise ApiError(415, "send Content-Type: application/json")


_HOST = re.compile(
    r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?"
)


@functools.lru_cache(maxsize=64)
def loopback_addressed(host: str) -> bool:
    """True when a Host header names a loopback name or address.

    Cached: without a token every request asks, and its clients send the same few
    Host values (parsing one costs more than a whole /healthz answer otherwise).
    """
    name = host_name(host)
    return name is not None and is_loopback_host(name)


def host_name(host: str) -> str | None:
    """The name or address in a Host header without its port; None when malformed.

    A malformed Host (`[::1`, `::1]`, a bad port, spaces, non-ASCII) names no
    loopback address, so it is refused rather than guessed at.
    """
    match = _HOST.fullmatch(host)
    if match is None or (match["port"] is not None and int(match["port"]) > 65535):
        return None
    if match["v6"] is not None:
        import ipaddress

        try:
            ipaddress.IPv6Address(match["v6"])
        except ValueError:
            return None
        return match["v6"]
    return match["name"]


# -- the server ----------------------------------------------------------------------------


class HttpServer:
    """The HTTP surface of one runtime: build the app, listen, stop."""

    def __init__(self, runtime: ServerHost, config: HttpConfig, token: str | None):
        self.runtime = runtime
        self.config = config
        self.token = token
        self.keepalive_seconds = 20.0
        self.typing_seconds = 4.0
        self.body_seconds = BODY_SECONDS
        self.store: WebStore | None = None
        self.metrics: Metrics = Metrics(runtime)
        self.health = HealthMonitor(runtime)
        self.readiness = ReadinessProbe(runtime, self.web_store)
        self.channel: WebChannel = WebChannel(self)
        self.live = LiveCalls(
            realtime_api.WebLiveChat(self.channel), runtime.turns, runtime.sessions, runtime.bus
        )
        self._runner: web.AppRunner | None = None
        self.host = config.host
        self.port = config.port
        self.started = asyncio.Event()
        self.started_at = time.time()
        self._streams: set[asyncio.Task[Any]] = set()

    def track_stream(self) -> None:
        """Register the current handler as a long-lived stream, cancelled on stop."""
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
            task.add_done_callback(self._streams.discard)

    def token_matches(self, header: str) -> bool:
        """True when `Authorization` carries the token (constant-time compare)."""
        if self.token is None:
            return True
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        # surrogateescape: bytes that are not UTF-8 compare (unequal) instead of raising.
        given = value.strip().encode("utf-8", "surrogateescape")
        return hmac.compare_digest(given, self.token.encode())

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def build_app(self) -> web.Application:
        """The aiohttp application with every route."""
        app = web.Application(
            middlewares=[conventions_middleware], client_max_size=UPLOAD_LIMIT + 1024
        )
        app[SERVER_KEY] = self
        health.setup(app)
        readiness.setup(app)
        metrics.setup(app)
        api.setup(app)
        memory_api.setup(app)
        skills_api.setup(app)
        schedules_api.setup(app)
        board_api.setup(app)
        budget_api.setup(app)
        chat.setup(app)
        chat_files.setup(app)
        voice.setup(app)
        realtime_api.setup(app)
        nodes_api.setup(app, self.runtime.devices)
        openai_compat.setup(app)
        webhooks.setup(app)
        channel_hooks.setup(app)
        dashboard.setup(app)
        if self.runtime.config.a2a is not None and self.runtime.config.a2a.serve:
            a2a_api.setup(app, self)  # /a2a and the Agent Cards (spec 000 "Agent2Agent")
        if self.runtime.config.mcp_server.http:
            # /mcp (spec 000 "Other clients"): the conventions middleware checks the API
            # token (and Host, Sec-Fetch-Site, JSON) first, so the endpoint needs none.
            from habakkuk.protocols.mcp.server import McpHttpEndpoint

            McpHttpEndpoint(
                self.runtime, read_body=lambda request: read_body(request, JSON_LIMIT)
            ).install(app)
        return app

    async def start(self, host: str | None = None, port: int | None = None) -> None:
        """Open web.db, start the reply watcher and listen (port 0 picks a free port)."""
        host = host if host is not None else self.config.host
        port = port if port is not None else self.config.port
        if self.token is None and not is_loopback_host(host):
            raise ConfigError(
                f"http.listen: without http.token_env the server only listens on loopback, "
                f"not {host!r}"
            )
        self.store = await WebStore.open_on(self.runtime.storage)
        try:
            self.metrics.start()
            await self.health.start()
            await self.channel.start()
            # lingering_time: after an answer sent before the body was read whole (a 413,
            # a 408), what is left of the body is read and dropped for at most this long
            # before the connection closes (aiohttp's default is 10 s).
            self._runner = web.AppRunner(
                self.build_app(), access_log=None, shutdown_timeout=2.0, lingering_time=2.0
            )
            await self._runner.setup()
            site = web.TCPSite(self._runner, host, port, reuse_address=True)
            await site.start()
        except BaseException:
            await self.stop()
            raise
        sockets = getattr(site._server, "sockets", None) or []
        self.host = host
        self.port = sockets[0].getsockname()[1] if sockets else port
        self._open_webhooks(True)
        self.started.set()

    def _open_webhooks(self, serving: bool) -> None:
        """Tell the webhook channels (SMS, ...) and the callback ones (Mattermost's
        buttons) whether requests can reach them now."""
        channels = self.runtime.config.channels.values()
        if not any(channel.type in WEBHOOK_TYPES | CALLBACK_TYPES for channel in channels):
            return
        door = self.runtime.channel_service().webhook_door
        if serving:
            door.open(self.config.public_url or self.url)
        else:
            door.close()

    async def stop(self) -> None:
        """Stop listening (open streams end), then the watcher, then close web.db."""
        self.channel.closing.set()
        self._open_webhooks(False)
        await self.live.close()
        for task in list(self._streams):
            task.cancel()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        await self.channel.stop()
        await self.readiness.stop()
        await self.health.stop()
        self.metrics.stop()
        if self.store is not None:
            store, self.store = self.store, None
            await store.close()

    def web_store(self) -> WebStore:
        """web.db; only valid while the server runs."""
        if self.store is None:
            raise ApiError(503, "the server is shutting down")
        return self.store
