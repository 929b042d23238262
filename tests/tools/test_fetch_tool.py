"""fetch_url: the SSRF guard in front of every fetch, HTML reduced to text."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import ResolveResult
from aiohttp.resolver import ThreadedResolver

from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.toolkit.registry import ToolContext, ToolError, ToolRegistry
from habakkuk.tools.fetch_tool import FetchUrl
from habakkuk.tools.html_text import html_to_text
from tests.fakes.loopback import serve_on_loopback
from tests.helpers import tool_context

PAGE = """<html><head><title>The  Title</title><style>body{color:red}</style>
<script>alert('no')</script></head><body><h1>Heading</h1><p>First &amp; para.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


class Site:
    def __init__(self) -> None:
        self.port = 0
        self.hits: list[str] = []

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site()

    async def page(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        return web.Response(text=PAGE, content_type="text/html")

    async def image(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        return web.Response(body=b"\x89PNG....", content_type="image/png")

    async def missing(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        return web.Response(status=404, text="gone", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/page", page)
    app.router.add_get("/image", image)
    app.router.add_get("/missing", missing)
    runner, state.port = await serve_on_loopback(app)
    try:
        yield state
    finally:
        await runner.cleanup()


def ctx_for(tmp_path: Path, mode: str = "full") -> ToolContext:
    return tool_context(tmp_path, mode=mode, workspace=tmp_path)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost/",
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://192.168.1.1/admin",
        "http://172.16.0.5/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:10.0.0.1]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://2130706433/",
        "http://0x7f.0.0.1/",
        "file:///etc/passwd",
        "ftp://example.com/",
    ],
)
async def test_inward_and_odd_targets_are_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(ToolError, match="fetch_url: refused"):
        await FetchUrl().run({"url": url}, ctx_for(tmp_path))


async def test_the_local_server_is_refused_without_being_hit(tmp_path: Path, site: Site) -> None:
    with pytest.raises(ToolError, match="allow_private_urls"):
        await FetchUrl().run({"url": site.url("/page")}, ctx_for(tmp_path))
    assert site.hits == []


async def test_a_public_name_resolving_inward_is_refused(
    tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ThreadedResolver.resolve

    async def fake(
        self: ThreadedResolver, host: str, port: int = 0, family: Any = socket.AF_INET
    ) -> list[ResolveResult]:
        if host == "innocent.example.com":
            return [
                {
                    "hostname": host,
                    "host": "127.0.0.1",
                    "port": port,
                    "family": socket.AF_INET,
                    "proto": 0,
                    "flags": socket.AI_NUMERICHOST,
                }
            ]
        return await real(self, host, port, family)

    monkeypatch.setattr(ThreadedResolver, "resolve", fake)
    with pytest.raises(ToolError, match="refused"):
        await FetchUrl().run({"url": site.url("/page", "innocent.example.com")}, ctx_for(tmp_path))
    assert site.hits == []


async def test_allow_private_fetches_and_reduces_html_to_text(tmp_path: Path, site: Site) -> None:
    out = await FetchUrl(allow_private=True).run({"url": site.url("/page")}, ctx_for(tmp_path))
    assert not out.is_error
    assert "title: The Title" in out.text
    assert "Heading" in out.text and "First & para." in out.text and "- one" in out.text
    assert "alert" not in out.text and "color:red" not in out.text


async def test_raw_keeps_the_html(tmp_path: Path, site: Site) -> None:
    out = await FetchUrl(allow_private=True).run(
        {"url": site.url("/page"), "raw": True}, ctx_for(tmp_path)
    )
    assert "<h1>Heading</h1>" in out.text


async def test_binary_content_is_described_not_shown(tmp_path: Path, site: Site) -> None:
    out = await FetchUrl(allow_private=True).run({"url": site.url("/image")}, ctx_for(tmp_path))
    assert "image/png; not text" in out.text and "PNG" not in out.text.split("\n", 1)[1]


async def test_http_errors_are_error_results(tmp_path: Path, site: Site) -> None:
    out = await FetchUrl(allow_private=True).run({"url": site.url("/missing")}, ctx_for(tmp_path))
    assert out.is_error and "(404," in out.text


async def test_long_pages_are_cut_with_a_note(tmp_path: Path, site: Site) -> None:
    out = await FetchUrl(allow_private=True).run(
        {"url": site.url("/page"), "max_chars": 10}, ctx_for(tmp_path)
    )
    assert "[cut at 10 of" in out.text


@pytest.mark.parametrize(("mode", "allowed"), [("workspace", False), ("full", True)])
async def test_fetch_is_network_risk_and_asks_below_full(
    tmp_path: Path, site: Site, mode: str, allowed: bool
) -> None:
    registry = ToolRegistry()
    registry.register(FetchUrl(allow_private=True))
    use = ToolUseBlock("c", "fetch_url", {"url": site.url("/page")})
    result = await registry.call(use, ctx_for(tmp_path, mode), {"fetch_url"})
    assert result.is_error != allowed
    assert ("nobody can approve" in result.text) != allowed


def test_html_to_text_survives_broken_markup() -> None:
    title, text = html_to_text("<p>unclosed <b>bold <i>x</p><div")
    assert "unclosed" in text and title == ""
