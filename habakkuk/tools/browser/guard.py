"""The browser's URL guard: which requests a driven page may make (spec 000 "Browser").

Every request of a driven page, frame, worker or popup is checked here (through Fetch
interception), and every connection the browser opens is checked again by the pinning
proxy (pinproxy.py) against the same cached DNS answer:

* file:, chrome: and javascript: (and any scheme but http, https, about, data and blob)
  are refused outright;
* blocked_urls refuses every request it matches; allowed_urls, when set, is the list a
  document (a page or a frame) must match, so pages keep their CDN assets;
* a host that is, or resolves to, a loopback, private, link-local, CGNAT, unspecified,
  multicast or otherwise non-public address (netguard's table) is refused unless a
  pattern of allow_private names it; one private answer among several refuses the host;
* answers are cached for 30 seconds and the proxy connects only to the addresses the
  check saw, so a DNS answer that changes in between (rebinding) never reaches a socket.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from habakkuk.engine.browser_config import host_allowed_private, url_matches
from habakkuk.tools.netguard import check_address, check_url

Resolver = Callable[[str], Awaitable[list[str]]]
CACHE_SECONDS = 30.0
_LOCAL_SCHEMES = frozenset({"about", "data", "blob"})


class Refused(Exception):
    """A request the guard refuses; the message says why."""


async def system_resolve(host: str) -> list[str]:
    """The addresses `host` resolves to (both families), [] when it does not resolve."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass
class _Answer:
    addresses: list[str]
    refusal: str | None
    at: float


@dataclass
class UrlGuard:
    """The checks of one browser's requests; `resolve` and `clock` are replaceable."""

    allowed_urls: list[str] = field(default_factory=list)
    blocked_urls: list[str] = field(default_factory=list)
    allow_private: list[str] = field(default_factory=list)
    resolve: Resolver = system_resolve
    clock: Callable[[], float] = time.monotonic
    _cache: dict[str, _Answer] = field(default_factory=dict)

    async def check(self, url: str, *, document: bool) -> str | None:
        """Why the browser may not request `url` (None: it may)."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return f"{url[:200]} is not a valid URL"
        scheme = parts.scheme.lower()
        if scheme in _LOCAL_SCHEMES:
            return None  # no network: the page's own content
        if scheme not in ("http", "https"):
            return f"{scheme or 'a schemeless'}: URLs are refused"
        if self.blocked_urls and url_matches(self.blocked_urls, url):
            return f"{url} matches browser.blocked_urls"
        if document and self.allowed_urls and not url_matches(self.allowed_urls, url):
            return f"{url} is not in browser.allowed_urls"
        host = parts.hostname or ""
        try:
            await self.addresses(host, url)
        except Refused as exc:
            return str(exc)
        return None

    async def addresses(self, host: str, url: str | None = None) -> list[str]:
        """The addresses a connection to `host` may use: the checked, cached answer
        (pinned for 30 seconds). Refused when the host is not a public one; [] when the
        name does not resolve (the browser then fails on its own)."""
        if not host:
            raise Refused(f"{url or 'the URL'} has no host")
        key = host.lower().strip("[]")
        now = self.clock()
        answer = self._cache.get(key)
        if answer is None or now - answer.at > CACHE_SECONDS:
            answer = await self._look_up(key, url or f"http://{host}/")
            self._cache[key] = answer
        if answer.refusal:
            raise Refused(answer.refusal)
        return answer.addresses

    async def _look_up(self, host: str, url: str) -> _Answer:
        now = self.clock()
        literal = _literal(host)
        if host_allowed_private(self.allow_private, host):
            found = [str(literal)] if literal is not None else await self.resolve(host)
            return _Answer(found, None, now)
        static = check_url(f"http://{_bracketed(host)}/")
        if static:
            return _Answer([], f"{url}: {static} (browser.allow_private can name it)", now)
        if literal is not None:
            return _Answer([str(literal)], None, now)
        found = await self.resolve(host)
        for text in found:
            try:
                address = ipaddress.ip_address(text.split("%", 1)[0])
            except ValueError:
                return _Answer([], f"{url}: {host} resolved to unreadable {text!r}", now)
            reason = check_address(address)
            if reason:
                why = f"{url}: {host} resolves to {reason} (browser.allow_private can name it)"
                return _Answer([], why, now)
        return _Answer(found, None, now)


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
