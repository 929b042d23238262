"""Images in MCP tool results reach the model as images: a real SDK server over stdio
returns ImageContent; each image is told by its bytes, scaled as view_image's are, stored
as a blob and named by a line of the text in its place; a bomb, a corrupt image or a
type that lies is refused with a line saying why, and the call still succeeds."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ImageBlock, ToolUseBlock
from habakkuk.protocols.mcp.results import McpImage, McpResult
from habakkuk.protocols.mcp.shown import MAX_IMAGES, tool_output
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.helpers import tool_context
from tests.mcp.mcp_servers import png
from tests.mcp.test_mcp_client import BOUND, config_text, link, manager_for, server_entry


def pixels(block: ImageBlock) -> tuple[str, tuple[int, int]]:
    """The format and size of a stored image, as Pillow reads it."""
    with Image.open(block.blob) as image:
        return str(image.format), image.size


async def test_mcp_images_are_shown_scaled_and_bad_ones_refused_with_a_line(home: Home) -> None:
    async with manager_for(home, config_text(server_entry("zoo", "basic"))) as manager:
        zoo = link(manager, "zoo")
        assert zoo.state == "up", zoo.error
        registry, ctx = manager.registry, tool_context(home.root)
        assert registry is not None
        allowed = {"mcp__zoo__chart", "mcp__zoo__bad_images", "mcp__zoo__picture"}

        chart = await registry.call_with_media(
            ToolUseBlock("c1", "mcp__zoo__chart", {}), ctx, allowed
        )
        lines = chart.result.text.splitlines()
        assert not chart.result.is_error
        assert lines[0] == "the chart:" and lines[2] == "end of chart"
        assert lines[1].startswith("[image 1 from zoo.chart: PNG image, 3,000 x 1,500 px")
        assert "scaled to 1,568 x 784 px JPEG" in lines[1] and lines[1].endswith("shown below]")
        [block] = chart.media
        assert (block.media_type, block.name) == ("image/jpeg", "chart-1.jpg")
        assert pixels(block) == ("JPEG", (1568, 784))

        small = await registry.call_with_media(
            ToolUseBlock("c2", "mcp__zoo__picture", {}), ctx, allowed
        )
        [block] = small.media
        assert block.media_type == "image/png" and pixels(block) == ("PNG", (1, 1))
        assert small.result.text.startswith("[image 1 from zoo.picture: PNG image, 1 x 1 px")

        bad = await registry.call_with_media(
            ToolUseBlock("c3", "mcp__zoo__bad_images", {}), ctx, allowed
        )
    assert not bad.result.is_error
    first, bomb, corrupt, liar, _good = bad.result.text.splitlines()
    assert first == "three tries:"
    assert bomb.startswith("[image 1 from zoo.bad_images:") and "decompression bomb" in bomb
    assert "truncated or corrupt" in corrupt and corrupt.startswith("[image 2 from")
    assert "is not a JPEG, PNG, GIF or WebP image" in liar
    assert all(line.endswith("not shown]") for line in (bomb, corrupt, liar))
    [block] = bad.media  # only the one good image
    assert block.name == "bad_images-4.png"
    assert Path(block.blob).read_bytes() == png(8, 8)


async def test_an_mcp_image_reaches_the_model_after_the_tool_result(
    home: Home, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    async with FakeModelServer() as server:
        text = (
            f"providers:\n  remote:\n    type: anthropic\n    base_url: {server.base_url}\n"
            "    key_env: REMOTE_KEY\n"
            "agents:\n  main:\n    model: remote/claude-haiku-4-5\n    mode: full\n"
            '    toolsets: [core, "mcp:zoo"]\n'
            "mcp_servers:\n" + server_entry("zoo", "basic")
        )
        runtime = await runtime_factory(text)
        await asyncio.wait_for(runtime.start_mcp(), BOUND)
        server.script(
            Reply(tool_calls=[ToolCall("mcp__zoo__chart", {})]), Reply(text="A flat grey chart.")
        )
        session = await runtime.sessions.new_session("main")
        runtime.start_workers()
        turn = await runtime.turns.submit(session.id, "what does the chart show?")
        outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), BOUND)
        bodies = [r.json for r in server.requests]
    assert outcome.status == "done", outcome.error
    assert outcome.reply == "A flat grey chart."
    content = bodies[1]["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["tool_result", "image"]
    assert "shown below" in str(content[0]["content"])
    source = content[1]["source"]
    assert source["media_type"] == "image/jpeg"
    with Image.open(io.BytesIO(base64.b64decode(source["data"]))) as image:
        assert max(image.size) <= 1568


async def test_an_error_result_keeps_its_images_as_placeholders(tmp_path: Path) -> None:
    result = McpResult(("it failed", McpImage(png(4, 4), "image/png")), is_error=True)
    output = await tool_output(result, tool_context(tmp_path), "zoo", "draw")
    assert output.is_error and output.media == []
    assert output.text == "it failed\n[image: image/png, " + f"{len(png(4, 4))} bytes, not shown]"
    assert not (tmp_path / "blobs").exists() or not any((tmp_path / "blobs").iterdir())


async def test_images_past_the_cap_are_named_not_shown(tmp_path: Path) -> None:
    images = tuple(McpImage(png(2, 2), "image/png") for _ in range(MAX_IMAGES + 2))
    output = await tool_output(McpResult(images), tool_context(tmp_path), "zoo", "many")
    assert len(output.media) == MAX_IMAGES
    lines = output.text.splitlines()
    assert all(line.endswith("shown below]") for line in lines[:MAX_IMAGES])
    assert lines[MAX_IMAGES:] == [
        f"[image {n} from zoo.many: not shown; only a result's first {MAX_IMAGES} images are]"
        for n in (MAX_IMAGES + 1, MAX_IMAGES + 2)
    ]
