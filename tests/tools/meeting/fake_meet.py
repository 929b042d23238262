"""Pages on 127.0.0.1 imitating Google Meet's, Zoom's and Teams' guest states: a launcher
page (Zoom, Teams), pre-join (name, microphone, camera, the join button), the lobby until
the test admits the guest, the call (leave, captions behind each platform's menus, chat),
captions arriving in blocks that grow, and the page after leaving."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

PAGE = (Path(__file__).parent / "fake_meet.html").read_text(encoding="utf-8")


# Each platform's words and controls, as its guest pages show them.
PLATFORMS: dict[str, dict[str, Any]] = {
    "meet": {
        "title": "Meet",
        "region": 'role="region" aria-label="Captions"',
        "launcher": None,
        "nameField": "Your name",
        "mic": {"label": "Turn off microphone", "offLabel": "Turn on microphone"},
        "cam": {"label": "Turn off camera", "offLabel": "Turn on camera"},
        "join": "Ask to join",
        "lobby": "Asking to be let in...",
        "captions": ["Turn on captions"],
        "captionsOff": "Turn off captions",
        "chat": "Chat with everyone",
        "chatField": "Send a message",
        "leave": "Leave call",
        "ended": "The call has ended",
        "confirm": None,
    },
    "zoom": {
        "title": "Zoom",
        "region": 'class="live-caption-box" aria-live="polite"',
        "launcher": "Join from Your Browser",
        "nameField": "Your Name",
        "mic": {"label": "Mute", "offLabel": "Unmute"},
        "cam": {"label": "Stop Video", "offLabel": "Start Video"},
        "join": "Join",
        "lobby": "Please wait, the meeting host will let you in soon.",
        "captions": ["Captions", "Show Captions"],
        "captionsOff": "Hide Captions",
        "chat": "Chat",
        "chatField": "Type message here",
        "leave": "Leave",
        "confirm": "Leave Meeting",
        "ended": "This meeting has been ended by host",
    },
    "teams": {
        "title": "Microsoft Teams",
        "region": 'data-tid="closed-caption-renderer-wrapper"',
        "launcher": "Continue on this browser",
        "nameField": "Type your name",
        "mic": {"label": "Microphone", "switch": True},
        "cam": {"label": "Camera", "switch": True},
        "join": "Join now",
        "lobby": "Someone in the meeting should let you in soon",
        "captions": ["More", "Language and speech", "Turn on live captions"],
        "captionsOff": "Turn off live captions",
        "ended": "The meeting has ended",
        "chat": "Chat",
        "chatField": "Type a message",
        "leave": "Leave",
        "confirm": None,
    },
}


@dataclass
class FakeMeet:
    """The fake call's server side: what the guest did, and the lobby's door."""

    port: int = 0
    platform: str = "meet"
    admitted: bool = False
    ended: bool = False
    agents: list[str] = field(default_factory=list)  # the User-Agent of each page load
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
        meet.agents.append(request.headers.get("User-Agent", ""))
        cfg = PLATFORMS[meet.platform]
        text = PAGE.replace("__CFG__", json.dumps(cfg)).replace("__TITLE__", cfg["title"])
        return web.Response(
            text=text.replace("__REGION__", cfg["region"]), content_type="text/html"
        )

    async def admitted(request: web.Request) -> web.Response:
        return web.Response(text="yes" if meet.admitted else "no")

    async def ended(request: web.Request) -> web.Response:
        return web.Response(text="yes" if meet.ended else "no")

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
    app.router.add_get("/ended", ended)
    app.router.add_post("/{what}", posted)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    meet.port = runner.addresses[0][1]
    yield meet
    await runner.cleanup()
