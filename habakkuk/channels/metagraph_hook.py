"""Meta's webhooks, shared by WhatsApp Cloud, Messenger and Instagram.

- The handshake: when the webhook is set up (and now and then after), Meta GETs the URL
  with `hub.mode=subscribe`, `hub.verify_token` (the string the person typed into the
  app's settings) and `hub.challenge`; the answer is the challenge, as text, only when
  the token is ours.
- Every POST carries `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the raw body
  with the app secret. A request without it, or with another, is refused (403) and
  counted; nothing else is read from it.

`GraphWebhookAdapter` adds one thing to the webhook adapter: a send refused for good
(GraphFatal: the token revoked, a permission taken away) ends the run as fatal, so
`habakkuk channels` says so instead of "connected".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
from abc import abstractmethod
from typing import Any
from urllib.parse import parse_qs, urlsplit

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import Beat, FatalAdapterError, Inbox, SendError
from .metagraph import GraphClient, GraphFatal
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Hub-Signature-256"
# Meta's media files live on its own hosts; the token goes to no other.
MEDIA_HOSTS = ("fbsbx.com", "facebook.com", "whatsapp.net", "fbcdn.net", "cdninstagram.com")


def hub_signature(app_secret: str, body: bytes) -> str:
    """X-Hub-Signature-256 of `body`: "sha256=" and the hex HMAC-SHA256 with the app secret."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def signature_ok(app_secret: str, body: bytes, given: str) -> bool:
    """True when `given` is the body's signature (compared in constant time)."""
    expected = hub_signature(app_secret, body)
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def challenge(url: str, verify_token: str) -> str | None:
    """The hub.challenge to echo when `url` is Meta's subscribe handshake with our verify
    token, else None."""
    query = parse_qs(urlsplit(url).query, keep_blank_values=True)

    def one(name: str) -> str:
        values = query.get(name, [])
        return values[0] if len(values) == 1 else ""

    given = one("hub.verify_token")
    ours = hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), verify_token.encode("utf-8")
    )
    found = one("hub.challenge")
    if one("hub.mode") != "subscribe" or not ours or not found:
        return None
    return found


def media_host_ok(url: str, graph_root: str) -> bool:
    """True when `url` is on one of Meta's media hosts (or the Graph root's own host,
    as a test's fake serves both), over https unless it is that root's."""
    parts, root = urlsplit(url), urlsplit(graph_root)
    host = (parts.hostname or "").lower()
    if parts.scheme == root.scheme and parts.netloc == root.netloc:
        return True
    return parts.scheme == "https" and any(
        host == domain or host.endswith("." + domain) for domain in MEDIA_HOSTS
    )


class GraphWebhookAdapter(WebhookAdapter):
    """A Meta account taking signed webhooks and sending through the Graph client."""

    def __init__(
        self,
        config: ChannelConfig,
        door: WebhookDoor,
        graph: GraphClient,
        app_secret: str,
        verify_token: str,
    ):
        super().__init__(config, door)
        self.graph = graph
        self.app_secret = app_secret
        self.verify_token = verify_token
        self._broken: asyncio.Event = asyncio.Event()
        self._why = ""

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        """The webhook run, ended as fatal when a send learns the token is refused."""
        serving = asyncio.ensure_future(super().run(inbox, beat))
        broken = asyncio.ensure_future(self._broken.wait())
        try:
            await asyncio.wait({serving, broken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            broken.cancel()
            if not serving.done():
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
        if self._broken.is_set():
            raise FatalAdapterError(self._why)
        serving.result()

    async def close(self) -> None:
        await self.graph.close()

    async def call(self, what: str, coro: Any) -> dict[str, Any]:
        """Await a Graph call; GraphFatal marks the account broken and is a SendError for
        the delivery worker (it retries once the token is replaced)."""
        try:
            found: dict[str, Any] = await coro
        except GraphFatal as exc:
            self._why = f"{self.type} {self.account}: {exc}"
            self._broken.set()
            raise SendError(f"{what}: {exc}") from None
        return found

    def verify(self, request: WebhookRequest) -> bool:
        if request.method == "GET":
            return challenge(request.url, self.verify_token) is not None
        given = request.headers.get(SIGNATURE_HEADER) or request.headers.get(
            SIGNATURE_HEADER.lower(), ""
        )
        return (
            request.method == "POST"
            and bool(given)
            and signature_ok(self.app_secret, request.body, given)
        )

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        if request.method == "GET":
            found = challenge(request.url, self.verify_token) or ""
            return WebhookReply(200, found.encode(), "text/plain")
        try:
            payload = json.loads(request.body)
        except ValueError:
            return WebhookReply(400, b"not JSON")
        if not isinstance(payload, dict):
            return WebhookReply(400, b"not a webhook event")
        await self.take_event(payload, inbox)
        return WebhookReply(200, b"EVENT_RECEIVED")

    @abstractmethod
    async def take_event(self, payload: dict[str, Any], inbox: Inbox) -> None:
        """Hand the messages of one verified event to `inbox`."""
