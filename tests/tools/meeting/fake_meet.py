"""A page on 127.0.0.1 imitating Google Meet's guest states: pre-join (name, microphone,
camera, "Ask to join"), the lobby until the test admits the guest, the call (Leave call,
captions, chat), captions arriving in blocks that grow, and the page after leaving."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

PAGE = (Path(__file__).parent / "fake_meet.html").read_text(encoding="utf-8")


@dataclass
class FakeMeet:
    """The fake call's server side: what the guest did, and the lobby's door."""

    port: int = 0
    admitted: bool = False
    joins: list[str] = field(default_factory=list)
    toggles: list[str] = field(default_factory=list)
    chat: list[str] = field(default_factory=list)
    left: int = 0
    captions_done: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/abc-defg-hij"


@pytest.fixture
async def fake_meet() -> AsyncIterator[FakeMeet]:
    meet = FakeMeet()

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def admitted(request: web.Request) -> web.Response:
        return web.Response(text="yes" if meet.admitted else "no")

    async def posted(request: web.Request) -> web.Response:
        name = request.match_info["what"]
        if name == "join":
            meet.joins.append(request.query.get("name", ""))
        elif name in ("mic", "cam"):
            meet.toggles.append(f"{name}={request.query.get('on')}")
        elif name == "chat":
            meet.chat.append(await request.text())
        elif name == "left":
            meet.left += 1
        elif name == "captions-done":
            meet.captions_done += 1
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/abc-defg-hij", page)
    app.router.add_get("/admitted", admitted)
    app.router.add_post("/{what}", posted)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    meet.port = runner.addresses[0][1]
    yield meet
    await runner.cleanup()
