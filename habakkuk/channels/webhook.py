"""What every webhook platform shares: the door the HTTP server opens, the request as a
typed value, the media shelf and the adapter's run.

A webhook platform (SMS through Twilio, LINE, ...) calls us: the HTTP server mounts each
account at `/channels/<account>` outside the API token (habakkuk/server/channel_hooks.py)
and hands every request to the account's connected adapter as a `WebhookRequest`. The
adapter checks the request itself (each platform signs its own way) and answers with a
`WebhookReply`; a request that fails the check is counted in `refused` and starts nothing.
While the adapter restarts there is no connected adapter, and the server answers 503, so
the platform retries later.

The adapter is "connected" while the HTTP server serves in this process (`WebhookDoor`):
`run` beats while the door is open and ends when it closes, so `habakkuk channels` tells
the truth about an account nobody can reach. Files some platforms fetch by URL (Twilio's
MMS, LINE's images) are served from memory (`MediaShelf`) under an unguessable URL
below the account's path for one hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.timeouts import wait_within

from .adapter import Adapter, Beat, Inbox

log = logging.getLogger(__name__)

MEDIA_SECONDS = 3600.0  # how long a file stays fetchable by its URL
MEDIA_BYTES = 256 * 1024 * 1024  # what the shelf holds at most (the oldest go first)


@dataclass(frozen=True)
class WebhookRequest:
    """One request to `/channels/<account>`: `url` is the address the platform signed
    (`http.public_url` plus the path behind a proxy, else the request's own)."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    content_type: str = ""
    # the path's last part on /channels/<account>/<secret> (BlueBubbles' secret), else ""
    secret: str = ""


@dataclass(frozen=True)
class WebhookReply:
    """What the adapter answers the platform."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain"


REFUSED = WebhookReply(403, b"forbidden")
UNAUTHORIZED = WebhookReply(401, b"unauthorized")


class WebhookDoor:
    """Whether the HTTP server serves `/channels/...` in this process, and at which base
    URL files are offered (`http.public_url`, else the server's own address)."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._closed = asyncio.Event()
        self.base_url = ""

    def open(self, base_url: str) -> None:
        """The server listens: requests can reach the adapters."""
        self.base_url = base_url.rstrip("/")
        self._closed.clear()
        self._open.set()

    def close(self) -> None:
        """The server stops: every webhook adapter's run ends."""
        self._open.clear()
        self._closed.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    async def opened(self, timeout: float) -> bool:
        """True once the door is open, False after `timeout` seconds."""
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_within(self._open.wait(), timeout)
        return self._open.is_set()

    async def closed(self) -> None:
        """Wait until the door closes."""
        await self._closed.wait()


@dataclass
class _Shelved:
    data: bytes
    media_type: str
    until: float


@dataclass
class MediaShelf:
    """Files served from memory under one-hour unguessable tokens."""

    seconds: float = MEDIA_SECONDS
    limit: int = MEDIA_BYTES
    _items: OrderedDict[str, _Shelved] = field(default_factory=OrderedDict)

    def put(self, data: bytes, media_type: str) -> str:
        """Shelve `data`; returns its token (256 random bits, URL-safe)."""
        self._expire()
        token = secrets.token_urlsafe(32)
        self._items[token] = _Shelved(data, media_type, time.monotonic() + self.seconds)
        while sum(len(item.data) for item in self._items.values()) > self.limit:
            self._items.popitem(last=False)
        return token

    def get(self, token: str) -> tuple[bytes, str] | None:
        """The file under `token` while it is fresh, else None."""
        self._expire()
        item = self._items.get(token)
        return (item.data, item.media_type) if item is not None else None

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, item in self._items.items() if item.until <= now]:
            del self._items[token]


class WebhookAdapter(Adapter):
    """An account the platform calls: `receive` checks and takes each request."""

    # whether the platform calls /channels/<account>/<secret> (a secret in the URL)
    url_secret: bool = False

    def __init__(self, config: ChannelConfig, door: WebhookDoor):
        super().__init__(config.name)
        self.config = config
        self.door = door
        self.media = MediaShelf()
        self.refused = 0  # requests refused by the check (forged, wrong key, truncated)
        self._inbox: Inbox | None = None
        self._beat: Beat | None = None

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        """Connected while the HTTP server serves; beats so the supervisor sees it live."""
        wait = max(1.0, self.config.silent_limit_seconds / 2)
        if not await self.door.opened(wait):
            raise ConnectionError(
                f"{self.type} {self.account}: the HTTP server is not running in this "
                "process (add an http: section and run `habakkuk serve`)"
            )
        await self.connect()
        self._inbox, self._beat = inbox, beat
        beat()
        every = max(0.5, self.config.silent_limit_seconds / 4)
        try:
            while self.door.is_open:
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_within(self.door.closed(), every)
                beat()
        finally:
            self._inbox = self._beat = None

    async def connect(self) -> None:
        """Check the account once before taking requests (raise FatalAdapterError)."""

    async def receive(self, request: WebhookRequest) -> WebhookReply:
        """Check and take one request; refused ones are counted and start nothing."""
        inbox = self._inbox
        if inbox is None:
            return WebhookReply(503, b"restarting")
        if not self.verify(request):
            self.refused += 1
            log.warning("%s %s: refused a request that failed its check", self.type, self.account)
            return REFUSED
        if self._beat is not None:
            self._beat()
        return await self.take(request, inbox)

    def media_url(self, data: bytes, media_type: str) -> str:
        """A one-hour URL the platform fetches `data` from."""
        token = self.media.put(data, media_type)
        return f"{self.door.base_url}/channels/{self.account}/media/{token}"

    @abstractmethod
    def verify(self, request: WebhookRequest) -> bool:
        """True when the request carries the platform's valid signature (constant time)."""

    @abstractmethod
    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        """Parse a verified request and hand its messages to `inbox`."""


# The platforms that call us at /channels/<account> (the HTTP server opens the door for them).
WEBHOOK_TYPES = frozenset(
    {
        "sms",
        "feishu",
        "dingtalk",
        "wecom",
        "whatsappcloud",
        "messenger",
        "instagram",
        "line",
        "bluebubbles",
        "teams",
        "googlechat",
        "nextcloud",
    }
)

# The platforms that receive over a connection of their own but whose buttons call us back
# at /channels/<account>/<secret> (Mattermost's interactive messages).
CALLBACK_TYPES = frozenset({"mattermost"})


@runtime_checkable
class CallbackReceiver(Protocol):
    """An adapter of a CALLBACK_TYPES platform: it takes the requests the platform's
    buttons send to `/channels/<account>/<secret>`, checked by itself."""

    url_secret: bool

    async def receive(self, request: WebhookRequest) -> WebhookReply:
        """Check and take one request (503 while the account is not connected)."""
        ...
