"""An MCP tool result as a ToolOutput: its images shown to the model as view_image shows
one (images.prepare: told by their bytes, bombs and corrupt data refused, big ones
scaled; stored as blobs), each named by a line of the text in its place."""

from __future__ import annotations

import asyncio
import re

from habakkuk.engine.llm.types import ImageBlock
from habakkuk.engine.toolkit.registry import ToolContext, ToolOutput
from habakkuk.tools.images import MAX_SOURCE_BYTES, ImageError, prepare

from .results import McpImage, McpResult

# A result may carry more: the rest are named, not shown (each costs the model's tokens).
MAX_IMAGES = 8


async def tool_output(result: McpResult, ctx: ToolContext, server: str, tool: str) -> ToolOutput:
    """`result` of `tool` on `server` as the call's output.

    An error result's images stay placeholders: the registry drops a failed call's media.
    """
    if result.is_error:
        return ToolOutput(result.text, is_error=True)
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", tool)[:60] or "image"
    lines: list[str] = []
    media: list[ImageBlock] = []
    for number, image in enumerate(result.images, 1):
        label = f"image {number} from {server}.{tool}"
        if number > MAX_IMAGES:
            lines.append(f"[{label}: not shown; only a result's first {MAX_IMAGES} images are]")
            continue
        block, line = await _shown(image, label, f"{stem}-{number}", ctx)
        lines.append(line)
        if block is not None:
            media.append(block)
    return ToolOutput(result.render(lines), media=media)


async def _shown(
    image: McpImage, label: str, stem: str, ctx: ToolContext
) -> tuple[ImageBlock | None, str]:
    """The image's block (None when it is refused) and the line that stands for it."""
    if len(image.data) > MAX_SOURCE_BYTES:
        limit = MAX_SOURCE_BYTES // (1024 * 1024)
        return None, f"[{label}: {len(image.data):,} bytes, over {limit} MB; not shown]"
    try:
        prepared = await asyncio.to_thread(prepare, image.data, label)
    except ImageError as exc:
        return None, f"[{exc}; not shown]"
    blob = await ctx.blobs.put(prepared.data, prepared.suffix)
    block = ImageBlock(prepared.media_type, blob=str(blob), name=stem + prepared.suffix)
    return block, f"[{label}: {prepared.describe()}; shown below]"
