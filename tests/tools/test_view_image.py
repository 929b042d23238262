"""view_image: images told by their bytes, hostile ones refused in a line, big ones scaled,
a URL fetched through the SSRF guard as network use that taints the turn."""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from PIL import Image

from habakkuk.engine.llm.types import ImageBlock, ToolUseBlock
from habakkuk.engine.toolkit.approvals import ApprovalDecision, ApprovalRequest
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import (
    CallResult,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
)
from habakkuk.tools.images import MAX_BYTES, SCALED_SIDE, prepare, sniff
from habakkuk.tools.view_image import ViewImage
from tests.fakes.loopback import serve_on_loopback
from tests.helpers import tool_context


def encoded(fmt: str, size: tuple[int, int] = (64, 48), mode: str = "RGB", **save: Any) -> bytes:
    """A real image made with Pillow: a gradient, so encoders have something to encode."""
    image = Image.new(mode, size)
    if mode == "RGB":
        image.putdata(
            [(x % 256, y % 256, (x + y) % 256) for y in range(size[1]) for x in range(size[0])]
        )
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A tiny, valid-looking PNG whose IHDR claims width x height pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 4096)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def ctx_for(tmp_path: Path, mode: str = "full", **extra: Any) -> ToolContext:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return tool_context(tmp_path, mode=mode, workspace=workspace, **extra)


def registry(tool: Tool | None = None) -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(tool or ViewImage(allow_private=True), "media")
    return tools


async def call(
    tools: ToolRegistry, ctx: ToolContext, args: dict[str, Any], name: str = "view_image"
) -> CallResult:
    return await tools.call_with_media(ToolUseBlock("call_1", name, args), ctx, {name})


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
async def test_each_format_is_shown_as_it_is_with_its_type_from_the_bytes(
    tmp_path: Path, fmt: str, media_type: str
) -> None:
    ctx = ctx_for(tmp_path)
    data = encoded(fmt)
    (ctx.workspace / f"pic.{fmt.lower()}").write_bytes(data)
    done = await call(registry(), ctx, {"path": f"pic.{fmt.lower()}"})
    assert not done.result.is_error, done.result.text
    (block,) = done.media
    assert block.media_type == media_type
    assert Path(block.blob).read_bytes() == data  # small: sent untouched
    assert "64 x 48 px" in done.result.text


async def test_a_jpeg_named_png_is_taken_as_the_jpeg_it_is(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "photo.png").write_bytes(encoded("JPEG"))
    done = await call(registry(), ctx, {"path": "photo.png"})
    assert [b.media_type for b in done.media] == ["image/jpeg"]
    assert "JPEG image" in done.result.text


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"just some notes, not a picture\n", "is not a JPEG, PNG, GIF or WebP image"),
        (b"", "is empty"),
    ],
)
async def test_a_file_that_is_not_an_image_is_an_error_result_whatever_its_name(
    tmp_path: Path, content: bytes, why: str
) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "notes.png").write_bytes(content)
    done = await call(registry(), ctx, {"path": "notes.png"})
    assert done.result.is_error
    assert why in done.result.text
    assert done.media == []


async def test_a_truncated_png_is_an_error_result_saying_so(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    data = encoded("PNG", (200, 200))
    (ctx.workspace / "cut.png").write_bytes(data[: len(data) // 2])
    done = await call(registry(), ctx, {"path": "cut.png"})
    assert done.result.is_error
    assert "truncated or corrupt" in done.result.text
    assert done.media == []


@pytest.mark.parametrize("side", [30_000, 9_000])
async def test_a_header_claiming_a_huge_image_is_refused_as_a_decompression_bomb(
    tmp_path: Path, side: int
) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "bomb.png").write_bytes(png_header_only(side, side))
    done = await call(registry(), ctx, {"path": "bomb.png"})
    assert done.result.is_error
    assert "decompression bomb" in done.result.text
    assert done.media == []


def test_the_bomb_check_reads_the_header_and_names_the_size() -> None:
    from habakkuk.tools.images import ImageError

    with pytest.raises(ImageError, match=r"9,000 x 9,000 pixels"):
        prepare(png_header_only(9_000, 9_000), "bomb.png")


async def test_an_image_wider_than_2048_px_is_scaled_to_1568_px_jpeg(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "wide.png").write_bytes(encoded("PNG", (3000, 1000)))
    done = await call(registry(), ctx, {"path": "wide.png"})
    (block,) = done.media
    assert block.media_type == "image/jpeg"
    assert block.name == "wide.jpg"
    with Image.open(block.blob) as shown:
        assert shown.format == "JPEG"
        assert shown.size == (SCALED_SIDE, 523)
    assert "scaled to 1,568 x 523 px JPEG" in done.result.text


def test_an_image_over_5_mb_is_scaled_even_when_its_sides_are_small() -> None:
    side = 1400  # under 2048 px, but noise that PNG cannot shrink: over 5 MB
    noise = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    out = io.BytesIO()
    noise.save(out, "PNG", compress_level=0)
    data = out.getvalue()
    assert len(data) > MAX_BYTES
    shown = prepare(data, "noise.png")
    assert shown.media_type == "image/jpeg"
    assert (shown.width, shown.height) == (side, side)  # under 1568: not made smaller
    assert len(shown.data) < len(data)


def test_a_transparent_png_scaled_to_jpeg_goes_onto_white() -> None:
    image = Image.new("RGBA", (3000, 100), (0, 0, 0, 0))
    out = io.BytesIO()
    image.save(out, "PNG")
    shown = prepare(out.getvalue(), "clear.png")
    with Image.open(io.BytesIO(shown.data)) as scaled:
        assert scaled.getpixel((10, 10)) == pytest.approx((255, 255, 255), abs=2)


def test_the_type_is_told_by_the_magic_bytes() -> None:
    assert sniff(encoded("PNG")) == "image/png"
    assert sniff(encoded("JPEG")) == "image/jpeg"
    assert sniff(encoded("GIF")) == "image/gif"
    assert sniff(encoded("WEBP")) == "image/webp"
    assert sniff(b"RIFF\0\0\0\0WAVEfmt ") is None
    assert sniff(b"%PDF-1.7") is None


async def test_path_and_url_together_or_neither_is_an_error_result(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    for args in ({}, {"path": "a.png", "url": "https://example.com/a.png"}):
        done = await call(registry(), ctx, args)
        assert done.result.is_error
        assert "exactly one" in done.result.text


async def test_a_path_outside_the_workspace_is_read_as_read_file_reads_it(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, mode="read-only")
    outside = tmp_path / "elsewhere.gif"
    outside.write_bytes(encoded("GIF"))
    done = await call(registry(), ctx, {"path": str(outside)})
    assert not done.result.is_error  # read risk: allowed in every mode, as read_file
    assert not ctx.taint  # a file is not outside content


async def test_a_credential_file_is_refused_below_full_mode(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, mode="workspace")
    secret = tmp_path / ".env"
    secret.write_bytes(encoded("PNG"))
    done = await call(registry(), ctx, {"path": str(secret)})
    assert done.result.is_error
    assert "credential" in done.result.text
    assert done.media == []


# -- URLs ---------------------------------------------------------------------------------


class Site:
    def __init__(self) -> None:
        self.port = 0
        self.hits: list[str] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site()
    bodies = {
        # The server's Content-Type is not trusted either way.
        "/logo": (encoded("PNG"), "application/octet-stream"),
        "/page.png": (b"<html>not an image</html>", "image/png"),
    }

    async def serve(request: web.Request) -> web.Response:
        state.hits.append(request.path)
        if request.path not in bodies:
            return web.Response(status=404, text="gone")
        body, kind = bodies[request.path]
        return web.Response(body=body, content_type=kind)

    app = web.Application()
    app.router.add_get("/{name}", serve)
    runner, state.port = await serve_on_loopback(app)
    try:
        yield state
    finally:
        await runner.cleanup()


async def test_a_url_is_fetched_sniffed_shown_and_taints_the_turn(
    tmp_path: Path, site: Site
) -> None:
    ctx = ctx_for(tmp_path)
    done = await call(registry(), ctx, {"url": site.url("/logo")})
    assert not done.result.is_error, done.result.text
    (block,) = done.media
    assert (block.media_type, block.name) == ("image/png", "logo")
    assert Path(block.blob).read_bytes() == encoded("PNG")
    assert ctx.taint.reason == "view_image"


async def test_a_url_that_is_not_an_image_or_is_missing_is_an_error_result(
    tmp_path: Path, site: Site
) -> None:
    ctx = ctx_for(tmp_path)
    page = await call(registry(), ctx, {"url": site.url("/page.png")})
    assert page.result.is_error and "not a JPEG, PNG, GIF or WebP" in page.result.text
    missing = await call(registry(), ctx, {"url": site.url("/nothing")})
    assert missing.result.is_error and "HTTP 404" in missing.result.text


async def test_a_local_url_is_refused_by_the_ssrf_guard_without_being_hit(
    tmp_path: Path, site: Site
) -> None:
    ctx = ctx_for(tmp_path)
    done = await call(registry(ViewImage()), ctx, {"url": site.url("/logo")})
    assert done.result.is_error
    assert "allow_private_urls" in done.result.text
    assert site.hits == []


class Recorder:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision("allow_once" if self.answer == "allow" else "deny")


async def test_a_url_is_network_use_denied_in_read_only_and_asked_in_ask_mode(
    tmp_path: Path, site: Site
) -> None:
    tool = ViewImage(allow_private=True)
    assert tool.risk_for({"url": "https://example.com/a.png"}, ctx_for(tmp_path)) is Risk.NETWORK
    assert tool.risk_for({"path": "a.png"}, ctx_for(tmp_path)) is Risk.READ

    read_only = ctx_for(tmp_path, mode="read-only")
    denied = await call(registry(tool), read_only, {"url": site.url("/logo")})
    assert denied.result.is_error and "not allowed in read-only mode" in denied.result.text
    assert site.hits == [] and not read_only.taint

    approver = Recorder("allow")
    asking = ctx_for(tmp_path, mode="ask", approver=approver)
    shown = await call(registry(tool), asking, {"url": site.url("/logo")})
    assert [r.tool for r in approver.asked] == ["view_image"]
    assert len(shown.media) == 1

    refuser = Recorder("deny")
    refused = ctx_for(tmp_path, mode="ask", approver=refuser)
    no = await call(registry(tool), refused, {"url": site.url("/logo")})
    assert no.result.is_error and no.media == []


# -- the registry's part ------------------------------------------------------------------


class Attaches(Tool):
    """A tool that attaches an image whether it succeeds or fails."""

    name = "attaches"
    description = "test tool"
    input_schema = {"type": "object", "properties": {"fail": {"type": "boolean"}}}
    risk = Risk.READ

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        blob = await ctx.blobs.put(encoded("PNG"), ".png")
        image = ImageBlock("image/png", blob=str(blob), name="x.png")
        return ToolOutput("here", is_error=bool(args.get("fail")), media=[image])


async def test_the_registry_keeps_a_successful_calls_media_and_drops_a_failed_ones(
    tmp_path: Path,
) -> None:
    tools = registry(Attaches())
    ctx = ctx_for(tmp_path)
    ok = await call(tools, ctx, {}, "attaches")
    failed = await call(tools, ctx, {"fail": True}, "attaches")
    assert [b.name for b in ok.media] == ["x.png"]
    assert failed.result.is_error and failed.media == []
    assert (await tools.call(ToolUseBlock("c", "attaches", {}), ctx, {"attaches"})).text == "here"


async def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    from habakkuk.tools.images import MAX_SOURCE_BYTES

    ctx = ctx_for(tmp_path)
    with (ctx.workspace / "huge.png").open("wb") as handle:
        handle.write(encoded("PNG"))
        handle.truncate(MAX_SOURCE_BYTES + 1)  # sparse: nothing big is written
    done = await call(registry(), ctx, {"path": "huge.png"})
    assert done.result.is_error
    assert "is over 50 MB; not read" in done.result.text
