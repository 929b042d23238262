"""A real Chromium (Debian's) driven by the browser tools against pages on 127.0.0.1."""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from habakkuk.engine.browser_config import BrowserConfig
from habakkuk.engine.toolkit.registry import ToolContext, ToolOutput
from habakkuk.tools.browser.fleet import BrowserFleet, guard_for
from habakkuk.tools.browser.guard import UrlGuard
from habakkuk.tools.browser.launcher import find_binary
from habakkuk.tools.browser.tools import browser_tools
from tests.helpers import tool_context

CHROMIUM = find_binary("")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

PAGES = {
    "/form": """<title>Booking</title><h1>Book a table</h1>
<form action="/result" method="post">
<label>Name <input name="name" value="old"></label>
<label>Size <select name="size"><option value="2">Two people</option>
<option value="4">Four people</option></select></label>
<label><input type="checkbox" name="terrace"> Terrace</label>
<button type="submit">Book</button></form>
<a href="/other">Other page</a>""",
    "/other": "<title>Other</title><p>The other page</p>",
    "/slow": "<title>Slow</title><p>Half there</p><img src='/hang.png'>",
    "/keys": """<title>Keys</title><input id="k" aria-label="Keys">
<p id="log">none</p><script>
document.getElementById('k').addEventListener('keydown', e => {
  document.getElementById('log').textContent = 'key ' + e.key + (e.ctrlKey ? ' ctrl' : '');
});</script>""",
    "/dialogs": """<title>Dialogs</title><button onclick="
document.getElementById('out').textContent = confirm('Sure?') ? 'yes' : 'no'">Ask</button>
<p id="out">unasked</p>""",
    "/popup": """<title>Opener</title>
<button onclick="window.open('/other')">Open</button>""",
    "/downloads": """<title>Files</title>
<a href="/file/report.csv" download>Get the report</a>""",
    "/tall": "<title>Tall</title>"
    + "".join(f"<p style='height:200px'>Row {i}</p>" for i in range(60)),
    "/late": """<title>Late</title><p id="p">waiting</p><script>
setTimeout(() => { document.getElementById('p').textContent = 'Ready now'; }, 300);
</script>""",
}


@dataclass
class Site:
    """The test pages, and the requests that reached them."""

    port: int
    hits: list[str] = field(default_factory=list)
    posted: list[dict[str, str]] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site(0)

    async def page(request: web.Request) -> web.Response:
        state.hits.append(request.path_qs)
        if request.path == "/hang.png":  # an image that never comes: the load never ends
            await state.released.wait()
            return web.Response(status=404)
        if request.path == "/frames":
            other = request.query.get("other", "127.0.0.3")
            body = (
                "<title>Frames</title><iframe src='/inner'></iframe>"
                f"<iframe src='http://{other}:{state.port}/inner'></iframe>"
            )
            return web.Response(text=body, content_type="text/html")
        if request.path == "/inner":
            return web.Response(text="<button>Inner button</button>", content_type="text/html")
        if request.path.startswith("/file/"):
            return web.Response(
                body=b"a,b\n1,2\n",
                content_type="text/csv",
                headers={"Content-Disposition": "attachment; filename=report.csv"},
            )
        if request.path == "/result":
            form = dict(await request.post()) if request.method == "POST" else {}
            state.posted.append({k: str(v) for k, v in form.items()})
            rows = "".join(
                f"<p>{html.escape(k)}={html.escape(str(v))}</p>" for k, v in form.items()
            )
            return web.Response(text=f"<title>Booked</title>{rows}", content_type="text/html")
        found = PAGES.get(request.path)
        if found is None:
            return web.Response(status=404, text="missing")
        return web.Response(text=found, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    # One port on every loopback address: 127.0.0.3 is "another site" for frames.
    site_ = web.TCPSite(runner, "0.0.0.0", 0)
    await site_.start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        state.released.set()
        await runner.cleanup()


class Tools:
    """The browser tools of one agent on a fleet of its own, called directly."""

    def __init__(self, fleet: BrowserFleet, ctx: ToolContext) -> None:
        self.fleet = fleet
        self.ctx = ctx
        self.by_name = {tool.name: tool for tool in browser_tools(fleet)}

    async def __call__(self, name: str, **args: Any) -> ToolOutput:
        return await self.by_name[name].run(args, self.ctx)


def make_fleet(
    root: Path,
    settings: BrowserConfig,
    guards: Callable[[BrowserConfig], UrlGuard] = guard_for,
) -> BrowserFleet:
    return BrowserFleet(root, lambda agent: settings, guards)


@pytest.fixture
async def tools(tmp_path: Path) -> AsyncIterator[Tools]:
    fleet = make_fleet(tmp_path, BrowserConfig(allow_private=["127.0.0.1", "127.0.0.3"]))
    try:
        yield Tools(fleet, tool_context(tmp_path))
    finally:
        await fleet.close()
