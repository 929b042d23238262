"""Files to the web chat: send_file is offered with only the web chat, a file a turn sends
is a file entry in the conversation's event stream, and its bytes are served under
/api/chat/{conversation}/files/{id} with the API's token (through the real HTTP routes,
a fake model server on 127.0.0.1 scripted to call send_file)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path
from typing import Any

import pytest

from habakkuk.server.chat_files import content_disposition
from tests.conftest import mock_config
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.server.conftest import SSEReader


def remote(url: str) -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n  main:\n    model: remote/gpt-fake\n    mode: full\n"
        "http:\n"  # the web chat runs, and no `channels:` entry
    )


def png_bytes() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


async def file_entries(served: Any, conversation: str, count: int) -> list[dict[str, Any]]:
    """The first `count` file entries of the conversation, read from its event stream."""
    async with served.client.get(
        f"{served.url}/api/chat/{conversation}/events", headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        frames = [
            await reader.until(
                lambda f: f.get("event") == "message" and f["data"]["role"] == "file"
            )
            for _ in range(count)
        ]
    return [f["data"] for f in frames]


def offered_tools(model_server: FakeModelServer, request: int) -> list[dict[str, Any]]:
    """The function tools (name, description, parameters) of the `request`th model call."""
    tools = model_server.requests[request].json.get("tools", [])
    return [t["function"] for t in tools]


async def test_a_file_the_agent_sends_shows_in_the_web_chat_and_is_served_with_the_token(
    serve: Any, model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    served = await serve(remote(model_server.base_url))  # no channels: only the web chat
    workspace = served.runtime.home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    picture = png_bytes()
    (workspace / "chart.bin").write_bytes(picture)  # a name that says nothing of the type
    model_server.script(
        Reply(tool_calls=[ToolCall("send_file", {"path": "chart.bin", "caption": "the chart"})]),
        Reply(text="Sent."),
    )
    sent = await served.post_json("/api/chat", {"conversation": "f1", "text": "draw it"})
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    assert outcome.status == "done"
    # send_file loads on demand: named in tool_search's description, listed once called.
    (search,) = [t for t in offered_tools(model_server, 0) if t["name"] == "tool_search"]
    assert "send_file" in search["description"]
    assert "send_file" in [t["name"] for t in offered_tools(model_server, 1)]

    [entry] = await file_entries(served, "f1", 1)
    assert entry["text"] == "the chart"
    file = entry["file"]
    assert file["name"] == "chart.bin" and file["size"] == len(picture)
    assert file["media_type"] == "image/png"  # told by its bytes
    assert re.fullmatch(r"/api/chat/f1/files/file_[0-9a-f]{24}", file["url"])

    async with served.client.get(served.url + file["url"], headers=served.auth()) as response:
        assert response.status == 200
        assert await response.read() == picture
        assert response.headers["Content-Type"] == "image/png"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Disposition"].startswith("inline;")
    async with served.client.get(served.url + file["url"]) as response:
        assert response.status == 401
    other = file["url"].replace("/f1/", "/f2/")
    async with served.client.get(served.url + other, headers=served.auth()) as response:
        assert response.status == 404
    unknown = "/api/chat/f1/files/file_" + "0" * 24
    async with served.client.get(served.url + unknown, headers=served.auth()) as response:
        assert response.status == 404


async def test_a_file_with_a_hostile_name_cannot_inject_a_header(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config())
    first = await served.post_json("/api/chat", {"conversation": "h1", "text": "hello"})
    await served.runtime.turns.wait_turn(first["turn"])
    data = b"<script>alert(1)</script>"
    path = tmp_path / "page"
    path.write_bytes(data)
    hostile = 'x"\r\nSet-Cookie: stolen=1\r\n\r\n<b>.html'
    channels = served.runtime.channels
    assert channels is not None
    await channels.send_file("hostile-1", f"{served.server.channel.account}:h1", path, hostile)
    [entry] = await file_entries(served, "h1", 1)
    assert entry["file"]["name"] == hostile
    url = served.url + entry["file"]["url"]
    async with served.client.get(url, headers=served.auth()) as response:
        assert response.status == 200
        assert await response.read() == data
        assert "Set-Cookie" not in response.headers
        disposition = response.headers["Content-Disposition"]
        assert disposition.startswith("attachment;")  # not an image: a download, never shown
        assert "\r" not in disposition and "\n" not in disposition
        assert response.headers["Content-Type"] == "text/html"
        assert response.headers["Content-Security-Policy"].startswith("sandbox")


def test_content_disposition_keeps_only_safe_ascii_and_encodes_the_real_name() -> None:
    value = content_disposition('r\u00e9sum\u00e9 "final";\r\n.pdf', inline=False)
    plain = value.split('filename="', 1)[1].split('"', 1)[0]
    assert plain == "r_sum_ _final____.pdf"
    assert value.endswith("filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22%3B%0D%0A.pdf")


async def test_export_in_the_web_chat_arrives_as_a_file(serve: Any) -> None:
    served = await serve(mock_config())
    first = await served.post_json("/api/chat", {"conversation": "x1", "text": "hello"})
    await served.runtime.turns.wait_turn(first["turn"])
    await served.post_json("/api/chat", {"conversation": "x1", "text": "/export"}, status=202)
    [entry] = await file_entries(served, "x1", 1)
    assert entry["file"]["name"] == f"{first['session']}.md"
    assert entry["file"]["media_type"] == "text/markdown"
    async with served.client.get(
        served.url + entry["file"]["url"], headers=served.auth()
    ) as response:
        assert response.status == 200
        assert "hello" in await response.text()
    assert (await served.get_json("/api/overview"))["unsent"] == 0


async def test_a_file_whose_copy_retention_removed_is_404(serve: Any, tmp_path: Path) -> None:
    served = await serve(mock_config())
    first = await served.post_json("/api/chat", {"conversation": "r1", "text": "hello"})
    await served.runtime.turns.wait_turn(first["turn"])
    path = tmp_path / "old.csv"
    path.write_text("a,b\n")
    channels = served.runtime.channels
    assert channels is not None
    await channels.send_file("old-1", f"{served.server.channel.account}:r1", path)
    [entry] = await file_entries(served, "r1", 1)
    path.unlink()
    url = served.url + entry["file"]["url"]
    async with served.client.get(url, headers=served.auth()) as response:
        assert response.status == 404
        assert "no longer stored" in (await response.json())["error"]
