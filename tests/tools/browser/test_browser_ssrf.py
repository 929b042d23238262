"""The fetch tool's SSRF corpus replayed through a real Chromium: navigations, redirects,
iframes, images, form posts, popups, fetch() from page scripts and from a worker, and
WebSocket handshakes. Every target is
refused: the guard never lets one through, and a canary server listening on every
loopback address on one port sees no request at all.

The test pages come from a name of the test's own (pages.test, resolved by the guard to
127.0.0.1 and named in allow_private), so 127.0.0.1 itself is as refused as in the
fetch tool's corpus.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from aiohttp import web

from habakkuk.engine.browser_config import BrowserConfig
from habakkuk.tools.browser.guard import UrlGuard
from tests.helpers import eventually, tool_context
from tests.tools.browser.conftest import Tools, make_fleet, needs_chromium
from tests.tools.browser.test_browser_guard import HTTP_REFUSED

pytestmark = [needs_chromium, pytest.mark.timeout(300)]

PAGES_HOST = "pages.test"


def canary_targets(port: int) -> list[str]:
    """Spellings of this machine's loopback (and a name resolving to it) on the canary."""
    return [
        f"http://127.0.0.1:{port}/t",
        f"http://127.0.0.2:{port}/t",
        f"http://localhost:{port}/t",
        f"http://api.localhost:{port}/t",
        f"http://[::1]:{port}/t",
        f"http://[::ffff:127.0.0.1]:{port}/t",
        f"http://2130706433:{port}/t",
        f"http://0x7f000002:{port}/t",
        f"http://0177.0.0.1:{port}/t",
        f"http://127.1:{port}/t",
        f"http://0.0.0.0:{port}/t",
        f"http://inward.test:{port}/t",
        f"https://127.0.0.1:{port}/t",
    ]


@dataclass
class RecordingGuard(UrlGuard):
    """The real guard, recording each decision."""

    decisions: list[tuple[str, str | None]] = field(default_factory=list)

    async def check(self, url: str, *, document: bool) -> str | None:
        reason = await super().check(url, document=document)
        self.decisions.append((url, reason))
        return reason


@dataclass
class Servers:
    pages: int
    canary: int
    canary_hits: list[str]


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    hits: list[str] = []

    async def canary(request: web.Request) -> web.Response:
        hits.append(f"{request.host}{request.path_qs}")
        return web.Response(text="<p>internal secret</p>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        targets = json.loads(request.query.get("targets", "[]"))
        kind = request.match_info["kind"]
        if kind == "redirect":
            return web.Response(status=302, headers={"Location": request.query["to"]})
        body = _vector_page(kind, targets)
        return web.Response(text=body, content_type="text/html")

    canary_app = web.Application()
    canary_app.router.add_route("*", "/{tail:.*}", canary)
    canary_runner = web.AppRunner(canary_app)
    await canary_runner.setup()
    await web.TCPSite(canary_runner, "0.0.0.0", 0).start()
    port = canary_runner.addresses[0][1]
    await web.TCPSite(canary_runner, "::1", port).start()
    pages_app = web.Application()
    pages_app.router.add_route("*", "/{kind}", page)
    pages_runner = web.AppRunner(pages_app)
    await pages_runner.setup()
    await web.TCPSite(pages_runner, "127.0.0.1", 0).start()
    try:
        yield Servers(pages_runner.addresses[0][1], port, hits)
    finally:
        await pages_runner.cleanup()
        await canary_runner.cleanup()


def _vector_page(kind: str, targets: list[str]) -> str:
    quoted = [html.escape(t, quote=True) for t in targets]
    if kind == "iframes":
        return "<title>iframes</title>" + "".join(f"<iframe src='{t}'></iframe>" for t in quoted)
    if kind == "images":
        return "<title>images</title>" + "".join(f"<img src='{t}'>" for t in quoted)
    if kind == "forms":
        forms = "".join(
            f"<iframe name='f{i}'></iframe><form target='f{i}' method='post' action='{t}'>"
            "<input name='a' value='1'></form>"
            for i, t in enumerate(quoted)
        )
        submit = "<script>for (const f of document.forms) f.submit();</script>"
        return f"<title>forms</title>{forms}{submit}"
    if kind == "fetch":
        script = (
            f"const urls = {json.dumps(targets)};"
            "Promise.allSettled(urls.map(u => fetch(u, {method: 'POST', mode: 'no-cors'})))"
            ".then(r => { document.body.textContent = 'fetched ' + r.length; });"
        )
        return f"<title>fetch</title><body>waiting</body><script>{script}</script>"
    if kind == "worker":
        code = (
            f"const urls = {json.dumps(targets)};"
            "Promise.allSettled(urls.map(u => fetch(u, {mode: 'no-cors'})))"
            ".then(r => postMessage('fetched ' + r.length));"
        )
        script = (
            f"const w = new Worker(URL.createObjectURL(new Blob([{json.dumps(code)}])));"
            "w.onmessage = e => { document.body.textContent = e.data; };"
        )
        return f"<title>worker</title><body>waiting</body><script>{script}</script>"
    if kind == "websockets":
        script = (
            f"const urls = {json.dumps(targets)};"
            "let ended = 0;"
            "for (const u of urls) { const s = new WebSocket(u);"
            " s.onerror = s.onclose = () => { if (++ended === urls.length)"
            " document.body.textContent = 'closed ' + ended; }; }"
        )
        return f"<title>websockets</title><body>waiting</body><script>{script}</script>"
    if kind == "popups":
        buttons = "".join(
            f"<button onclick=\"window.open('{t}')\">Open {i}</button>"
            for i, t in enumerate(quoted)
        )
        return f"<title>popups</title>{buttons}"
    return "<title>unknown</title>"


def _tagged(targets: list[str], kind: str) -> list[str]:
    return [f"{t}{'&' if '?' in t else '?'}v={kind}" for t in targets]


@pytest.fixture
async def guarded(tmp_path: Path, servers: Servers) -> AsyncIterator[tuple[Tools, RecordingGuard]]:
    async def resolve(host: str) -> list[str]:
        return {PAGES_HOST: ["127.0.0.1"], "inward.test": ["127.0.0.2"]}.get(host, [])

    guard = RecordingGuard(allow_private=[PAGES_HOST], resolve=resolve)
    fleet = make_fleet(tmp_path, BrowserConfig(allow_private=[PAGES_HOST]), lambda _: guard)
    try:
        yield Tools(fleet, tool_context(tmp_path)), guard
    finally:
        await fleet.close()


def _at_least(guard: RecordingGuard, kind: str, count: int) -> Callable[[], bool]:
    return lambda: _refused(guard, kind) >= count


def _refused(guard: RecordingGuard, kind: str) -> int:
    return sum(1 for url, reason in guard.decisions if reason and f"v={kind}" in url)


async def test_the_ssrf_corpus_is_refused_through_every_browser_path(
    guarded: tuple[Tools, RecordingGuard], servers: Servers
) -> None:
    tools, guard = guarded
    corpus = HTTP_REFUSED + canary_targets(servers.canary)
    base = f"http://{PAGES_HOST}:{servers.pages}"

    # Navigations: refused before the browser is asked.
    for url in corpus:
        out = await tools("browser_navigate", url=url)
        assert out.is_error and out.text.startswith("[blocked: "), url

    # Redirects: each hop is a request the interception checks.
    for url in _tagged(corpus, "redirect"):
        out = await tools("browser_navigate", url=f"{base}/redirect?to={quote(url, safe='')}")
        assert "[blocked: " in out.text or "did not load" in out.text, url

    for kind in ("iframes", "images", "forms", "fetch"):
        targets = json.dumps(_tagged(corpus, kind))
        await tools("browser_navigate", url=f"{base}/{kind}?targets={quote(targets)}")
        if kind == "fetch":
            await tools("browser_wait", text="fetched", seconds=30)
        await eventually(_at_least(guard, kind, 5), what=f"{kind} refusals")

    # A worker's fetch() and WebSocket handshakes: the proxy refuses what they open.
    targets = json.dumps(_tagged(canary_targets(servers.canary), "worker"))
    await tools("browser_navigate", url=f"{base}/worker?targets={quote(targets)}")
    assert "is on the page" in (await tools("browser_wait", text="fetched", seconds=30)).text
    sockets = [t.replace("http", "ws", 1) for t in canary_targets(servers.canary)]
    await tools("browser_navigate", url=f"{base}/websockets?targets={quote(json.dumps(sockets))}")
    assert "is on the page" in (await tools("browser_wait", text="closed", seconds=30)).text

    # Popups: one click each (the popup blocker lets one through per click).
    canary = _tagged(canary_targets(servers.canary), "popups")
    await tools("browser_navigate", url=f"{base}/popups?targets={quote(json.dumps(canary))}")
    for index in range(len(canary)):
        await tools("browser_tabs", action="select", index=0)
        snap = (await tools("browser_snapshot")).text
        ref = next(line for line in snap.splitlines() if f'"Open {index}"' in line)
        await tools("browser_click", ref=int(ref.rsplit("[ref=", 1)[1].rstrip("]")))
    await eventually(lambda: _refused(guard, "popups") >= len(canary) - 2, what="popup refusals")

    # Only a name with no DNS answer passes (http:///path is read as host "path"): the
    # browser then fails on its own, as the spec says, since the proxy has no address.
    let_through = {
        urlsplit(url).hostname
        for url, reason in guard.decisions
        if reason is None and urlsplit(url).scheme in ("http", "https")
    }
    assert let_through <= {PAGES_HOST, "path"}
    assert await guard.addresses("path") == []
    assert servers.canary_hits == []
    assert _refused(guard, "redirect") >= len(canary_targets(servers.canary))
