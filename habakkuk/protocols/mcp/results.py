"""A tool result from an MCP server as what the model reads.

Text is kept as is; an image is kept as its decoded bytes, in its place among the
text (shown.py prepares it and names it in a line); audio and binary resources become
a one-line placeholder; structured content is added as JSON unless the text already
carries it; text over 1 MiB is cut. `isError` makes it an error result.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_RESULT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class McpImage:
    """An image block of a result: the bytes the server sent (decoded from base64) and the
    type it named (which the bytes, not this, decide when it is shown)."""

    data: bytes
    mime_type: str

    def placeholder(self) -> str:
        """The line that stands for the image where it is not shown."""
        return f"[image: {self.mime_type}, {len(self.data):,} bytes, not shown]"


@dataclass(frozen=True)
class McpResult:
    """A tool result: its text pieces and images in the server's order, and whether the
    server called it an error."""

    parts: tuple[str | McpImage, ...]
    is_error: bool = False

    @property
    def images(self) -> list[McpImage]:
        return [part for part in self.parts if isinstance(part, McpImage)]

    @property
    def text(self) -> str:
        """The result as text alone: each image a placeholder line."""
        return self.render([image.placeholder() for image in self.images])

    def render(self, lines: Sequence[str]) -> str:
        """The result as text with each image replaced by its line in `lines` (one per
        image, in order), cut to MAX_RESULT_BYTES."""
        if len(lines) != len(self.images):
            raise ValueError(f"{len(self.images)} image lines are needed, {len(lines)} given")
        given = iter(lines)
        text = "\n".join(part if isinstance(part, str) else next(given) for part in self.parts)
        return cut(text or "(no output)")


def _size(data: str) -> int:
    """Decoded size of base64 `data` (its length when it is not base64)."""
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _image(block: Any) -> McpImage | str:
    """An image block's bytes, or the line saying why it cannot be shown."""
    mime = str(getattr(block, "mime_type", None) or "unknown type")
    try:
        return McpImage(base64.b64decode(str(block.data)), mime)
    except (binascii.Error, ValueError):
        return f"[image: {mime}, not shown: its data is not valid base64]"


def _part(block: Any) -> str | McpImage:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind == "image":
        return _image(block)
    if kind == "audio":
        mime = getattr(block, "mime_type", None) or "unknown type"
        return f"[{kind}: {mime}, {_size(str(block.data)):,} bytes, not shown]"
    if kind == "resource_link":
        label = block.title or block.name or ""
        mime = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.uri}{mime}{' — ' + label if label else ''}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return str(text)
        mime = getattr(resource, "mime_type", None) or "binary"
        size = _size(str(getattr(resource, "blob", "")))
        return f"[resource {resource.uri}: {mime}, {size:,} bytes, not shown]"
    return f"[{kind or 'unknown'} content, not shown]"


def _carries(texts: list[str], structured: Any) -> bool:
    """Whether a text block already says what the structured content says.

    SDK servers wrap a plain return value as {"result": value}; its text block is
    that value, so it counts as carried too.
    """
    wrapped = structured.get("result", ...) if isinstance(structured, dict) else ...
    if isinstance(structured, dict) and len(structured) != 1:
        wrapped = ...
    for text in texts:
        if wrapped is not ... and text == wrapped:
            return True
        try:
            parsed = json.loads(text)
            if parsed == structured or (wrapped is not ... and parsed == wrapped):
                return True
        except ValueError:
            continue
    return False


def result_content(result: Any) -> McpResult:
    """The McpResult of an `mcp_types.CallToolResult`."""
    parts = [_part(block) for block in result.content or []]
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        plain = [str(b.text) for b in result.content or [] if getattr(b, "type", "") == "text"]
        if not _carries(plain, structured):
            parts.append(json.dumps(structured, ensure_ascii=False))
    return McpResult(tuple(parts), bool(getattr(result, "is_error", False)))


def cut(text: str, limit: int = MAX_RESULT_BYTES) -> str:
    """`text` cut to `limit` bytes of UTF-8, with a note saying so."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    head = raw[:limit].decode("utf-8", errors="ignore")
    return f"{head}\n[result cut: it was {len(raw):,} bytes; only the first {limit:,} are shown]"
