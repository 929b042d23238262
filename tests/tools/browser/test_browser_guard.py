"""The browser's URL guard and its pinning proxy, without a browser: the SSRF corpus of
the fetch tool, allow_private patterns, blocked and allowed URLs, DNS answers checked and
pinned (a rebinding answer never reaches a socket)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from habakkuk.tools.browser.guard import UrlGuard
from habakkuk.tools.browser.pinproxy import PinningProxy, open_tcp
from tests.helpers import PROCESS_BOUND
from tests.tools.test_netguard import REFUSED_ADDRESSES, REFUSED_URLS

HTTP_REFUSED = [url for url, _ in REFUSED_URLS if url.startswith(("http://", "https://"))]


class Resolver:
    """A DNS of the test's own: answers by name, in turn (the last answer repeats)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str) -> list[str]:
        self.asked.append(host)
        queue = self.answers.get(host, [[]])
        return queue.pop(0) if len(queue) > 1 else queue[0]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("url", HTTP_REFUSED)
async def test_every_http_url_of_the_fetch_corpus_is_refused(url: str) -> None:
    guard = UrlGuard(resolve=Resolver({}))
    assert await guard.check(url, document=True)
    assert await guard.check(url, document=False)


@pytest.mark.parametrize(("address", "kind"), REFUSED_ADDRESSES)
async def test_a_name_resolving_to_any_refused_address_is_refused(address: str, kind: str) -> None:
    guard = UrlGuard(resolve=Resolver({"inward.example": [["93.184.216.34", address]]}))
    reason = await guard.check("https://inward.example/x", document=True)
    assert reason is not None and "inward.example resolves to" in reason


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "chrome://settings", "javascript:alert(1)", "ftp://example.com/"],
)
async def test_file_chrome_and_javascript_urls_are_refused_outright(url: str) -> None:
    guard = UrlGuard(allow_private=["*"], resolve=Resolver({}))
    reason = await guard.check(url, document=True)
    assert reason is not None and "URLs are refused" in reason


async def test_page_local_schemes_pass() -> None:
    guard = UrlGuard(resolve=Resolver({}))
    for url in ("about:blank", "data:text/html,hi", "blob:https://example.com/1"):
        assert await guard.check(url, document=True) is None


async def test_allow_private_lets_only_the_hosts_it_names_in() -> None:
    guard = UrlGuard(
        allow_private=["127.0.0.1", "*.lan"],
        resolve=Resolver({"nas.lan": [["192.168.1.5"]], "other.example": [["10.0.0.1"]]}),
    )
    assert await guard.check("http://127.0.0.1:8080/", document=True) is None
    assert await guard.check("http://nas.lan/", document=True) is None
    assert await guard.check("http://127.0.0.2:8080/", document=True)
    assert await guard.check("http://localhost:8080/", document=True)
    assert await guard.check("http://other.example/", document=True)


async def test_blocked_urls_refuse_every_request_and_allowed_urls_only_documents() -> None:
    public = Resolver({"shop.example": [["93.184.216.34"]], "cdn.example": [["93.184.216.35"]]})
    guard = UrlGuard(
        allowed_urls=["https://shop.example/*"],
        blocked_urls=["*/ads/*"],
        resolve=public,
    )
    assert await guard.check("https://shop.example/menu", document=True) is None
    assert await guard.check("https://cdn.example/app.js", document=False) is None
    refused = await guard.check("https://cdn.example/page", document=True)
    assert refused is not None and "allowed_urls" in refused
    blocked = await guard.check("https://shop.example/ads/1.js", document=False)
    assert blocked is not None and "blocked_urls" in blocked


async def test_a_name_that_does_not_resolve_is_let_through_for_the_browser_to_fail() -> None:
    guard = UrlGuard(resolve=Resolver({}))
    assert await guard.check("https://no-such-name.example/", document=True) is None
    assert await guard.addresses("no-such-name.example") == []


async def test_answers_are_pinned_for_thirty_seconds_then_checked_again() -> None:
    clock = Clock()
    dns = Resolver({"rebind.example": [["93.184.216.34"], ["127.0.0.1"]]})
    guard = UrlGuard(resolve=dns, clock=clock)
    assert await guard.check("https://rebind.example/", document=True) is None
    # DNS now answers loopback, but within 30s the checked answer is what is used.
    assert await guard.addresses("rebind.example") == ["93.184.216.34"]
    assert dns.asked == ["rebind.example"]
    clock.now += 31
    reason = await guard.check("https://rebind.example/", document=True)
    assert reason is not None and "loopback" in reason


# ----------------------------------------------------------------------- the pinning proxy


@pytest.fixture
async def origin() -> AsyncIterator[tuple[int, list[str]]]:
    hits: list[str] = []

    async def page(request: web.Request) -> web.Response:
        hits.append(f"{request.host} {request.path_qs}")
        return web.Response(text="secret")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1], hits
    finally:
        await runner.cleanup()


async def _through(proxy: PinningProxy, head: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(head.encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


async def test_the_proxy_dials_the_address_the_guard_checked_not_a_new_answer(
    origin: tuple[int, list[str]],
) -> None:
    port, hits = origin
    dialled: list[str] = []
    dns = Resolver({"pinned.example": [["127.0.0.1"], ["10.9.9.9"]]})

    async def connect(address: str, to: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        dialled.append(address)
        return await open_tcp(address, to)

    guard = UrlGuard(allow_private=["pinned.example"], resolve=dns)
    proxy = PinningProxy(guard, connect)
    await proxy.start()
    try:
        assert await guard.check(f"http://pinned.example:{port}/a", document=True) is None
        head = f"GET http://pinned.example:{port}/a?x=1 HTTP/1.1\r\nHost: pinned.example\r\n\r\n"
        answer = await _through(proxy, head)
        assert answer.startswith(b"HTTP/1.1 200")
        assert answer.endswith(b"secret")
        assert dialled == ["127.0.0.1"]
        assert dns.asked == ["pinned.example"]
        assert hits == ["pinned.example /a?x=1"]
    finally:
        await proxy.close()


async def test_the_proxy_refuses_inward_hosts_and_tunnels(origin: tuple[int, list[str]]) -> None:
    port, hits = origin
    guard = UrlGuard(resolve=Resolver({"inward.example": [["127.0.0.1"]]}))
    proxy = PinningProxy(guard)
    await proxy.start()
    try:
        for head in (
            f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n",
            f"GET http://inward.example:{port}/ HTTP/1.1\r\n\r\n",
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n",
            f"CONNECT [::1]:{port} HTTP/1.1\r\n\r\n",
            f"CONNECT localhost:{port} HTTP/1.1\r\n\r\n",
        ):
            answer = await _through(proxy, head)
            assert answer.startswith(b"HTTP/1.1 403"), head
        assert hits == []
        assert proxy.refused == 5
    finally:
        await proxy.close()


async def test_the_proxy_tunnels_to_an_allowed_host(origin: tuple[int, list[str]]) -> None:
    port, hits = origin
    proxy = PinningProxy(UrlGuard(allow_private=["127.0.0.1"], resolve=Resolver({})))
    await proxy.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await reader.read()).endswith(b"secret")
        writer.close()
        assert hits == ["x /tunnelled"]
    finally:
        await proxy.close()


@pytest.mark.parametrize("turns", range(6))
async def test_closing_the_proxy_cuts_a_connection_it_had_not_begun_to_read(turns: int) -> None:
    """A connection open when the proxy closes, before it sent its request (a browser's
    preconnect), is cut, not left open past the proxy: whether its handler was waiting for
    the request or had not run at all (so never to run its own clean-up). `turns` loop
    passes between connecting and closing sweep the moment the close lands."""
    proxy = PinningProxy(UrlGuard(allow_private=["127.0.0.1"], resolve=Resolver({})))
    await proxy.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        for _ in range(turns):
            await asyncio.sleep(0)
        await proxy.close()
        assert await asyncio.wait_for(reader.read(), PROCESS_BOUND) == b""
    finally:
        writer.close()
        await writer.wait_closed()
