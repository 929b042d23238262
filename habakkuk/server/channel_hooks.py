"""/channels/<account>: the webhook platforms' requests, handed to the account's adapter.

Outside the API token (the platform cannot carry it): each adapter checks every request
itself (habakkuk/channels/webhook.py) and answers 403 to one that fails. While the
account's adapter restarts (or another process holds it) the answer is 503 with
Retry-After, so the platform retries. GET /channels/<account>/media/<token> serves a file
the adapter offered the platform, for an hour, to whoever holds the unguessable token.
A platform that proves itself by a secret in the URL (BlueBubbles) calls
/channels/<account>/<secret>; the adapter compares it in constant time. So do the
buttons of a platform that otherwise holds a connection of its own (Mattermost's
interactive messages: CALLBACK_TYPES).
"""

from __future__ import annotations

from aiohttp import web

from habakkuk.channels.webhook import (
    CALLBACK_TYPES,
    WEBHOOK_TYPES,
    CallbackReceiver,
    WebhookAdapter,
    WebhookRequest,
)

from .errors import ApiError
from .inputs import read_body
from .served import json_response, server_of

BODY_LIMIT = 1024 * 1024  # every platform's message fits; a file comes by URL


def _adapter(request: web.Request) -> WebhookAdapter | CallbackReceiver | None:
    server = server_of(request)
    account = request.match_info["account"]
    config = server.runtime.config.channels.get(account)
    if config is None or config.type not in WEBHOOK_TYPES | CALLBACK_TYPES:
        raise ApiError(404, f"no webhook channel named {account!r}")
    adapter = server.runtime.channel_service().supervisor.adapter(account)
    return adapter if isinstance(adapter, WebhookAdapter | CallbackReceiver) else None


def _restarting(request: web.Request) -> web.Response:
    account = request.match_info["account"]
    return json_response(
        {"error": f"channel {account} is restarting; retry later"}, 503, {"Retry-After": "5"}
    )


def signed_url(request: web.Request) -> str:
    """The URL the platform called: `http.public_url` plus the path behind a proxy, else
    the request's own."""
    public = server_of(request).config.public_url
    if public:
        return public.rstrip("/") + request.path_qs
    return str(request.url)


async def receive(request: web.Request) -> web.Response:
    """Any method on /channels/{account}: the adapter's answer."""
    adapter = _adapter(request)
    if adapter is None:
        return _restarting(request)
    secret = request.match_info.get("secret", "")
    if secret and not adapter.url_secret:
        raise ApiError(404, "no such path")
    body = await read_body(request, BODY_LIMIT)
    reply = await adapter.receive(
        WebhookRequest(
            request.method,
            signed_url(request),
            dict(request.headers),
            body,
            request.content_type,
            secret,
        )
    )
    headers = {"Retry-After": "5"} if reply.status == 503 else None
    return web.Response(
        status=reply.status, body=reply.body, content_type=reply.content_type, headers=headers
    )


async def media(request: web.Request) -> web.Response:
    """GET /channels/{account}/media/{token}: a file offered to the platform."""
    adapter = _adapter(request)
    if adapter is None:
        return _restarting(request)
    if not isinstance(adapter, WebhookAdapter):  # it offers the platform no files
        raise ApiError(404, "no such file")
    found = adapter.media.get(request.match_info["token"])
    if found is None:
        raise ApiError(404, "no such file (or its hour is over)")
    data, media_type = found
    return web.Response(body=data, content_type=media_type)


def setup(app: web.Application) -> None:
    """Register /channels/{account} (and with a secret in the URL) and its media."""
    app.router.add_route("*", "/channels/{account}", receive)
    app.router.add_route("*", "/channels/{account}/{secret}", receive)
    app.router.add_get("/channels/{account}/media/{token}", media)
