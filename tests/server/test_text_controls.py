"""Control characters through the HTTP API: a 400 naming the character and its place for
notes and cards; the web chat's /remember takes them out of the user's own words."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import mock_config
from tests.server.conftest import Served, ServeFactory


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    return await serve(mock_config("- text: hi"), workers=False)


async def call(served: Served, method: str, path: str, body: Any) -> tuple[int, Any]:
    async with served.client.request(
        method, served.url + path, json=body, headers=served.auth()
    ) as response:
        return response.status, await response.json()


async def test_notes_and_cards_with_control_characters_are_400_and_not_written(
    served: Served,
) -> None:
    status, kept = await call(served, "POST", "/api/memory/main", {"title": "K", "content": "ok"})
    assert status == 201
    cases = [
        ("POST", "/api/memory/main", {"title": "Raw", "content": "a\x00b"}, "U+0000 (NUL)"),
        ("POST", "/api/memory/main", {"title": "Tab\x1b[31m", "content": "x"}, "U+001B (ESC)"),
        ("POST", "/api/memory/main", {"title": "T", "content": "x", "tags": ["a\u2066"]}, "U+2066"),
        ("PUT", f"/api/memory/main/{kept['slug']}", {"title": "K", "content": "1\n2\u202e3"},
         "U+202E (RIGHT-TO-LEFT OVERRIDE) at line 2, column 2"),
        ("POST", "/api/board", {"title": "Card\x00"}, "board: the title has the control"),
        ("POST", "/api/board", {"title": "Card", "body": "x\x07"}, "U+0007 (BEL)"),
    ]  # fmt: skip
    for method, path, body, said in cases:
        status, answer = await call(served, method, path, body)
        assert status == 400 and said in answer["error"], (path, body, answer)
    card = (await call(served, "POST", "/api/board", {"title": "Fine"}))[1]
    status, answer = await call(
        served, "POST", f"/api/board/{card['id']}/comment", {"text": "see \u202dthis"}
    )
    assert status == 400 and "U+202D" in answer["error"]
    home = served.runtime.home.root
    written = b"".join(p.read_bytes() for p in (home / "agents").rglob("*.md"))
    assert b"\x00" not in written and "\u202e".encode() not in written
    assert [c.title for c in await served.runtime.board.list_cards(status="all")] == ["Fine"]
    assert (await served.runtime.board.get(card["id"])).comments == ()


async def test_remember_in_the_web_chat_strips_them_from_the_users_words(
    served: Served,
) -> None:
    said = await served.post_json(
        "/api/chat", {"conversation": "c", "text": "/remember call \u202eMom\u202c at 5\x00"}
    )
    assert said["message"].startswith("Remembered as call Mom at 5"), said
    note = await served.runtime.memory.read("main", "call-mom-at-5")
    assert note.body == "call Mom at 5"
