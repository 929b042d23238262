"""SSRF guard: address and URL checks, the guarded resolver and guarded fetches.

No real DNS or internet: servers run on 127.0.0.1 and names are resolved by
fakes or a monkeypatched resolver.
"""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from habakkuk.tools.netguard import (
    FetchError,
    GuardedResolver,
    SSRFError,
    check_address,
    check_url,
    fetch_guarded,
    guarded_session,
)
from habakkuk.tools.special_ranges import SPECIAL_RANGES

# --------------------------------------------------------------------------- addresses

REFUSED_ADDRESSES = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.5.4", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("169.254.1.1", "link-local"),
    ("169.254.169.254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "documentation"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fd00:ec2::254", "metadata"),
    ("ff02::1", "multicast"),
    ("::ffff:127.0.0.1", "IPv4-mapped"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "metadata"),
    ("64:ff9b::7f00:1", "NAT64"),
    ("64:ff9b::a9fe:a9fe", "metadata"),
    ("64:ff9b::c0a8:101", "private"),
    ("2002:7f00:1::1", "6to4"),
    ("2002:c0a8:101::1", "private"),
    ("2002:a9fe:a9fe::", "metadata"),
]

PUBLIC_ADDRESSES = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",
    "100.128.0.1",
    "172.32.0.1",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("address", "word"), REFUSED_ADDRESSES)
def test_non_public_address_is_refused_with_its_kind(address: str, word: str) -> None:
    reason = check_address(ipaddress.ip_address(address))
    assert reason is not None
    assert word in reason
    assert "\n" not in reason


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_address_is_allowed(address: str) -> None:
    assert check_address(ipaddress.ip_address(address)) is None


# Every special-purpose range (IANA IPv4 and IPv6 special registries, multicast, reserved
# space) with the verdict for outbound fetches, written out here independently of the module's
# table. Embedding forms (mapped, NAT64, 6to4, Teredo) are refused at both ends because their
# first and last addresses carry 0.0.0.0 and 255.255.255.255.
BLOCK, PASS = True, False
SPECIAL_RANGE_VERDICTS = [
    ("0.0.0.0/8", BLOCK),
    ("0.0.0.0/32", BLOCK),
    ("10.0.0.0/8", BLOCK),
    ("100.64.0.0/10", BLOCK),
    ("127.0.0.0/8", BLOCK),
    ("169.254.0.0/16", BLOCK),
    ("172.16.0.0/12", BLOCK),
    ("192.0.0.0/24", BLOCK),
    ("192.0.0.0/29", BLOCK),
    ("192.0.0.8/32", BLOCK),
    ("192.0.0.9/32", BLOCK),
    ("192.0.0.10/32", BLOCK),
    ("192.0.0.170/32", BLOCK),
    ("192.0.0.171/32", BLOCK),
    ("192.0.2.0/24", BLOCK),
    ("192.31.196.0/24", PASS),
    ("192.52.193.0/24", PASS),
    ("192.88.99.0/24", BLOCK),
    ("192.88.99.2/32", BLOCK),
    ("192.168.0.0/16", BLOCK),
    ("192.175.48.0/24", PASS),
    ("198.18.0.0/15", BLOCK),
    ("198.51.100.0/24", BLOCK),
    ("203.0.113.0/24", BLOCK),
    ("224.0.0.0/4", BLOCK),
    ("240.0.0.0/4", BLOCK),
    ("255.255.255.255/32", BLOCK),
    ("::/8", BLOCK),
    ("::/96", BLOCK),
    ("::/128", BLOCK),
    ("::1/128", BLOCK),
    ("::ffff:0:0/96", BLOCK),
    ("64:ff9b::/96", BLOCK),
    ("64:ff9b:1::/48", BLOCK),
    ("100::/64", BLOCK),
    ("100:0:0:1::/64", BLOCK),
    ("2001::/23", BLOCK),
    ("2001::/32", BLOCK),
    ("2001:1::1/128", BLOCK),
    ("2001:1::2/128", BLOCK),
    ("2001:1::3/128", BLOCK),
    ("2001:2::/48", BLOCK),
    ("2001:3::/32", PASS),
    ("2001:4:112::/48", PASS),
    ("2001:10::/28", BLOCK),
    ("2001:20::/28", BLOCK),
    ("2001:30::/28", BLOCK),
    ("2001:db8::/32", BLOCK),
    ("2002::/16", BLOCK),
    ("2620:4f:8000::/48", PASS),
    ("3fff::/20", BLOCK),
    ("5f00::/16", BLOCK),
    ("fc00::/7", BLOCK),
    ("fe80::/10", BLOCK),
    ("fec0::/10", BLOCK),
    ("ff00::/8", BLOCK),
]


def _range_ends() -> list[tuple[str, bool]]:
    ends = []
    for cidr, blocked in SPECIAL_RANGE_VERDICTS:
        net = ipaddress.ip_network(cidr)
        ends += [(str(net.network_address), blocked), (str(net.broadcast_address), blocked)]
    return ends


def test_every_special_range_in_the_table_has_a_verdict_here() -> None:
    assert {str(row.network) for row in SPECIAL_RANGES} == {
        str(ipaddress.ip_network(cidr)) for cidr, _ in SPECIAL_RANGE_VERDICTS
    }


def test_first_and_last_address_of_every_special_range_get_its_verdict() -> None:
    wrong = [
        (address, "should be refused" if blocked else "should pass")
        for address, blocked in _range_ends()
        if (check_address(ipaddress.ip_address(address)) is not None) != blocked
    ]
    assert not wrong, "; ".join(f"{address} {verdict}" for address, verdict in wrong)


@pytest.mark.parametrize(
    ("address", "word"),
    [
        ("192.88.99.1", "6to4 relay"),
        ("192.0.0.100", "IETF protocol assignment"),
        ("192.0.0.9", "PCP anycast"),
        ("3fff::1", "documentation"),
        ("3fff:fff:ffff::1", "documentation"),
        ("5f00::1", "SRv6"),
        ("2001:20::1", "ORCHID"),
        ("::a00:1", "IPv4-compatible"),
        ("4000::1", "global unicast"),
        ("2001:0:808:808::f5ff:fefe", "Teredo form of 10.0.1.1"),
        ("2001:0:a00:1::f7f7:f7f7", "Teredo form of 10.0.0.1"),
        ("::ffff:192.88.99.1", "IPv4-mapped form of 192.88.99.1"),
        ("64:ff9b::c000:0201", "documentation"),
        ("2002:c058:6301::", "6to4 relay"),
    ],
)
def test_ranges_missing_from_the_standard_library_tables_are_refused(
    address: str, word: str
) -> None:
    reason = check_address(ipaddress.ip_address(address))
    assert reason is not None and word in reason


@pytest.mark.parametrize(
    "address",
    ["9.9.9.9", "192.0.1.1", "192.88.98.255", "198.20.0.1", "223.255.255.254",
     "2a00:1450:4001::200e", "2001:200::1", "3000::1", "2001:0:808:808::f7f7:f7f7"],
)  # fmt: skip
def test_ordinary_public_addresses_next_to_special_ranges_pass(address: str) -> None:
    assert check_address(ipaddress.ip_address(address)) is None


# --------------------------------------------------------------------------- URLs

REFUSED_URLS = [
    ("ftp://example.com/x", "http and https"),
    ("file:///etc/passwd", "http and https"),
    ("gopher://example.com/", "http and https"),
    ("example.com/page", "http and https"),
    ("http:///path", "no host"),
    ("http://[::1/", "invalid URL"),
    ("http://localhost/", "localhost"),
    ("http://LOCALHOST./", "localhost"),
    ("http://api.localhost:8080/x", "localhost"),
    ("http://127.0.0.1/", "loopback"),
    ("http://127.0.0.1.:8080/", "loopback"),
    ("https://[::1]:8443/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0/", "unspecified"),
    ("http://10.0.0.1:9200/_search", "private"),
    ("http://user:pw@192.168.0.1/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("http://[64:ff9b::a9fe:a9fe]/", "metadata"),
    ("http://a b/", "host name"),
]


@pytest.mark.parametrize(("url", "word"), REFUSED_URLS)
def test_url_is_refused_with_a_clear_reason(url: str, word: str) -> None:
    reason = check_url(url)
    assert reason is not None
    assert word in reason
    assert "\n" not in reason


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/",
        "HTTP://Example.COM/path?q=1",
        "http://93.184.216.34:8080/",
        "https://[2606:4700:4700::1111]/",
        "https://bücher.example/",
        "http://localhost.example.com/",
    ],
)
def test_public_url_passes_static_checks(url: str) -> None:
    assert check_url(url) is None


def test_static_checks_do_not_import_aiohttp() -> None:
    code = (
        "import sys\n"
        "from habakkuk.tools.netguard import check_url, check_address\n"
        "assert check_url('http://127.0.0.1/') is not None\n"
        "print('aiohttp' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- resolver


def _info(host: str, address: str, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return {
        "hostname": host,
        "host": address,
        "port": port,
        "family": family,
        "proto": 0,
        "flags": socket.AI_NUMERICHOST,
    }


class MapResolver(AbstractResolver):
    """Fake DNS: a fixed name -> addresses table."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host not in self.table:
            raise OSError(f"no such host {host}")
        return [_info(host, address, port) for address in self.table[host]]

    async def close(self) -> None:
        self.closed = True


async def test_resolver_refuses_a_name_that_resolves_to_loopback() -> None:
    resolver = GuardedResolver(MapResolver({"evil.example": ["127.0.0.1"]}))
    with pytest.raises(SSRFError, match=r"evil\.example.*127\.0\.0\.1.*loopback"):
        await resolver.resolve("evil.example", 80)


async def test_resolver_refuses_when_any_of_several_addresses_is_private() -> None:
    resolver = GuardedResolver(MapResolver({"mixed.example": ["8.8.8.8", "10.0.0.7"]}))
    with pytest.raises(SSRFError, match=r"10\.0\.0\.7"):
        await resolver.resolve("mixed.example", 443)


async def test_resolver_refuses_ipv4_mapped_and_zoned_link_local_answers() -> None:
    resolver = GuardedResolver(
        MapResolver({"m.example": ["::ffff:169.254.169.254"], "z.example": ["fe80::1%eth0"]})
    )
    with pytest.raises(SSRFError, match="metadata"):
        await resolver.resolve("m.example", 80)
    with pytest.raises(SSRFError, match="link-local"):
        await resolver.resolve("z.example", 80)


async def test_resolver_passes_public_answers_through_and_closes_inner() -> None:
    inner = MapResolver({"good.example": ["93.184.216.34", "2606:4700:4700::1111"]})
    resolver = GuardedResolver(inner)
    infos = await resolver.resolve("good.example", 443)
    assert [i["host"] for i in infos] == ["93.184.216.34", "2606:4700:4700::1111"]
    assert all(i["port"] == 443 for i in infos)
    await resolver.close()
    assert inner.closed


def test_guarded_resolver_is_an_aiohttp_resolver() -> None:
    assert issubclass(GuardedResolver, AbstractResolver)
    assert issubclass(SSRFError, OSError)


# --------------------------------------------------------------------------- local server


@dataclass
class Server:
    port: int
    hits: list[str] = field(default_factory=list)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server(port=0)

    async def record(request: web.Request) -> None:
        state.hits.append(request.path)

    async def page(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(text="hello world", content_type="text/plain", charset="utf-8")

    async def big(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(body=b"x" * 300_000, content_type="application/octet-stream")

    async def redirect(request: web.Request) -> web.Response:
        await record(request)
        target = request.query["to"]
        status = int(request.query.get("status", "302"))
        return web.Response(status=status, headers={"Location": target})

    async def loop(request: web.Request) -> web.Response:
        await record(request)
        n = int(request.match_info["n"])
        return web.Response(status=302, headers={"Location": f"/loop/{n + 1}"})

    async def secret(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(text="internal secret")

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/big", big)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/loop/{n}", loop)
    app.router.add_get("/secret", secret)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        await runner.cleanup()


# --------------------------------------------------------------------------- allow_private


async def test_allow_private_fetches_a_local_page(server: Server) -> None:
    result = await fetch_guarded(server.url("/page"), allow_private=True)
    assert result.status == 200
    assert result.body == b"hello world"
    assert result.text() == "hello world"
    assert result.content_type == "text/plain"
    assert result.charset == "utf-8"
    assert result.truncated is False
    assert result.url == server.url("/page")
    assert result.redirects == []


async def test_redirect_chain_is_followed_by_hand(server: Server) -> None:
    hop2 = server.url("/redirect?to=/page&status=301")
    start = server.url("/redirect?" + f"to={hop2.replace('&', '%26').replace('?', '%3F')}")
    result = await fetch_guarded(start, allow_private=True)
    assert result.status == 200
    assert result.body == b"hello world"
    assert result.url == server.url("/page")
    assert len(result.redirects) == 2
    assert server.hits == ["/redirect", "/redirect", "/page"]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_each_redirect_status_is_followed(server: Server, status: int) -> None:
    result = await fetch_guarded(
        server.url(f"/redirect?to=/page&status={status}"), allow_private=True
    )
    assert result.body == b"hello world"


async def test_too_many_redirects_is_an_error(server: Server) -> None:
    with pytest.raises(FetchError, match="too many redirects"):
        await fetch_guarded(server.url("/loop/0"), allow_private=True, max_redirects=3)
    assert server.hits == ["/loop/0", "/loop/1", "/loop/2", "/loop/3"]


async def test_redirects_up_to_the_limit_are_followed(server: Server) -> None:
    start = server.url("/redirect?to=/redirect%3Fto%3D/page")
    result = await fetch_guarded(start, allow_private=True, max_redirects=2)
    assert result.body == b"hello world"


async def test_body_is_capped_and_marked_truncated(server: Server) -> None:
    result = await fetch_guarded(server.url("/big"), allow_private=True, max_bytes=1000)
    assert result.body == b"x" * 1000
    assert result.truncated is True
    whole = await fetch_guarded(server.url("/big"), allow_private=True, max_bytes=300_000)
    assert len(whole.body) == 300_000
    assert whole.truncated is False


async def test_redirect_to_another_scheme_is_refused_even_when_private_allowed(
    server: Server,
) -> None:
    with pytest.raises(SSRFError, match="http and https"):
        await fetch_guarded(server.url("/redirect?to=file:///etc/passwd"), allow_private=True)


async def test_guarded_session_ignores_proxy_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A "proxy" that would answer differently: the request must not go through it.
    proxy_hits: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        proxy_hits.append(str(request.url))
        return web.Response(text="from proxy")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    proxy_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy_url)
    try:
        result = await fetch_guarded(server.url("/page"), allow_private=True)
        session = guarded_session()
        try:
            assert session.trust_env is False
        finally:
            await session.close()
    finally:
        await runner.cleanup()
    assert result.body == b"hello world"
    assert proxy_hits == []


# --------------------------------------------------------------------------- guarded mode


async def test_guarded_fetch_refuses_loopback_before_connecting(server: Server) -> None:
    with pytest.raises(SSRFError, match="loopback"):
        await fetch_guarded(server.url("/page"))
    assert server.hits == []


async def test_guarded_fetch_refuses_numeric_loopback_spelling(server: Server) -> None:
    with pytest.raises(SSRFError, match="loopback"):
        await fetch_guarded(f"http://2130706433:{server.port}/page")
    assert server.hits == []


async def test_guarded_fetch_refuses_a_name_resolving_to_loopback(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_resolve = ThreadedResolver.resolve

    async def fake_resolve(
        self: ThreadedResolver,
        host: str,
        port: int = 0,
        family: socket.AddressFamily = socket.AF_INET,
    ) -> list[ResolveResult]:
        if host == "evil.example":
            return [_info(host, "127.0.0.1", port)]
        return await real_resolve(self, host, port, family)

    monkeypatch.setattr(ThreadedResolver, "resolve", fake_resolve)
    assert check_url(server.url("/page", host="evil.example")) is None
    with pytest.raises(SSRFError, match=r"evil\.example.*loopback"):
        await fetch_guarded(server.url("/page", host="evil.example"))
    assert server.hits == []


async def test_guarded_session_refuses_literal_private_hosts_on_direct_use(
    server: Server,
) -> None:
    session = guarded_session()
    try:
        with pytest.raises(aiohttp.ClientError) as info:
            await session.get(server.url("/page"))
    finally:
        await session.close()
    assert isinstance(info.value.__cause__, SSRFError)
    assert server.hits == []


class PublicLookingResolver(AbstractResolver):
    """Treats public.example as a public host that happens to be our local server;
    every other name goes through the real guard (with fake DNS behind it)."""

    def __init__(self) -> None:
        self.guard = GuardedResolver(MapResolver({"evil.example": ["127.0.0.1"]}))

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host == "public.example":
            return [_info(host, "127.0.0.1", port)]
        result: list[ResolveResult] = await self.guard.resolve(host, port, family)
        return result

    async def close(self) -> None:
        await self.guard.close()


@pytest.fixture
async def public_session() -> AsyncIterator[aiohttp.ClientSession]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(resolver=PublicLookingResolver()), trust_env=False
    )
    try:
        yield session
    finally:
        await session.close()


async def test_fetch_through_public_looking_host_works(
    server: Server, public_session: aiohttp.ClientSession
) -> None:
    result = await fetch_guarded(server.url("/page", host="public.example"), session=public_session)
    assert result.body == b"hello world"


@pytest.mark.parametrize(
    ("target_host", "word"),
    [("127.0.0.1", "loopback"), ("localhost", "localhost"), ("evil.example", "loopback")],
)
async def test_redirect_inward_is_refused(
    server: Server, public_session: aiohttp.ClientSession, target_host: str, word: str
) -> None:
    target = server.url("/secret", host=target_host)
    start = server.url(f"/redirect?to={target}", host="public.example")
    with pytest.raises(SSRFError, match=word):
        await fetch_guarded(start, session=public_session)
    assert server.hits == ["/redirect"]
