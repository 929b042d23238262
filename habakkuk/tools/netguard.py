"""SSRF guard for ``fetch_url``.

The model must not be able to make Habakkuk fetch from the machine it runs
on or from the private network around it (admin panels, databases, cloud
metadata endpoints holding credentials). Three layers:

* :func:`check_url` checks the URL first, for a clear message: scheme, host,
  literal addresses in every spelling resolvers accept, ``localhost`` names.
* :class:`GuardedResolver` checks every address a name resolves to, right
  before aiohttp connects, so a public name that resolves inward is refused.
* :func:`fetch_guarded` follows redirects itself and rechecks each hop.

The guarded client ignores proxy settings: through a proxy the real target
cannot be checked. ``allow_private=True`` (config ``tools.allow_private_urls``)
turns the address checks off.

Only the standard library is imported at module level; aiohttp and yarl are
imported when a fetch is made.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from habakkuk.tools.special_ranges import embedded_ipv4, outside_global_unicast, special_range

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver, ResolveResult
    from yarl import URL

__all__ = [
    "FetchError",
    "FetchResult",
    "GuardedResolver",
    "SSRFError",
    "check_address",
    "check_url",
    "fetch_guarded",
    "guarded_session",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_USER_AGENT = "Habakkuk/0.1 (fetch_url)"


class SSRFError(OSError):
    """A request was refused because its target is not a public internet address."""


class FetchError(Exception):
    """A guarded fetch could not complete (too many redirects, bad redirect target)."""


# ---------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------

_METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {
        ipaddress.IPv4Address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.IPv4Address("169.254.170.2"),  # AWS ECS task metadata
        ipaddress.IPv4Address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.IPv4Address("168.63.129.16"),  # Azure wire server (a public-looking address)
        ipaddress.IPv6Address("fd00:ec2::254"),  # AWS IMDS over IPv6
    }
)
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "instance-data"})


def _classify_v4(ip: ipaddress.IPv4Address) -> str | None:
    """Why an IPv4 address is not a public target (a noun phrase), or None."""
    if ip in _METADATA_ADDRESSES:
        return "a cloud metadata address"
    row = special_range(ip)
    if row is not None:
        return f"{row.kind} in {row.network} ({row.source})" if row.blocked else None
    # Not in our table: a range newer than it may still be known to ipaddress.
    if not ip.is_global:
        return "a special-purpose, non-public address"
    return None


def _classify_v6(ip: ipaddress.IPv6Address) -> str | None:
    """Why an IPv6 address is not a public target (a noun phrase), or None."""
    if ip in _METADATA_ADDRESSES:
        return "a cloud metadata address"
    row = special_range(ip)
    if row is not None and row.embeds is not None:
        # Forms that carry an IPv4 address: the embedded address is what gets reached.
        for v4 in embedded_ipv4(row, ip):
            inner = _classify_v4(v4)
            if inner:
                return f"{row.kind} form of {v4}, {inner}"
        return None
    if row is not None:
        return f"{row.kind} in {row.network} ({row.source})" if row.blocked else None
    if outside_global_unicast(ip):
        return "an address outside the global unicast space (2000::/3)"
    if not ip.is_global:
        return "a special-purpose, non-public address"
    return None


def check_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Return why ``ip`` may not be fetched from, or None for a public address.

    Refused: cloud metadata endpoints and every range of our own table of
    IANA special-purpose addresses (:mod:`habakkuk.tools.special_ranges`) that
    is not globally reachable (loopback, private, carrier-grade NAT,
    link-local, documentation, benchmarking, multicast, reserved, broadcast,
    ...), also when wrapped in an IPv4-mapped, NAT64, 6to4 or Teredo address.
    """
    phrase = _classify_v4(ip) if isinstance(ip, ipaddress.IPv4Address) else _classify_v6(ip)
    return f"{ip} is {phrase}" if phrase else None


def _parse_address(text: str) -> IPAddress | None:
    """An address from resolver output or a URL host (IPv6 zone ids stripped)."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


# inet_aton() accepts 1-4 parts, each decimal, octal (leading 0) or hex (0x).
_INET_ATON_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def _aton_part(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    return int(part, 8) if part.startswith("0") else int(part)


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """Decode the legacy numeric IPv4 spellings (2130706433, 0x7f.1, 0177.0.0.1)."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.fullmatch(p) for p in parts):
        return None
    values = [_aton_part(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = 0
    for v in head:
        number = number << 8 | v
    return ipaddress.IPv4Address(number << (8 * (4 - len(head))) | last)


# ---------------------------------------------------------------------------
# URLs
# ---------------------------------------------------------------------------

_HOSTNAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")


def _check_form(url: URL, text: str) -> str | None:
    """Scheme and host presence: checked even when private addresses are allowed."""
    scheme = url.scheme.lower()
    if scheme not in ("http", "https"):
        what = f"{scheme}:" if scheme else "a URL without a scheme"
        return f"only http and https URLs can be fetched, not {what} ({text})"
    if not url.raw_host:
        return f"URL has no host: {text}"
    return None


def _check_host(raw_host: str) -> str | None:
    host = raw_host.lower()
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]  # a fully qualified name: same host
    ip = _parse_address(host) if ":" in host else None
    if ip is None:
        try:
            ip = ipaddress.IPv4Address(host)
        except ValueError:
            ip = _inet_aton(host)
    if ip is not None:
        return check_address(ip)
    if host == "localhost" or host.endswith(".localhost"):
        return f"{raw_host} is a localhost name"
    if host in _METADATA_NAMES:
        return f"{raw_host} is a cloud metadata name"
    if not _HOSTNAME.fullmatch(host):
        return f"{raw_host!r} is not a valid host name"
    return None


def _parse_url(url: str) -> tuple[URL | None, str | None]:
    from yarl import URL

    try:
        return URL(url), None
    except (ValueError, TypeError) as exc:
        return None, f"invalid URL {url!r}: {exc}"


def check_url(url: str) -> str | None:
    """Return why ``url`` may not be fetched, or None when it passes the static checks.

    Only http and https with a host are accepted; hosts that are literal
    addresses (in any spelling a resolver accepts, e.g. ``2130706433`` or
    ``0x7f.1``) are checked with :func:`check_address`, and ``localhost`` and
    ``*.localhost`` are refused. Names are not resolved here: the resolver
    checks where they lead when the connection is made.
    """
    parsed, error = _parse_url(url)
    if parsed is None:
        return error
    return _check_form(parsed, url) or _check_host(parsed.raw_host or "")


# ---------------------------------------------------------------------------
# aiohttp parts (imported lazily)
# ---------------------------------------------------------------------------

if TYPE_CHECKING:
    # The runtime class is built on first use so that importing this module does
    # not import aiohttp; this declaration gives type checkers its shape.
    class GuardedResolver(AbstractResolver):
        def __init__(self, inner: AbstractResolver | None = None) -> None: ...

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]: ...

        async def close(self) -> None: ...


def __getattr__(name: str) -> Any:
    if name == "GuardedResolver":
        return _guarded_resolver_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _guarded_resolver_class() -> type[AbstractResolver]:
    from aiohttp.abc import AbstractResolver
    from aiohttp.resolver import ThreadedResolver

    class GuardedResolver(AbstractResolver):
        """Resolver that refuses a name when ANY address it resolves to is not public.

        Wraps ``inner`` (aiohttp's ThreadedResolver by default) and raises
        :class:`SSRFError` after resolution, before aiohttp connects, so a
        public-looking name that points inward is refused at connect time.
        Checking every address (not just the first) matters: aiohttp may try
        each of them.
        """

        def __init__(self, inner: AbstractResolver | None = None) -> None:
            # ThreadedResolver wants a running loop, so it is made on first use.
            self._inner = inner

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            if self._inner is None:
                self._inner = ThreadedResolver()
            infos = await self._inner.resolve(host, port, family)
            for info in infos:
                address = _parse_address(info["host"])
                if address is None:
                    raise SSRFError(f"refused {host}: resolver gave unreadable {info['host']!r}")
                reason = check_address(address)
                if reason:
                    raise SSRFError(f"refused {host}: it resolves to {reason}")
            return infos

        async def close(self) -> None:
            if self._inner is not None:
                await self._inner.close()

    GuardedResolver.__module__ = __name__
    GuardedResolver.__qualname__ = "GuardedResolver"
    return GuardedResolver


async def _literal_host_guard(
    request: aiohttp.ClientRequest,
    handler: Any,
) -> aiohttp.ClientResponse:
    """Session middleware: aiohttp skips the resolver for literal IPs, so check each request."""
    reason = check_url(str(request.url))
    if reason:
        raise SSRFError(f"refused {request.url}: {reason}")
    response: aiohttp.ClientResponse = await handler(request)
    return response


def guarded_session(*, allow_private: bool = False, timeout: float = 30) -> aiohttp.ClientSession:
    """An aiohttp session for fetching untrusted URLs.

    Proxy settings from the environment are ignored (``trust_env=False``):
    through a proxy the real target cannot be checked. Unless
    ``allow_private``, every request URL is checked (literal addresses never
    reach the resolver) and every resolved address goes through
    :class:`GuardedResolver`. Must be called with an event loop running.
    """
    import aiohttp

    if allow_private:
        connector = aiohttp.TCPConnector()
        middlewares: tuple[Any, ...] = ()
    else:
        connector = aiohttp.TCPConnector(resolver=_guarded_resolver_class()())
        middlewares = (_literal_host_guard,)
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=timeout),
        headers={"User-Agent": _USER_AGENT},
        middlewares=middlewares,
    )


@dataclass
class FetchResult:
    """Outcome of :func:`fetch_guarded`."""

    url: str  # final URL, after redirects
    status: int
    content_type: str  # media type without parameters, e.g. "text/html"
    charset: str | None
    body: bytes  # at most max_bytes
    truncated: bool  # the body was longer than max_bytes
    redirects: list[str] = field(default_factory=list)  # URLs that redirected, in order

    def text(self) -> str:
        """The body decoded with the declared charset (UTF-8 if none), never raising."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # unknown charset name
            return self.body.decode("utf-8", errors="replace")


def _ssrf_cause(exc: BaseException) -> SSRFError | None:
    """The SSRFError that aiohttp wrapped (in ClientConnectorError / ClientOSError), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, SSRFError):
            return current
        seen.add(id(current))
        os_error = getattr(current, "os_error", None)
        if isinstance(os_error, SSRFError):
            return os_error
        current = current.__cause__ or current.__context__
    return None


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        room = max_bytes - total
        if len(chunk) > room:
            chunks.append(chunk[:room])
            return b"".join(chunks), True
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks), False


async def fetch_guarded(
    url: str,
    *,
    allow_private: bool = False,
    max_bytes: int = 2_000_000,
    max_redirects: int = 5,
    timeout: float = 30,
    session: aiohttp.ClientSession | None = None,
) -> FetchResult:
    """GET ``url`` with the SSRF guard, following up to ``max_redirects`` redirects by hand.

    Each hop's URL is checked with :func:`check_url` and its connection goes
    through :class:`GuardedResolver`. The body is read up to ``max_bytes``
    (``truncated`` says whether there was more). ``allow_private`` turns the
    address checks off (scheme and host are still required). ``session``
    replaces the guarded session made here (its connector is then
    responsible for connect-time checks); it is not closed.

    Raises :class:`SSRFError` when a target is refused, :class:`FetchError`
    for too many or malformed redirects, and aiohttp's ``ClientError`` or
    ``TimeoutError`` for network failures.
    """
    import aiohttp
    from yarl import URL

    def refusal(target: str) -> str | None:
        parsed, error = _parse_url(target)
        if parsed is None:
            return error
        form = _check_form(parsed, target)
        if form or allow_private:
            return form
        return _check_host(parsed.raw_host or "")

    reason = refusal(url)
    if reason:
        raise SSRFError(f"refused {url}: {reason}")
    own_session = session is None
    client = (
        session
        if session is not None
        else guarded_session(allow_private=allow_private, timeout=timeout)
    )
    current = URL(url)
    redirects: list[str] = []
    try:
        while True:
            try:
                async with client.get(
                    current,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=timeout),
                ) as response:
                    location = response.headers.get("Location")
                    if response.status in _REDIRECT_STATUSES and location:
                        if len(redirects) >= max_redirects:
                            raise FetchError(
                                f"too many redirects fetching {url} (limit {max_redirects})"
                            )
                        try:
                            target = response.url.join(URL(location))
                        except ValueError as exc:
                            raise FetchError(
                                f"bad redirect from {response.url} to {location!r}: {exc}"
                            ) from None
                        reason = refusal(str(target))
                        if reason:
                            raise SSRFError(
                                f"refused redirect from {response.url} to {target}: {reason}"
                            )
                        redirects.append(str(response.url))
                        current = target
                        continue
                    body, truncated = await _read_capped(response, max_bytes)
                    return FetchResult(
                        url=str(response.url),
                        status=response.status,
                        content_type=response.content_type,
                        charset=response.charset,
                        body=body,
                        truncated=truncated,
                        redirects=redirects,
                    )
            except aiohttp.ClientError as exc:
                cause = _ssrf_cause(exc)
                if cause is not None:
                    raise SSRFError(str(cause)) from exc
                raise
    finally:
        if own_session:
            await client.close()


async def fetch_for_tool(
    tool: str, url: str, *, allow_private: bool, max_bytes: int, timeout: float
) -> FetchResult:
    """`fetch_guarded` for tool `tool`: every refusal or failure is its one-line ToolError
    (what the model reads), so each web-reading tool words them the same way."""
    import aiohttp

    from habakkuk.engine.toolkit.registry import ToolError

    try:
        return await fetch_guarded(
            url, allow_private=allow_private, max_bytes=max_bytes, timeout=timeout
        )
    except SSRFError as exc:
        raise ToolError(
            f"{tool}: {exc} (private and local addresses are refused unless "
            "tools.allow_private_urls is set)"
        ) from None
    except FetchError as exc:
        raise ToolError(f"{tool}: {exc}") from None
    except TimeoutError:
        raise ToolError(f"{tool}: {url} did not answer within {timeout:g}s") from None
    except (aiohttp.ClientError, ValueError) as exc:
        raise ToolError(f"{tool}: cannot fetch {url}: {exc or type(exc).__name__}") from None
