"""The aiohttp application: conventions of every endpoint, and the server's lifecycle.

Conventions (spec 001 "Conventions"), applied by middlewares before a handler runs:

- Without `http.token_env` the server listens only on loopback and answers only
  requests whose Host is a loopback name, so a web page cannot reach it through
  DNS rebinding. With a token, every path but /healthz, the static dashboard,
  the webhooks (which check their own secret) and a public /metrics needs
  `Authorization: Bearer <token>`, compared in constant time.
- Requests a browser marks `Sec-Fetch-Site: cross-site` or `same-site` get 403.
- POST and PUT take `application/json` only (415); the multipart chat form needs
  the X-Habakkuk-Client header, which a cross-site form cannot set.
- Errors are `{"error": "..."}` (OpenAI's shape under /v1/); a 500 says nothing
  about its cause, which goes to the log.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from habakkuk.engine.config import HttpConfig, is_loopback_host
from habakkuk.engine.errors import ConfigError, HabakkukError, NotFound

if TYPE_CHECKING:
    from habakkuk.runtime import Runtime

    from .chat import WebChannel
    from .metrics import Metrics
    from .webstore import WebStore

log = logging.getLogger(__name__)

JSON_LIMIT = 8 * 1024 * 1024  # a /v1 request may carry a long history
UPLOAD_LIMIT = 25 * 1024 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Typed keys for what handlers find on the application.
SERVER_KEY: web.AppKey[HttpServer] = web.AppKey("server", None)  # type: ignore[arg-type]


class ApiError(Exception):
    """An error answered as `{"error": message}` with `status`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def server_of(request: web.Request) -> HttpServer:
    """The HttpServer serving this request."""
    return request.app[SERVER_KEY]


def json_response(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON response (UTF-8, compact)."""
    return web.Response(
        text=json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers=headers,
    )


async def read_json(request: web.Request, *, limit: int = JSON_LIMIT) -> dict[str, Any]:
    """The request's JSON object body; ApiError 400/413 for anything else."""
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, f"request body is over {limit // 1024} KB")
    try:
        raw = await request.content.read(limit + 1)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise ApiError(400, f"could not read the body: {exc}") from None
    if len(raw) > limit:
        raise ApiError(413, f"request body is over {limit // 1024} KB")
    if not raw.strip():
        raise ApiError(400, "the body is empty; send a JSON object ({} where nothing is needed)")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        # A lone surrogate (\ud800) parses but cannot be stored or sent as UTF-8.
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, "the body contains an unpaired surrogate (invalid Unicode)") from None
    return body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


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


def query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter within [low, high]; ApiError 400 otherwise."""
    text = request.query.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer, not {text!r}") from None
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be between {low} and {high}")
    return value


# -- middlewares ---------------------------------------------------------------------------


def _is_public(request: web.Request, server: HttpServer) -> bool:
    path = request.path
    if path == "/healthz" or path == "/" or path == "/app" or path.startswith("/app/"):
        return True
    if path.startswith("/hooks/"):
        return True  # each hook checks its own secret (or the API token)
    return path == "/metrics" and server.config.metrics.public


def _error_body(request: web.Request, status: int, message: str) -> dict[str, Any]:
    if request.path.startswith("/v1/"):
        kind = "invalid_request_error" if status < 500 else "server_error"
        if status == 401:
            kind = "authentication_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return {"error": message}


def error_response(request: web.Request, status: int, message: str) -> web.Response:
    """An error in the shape the path's clients expect."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return json_response(_error_body(request, status, message), status, headers)


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
        return error_response(request, exc.status, exc.message)
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
        log.exception("HTTP %s %s failed", request.method, request.path)
        return error_response(request, 500, "internal error (see the server log)")


def check_request(request: web.Request) -> None:
    """Host, Sec-Fetch-Site, bearer token and content type, in that order."""
    server = server_of(request)
    if server.token is None:
        host = request.headers.get("Host", "")
        if not host or not is_loopback_host(_strip_port(host)):
            raise ApiError(403, "this server answers only requests addressed to a loopback name")
    site = request.headers.get("Sec-Fetch-Site", "").lower()
    if site in ("cross-site", "same-site"):
        raise ApiError(403, "cross-site requests are refused")
    if (
        server.token is not None
        and not _is_public(request, server)
        and not server.token_matches(request.headers.get("Authorization", ""))
    ):
        raise ApiError(401, "missing or wrong bearer token")
    if request.method in ("POST", "PUT") and not request.path.startswith("/hooks/"):
        ctype = request.content_type
        multipart_chat = request.path == "/api/chat" and ctype == "multipart/form-data"
        if multipart_chat:
            if "X-Habakkuk-Client" not in request.headers:
                raise ApiError(403, "a multipart chat message needs the X-Habakkuk-Client header")
        elif ctype != "application/json":
            raise ApiError(415, "send Content-Type: application/json")


def _strip_port(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, sep, port = host.rpartition(":")
    return name if sep and port.isdigit() else host


# -- the server ----------------------------------------------------------------------------


class HttpServer:
    """The HTTP surface of one runtime: build the app, listen, stop."""

    def __init__(self, runtime: Runtime, config: HttpConfig, token: str | None):
        from .chat import WebChannel
        from .health import DepthCache
        from .metrics import Metrics

        self.runtime = runtime
        self.config = config
        self.token = token
        self.keepalive_seconds = 20.0
        self.typing_seconds = 4.0
        self.sweep_seconds = 5.0
        self.store: WebStore | None = None
        self.metrics: Metrics = Metrics(runtime)
        self.depth_cache = DepthCache(runtime)
        self.channel: WebChannel = WebChannel(self)
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
        return hmac.compare_digest(value.strip().encode(), self.token.encode())

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def build_app(self) -> web.Application:
        """The aiohttp application with every route."""
        from . import api, chat, dashboard, health, metrics, openai_compat, webhooks

        app = web.Application(
            middlewares=[conventions_middleware], client_max_size=UPLOAD_LIMIT + 1024
        )
        app[SERVER_KEY] = self
        health.setup(app)
        metrics.setup(app)
        api.setup(app)
        chat.setup(app)
        openai_compat.setup(app)
        webhooks.setup(app)
        dashboard.setup(app)
        return app

    async def start(self, host: str | None = None, port: int | None = None) -> None:
        """Open web.db, start the reply watcher and listen (port 0 picks a free port)."""
        from .webstore import WebStore

        host = host if host is not None else self.config.host
        port = port if port is not None else self.config.port
        if self.token is None and not is_loopback_host(host):
            raise ConfigError(
                f"http.listen: without http.token_env the server only listens on loopback, "
                f"not {host!r}"
            )
        self.store = await WebStore.open(self.runtime.home.db_path("web"))
        try:
            self.metrics.start()
            await self.channel.start()
            self._runner = web.AppRunner(self.build_app(), access_log=None, shutdown_timeout=2.0)
            await self._runner.setup()
            site = web.TCPSite(self._runner, host, port, reuse_address=True)
            await site.start()
        except BaseException:
            await self.stop()
            raise
        sockets = getattr(site._server, "sockets", None) or []
        self.host = host
        self.port = sockets[0].getsockname()[1] if sockets else port
        self.started.set()

    async def stop(self) -> None:
        """Stop listening (open streams end), then the watcher, then close web.db."""
        self.channel.closing.set()
        for task in list(self._streams):
            task.cancel()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        await self.channel.stop()
        self.metrics.stop()
        if self.store is not None:
            store, self.store = self.store, None
            await store.close()

    def web_store(self) -> WebStore:
        """web.db; only valid while the server runs."""
        if self.store is None:
            raise ApiError(503, "the server is shutting down")
        return self.store
