"""A tool result from an MCP server as the text the model reads.

Text is kept as is; images, audio and binary resources become a one-line
placeholder; structured content is added as JSON unless the text already
carries it; anything over 1 MiB is cut. `isError` makes it an error result.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

MAX_RESULT_BYTES = 1024 * 1024


def _size(data: str) -> int:
    """Decoded size of base64 `data` (its length when it is not base64)."""
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
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


def result_text(result: Any) -> tuple[str, bool]:
    """(text, is_error) for an `mcp_types.CallToolResult`."""
    texts = [_block_text(block) for block in result.content or []]
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        plain = [str(b.text) for b in result.content or [] if getattr(b, "type", "") == "text"]
        if not _carries(plain, structured):
            texts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(texts)
    if not text:
        text = "(no output)"
    return cut(text), bool(getattr(result, "is_error", False))


def cut(text: str, limit: int = MAX_RESULT_BYTES) -> str:
    """`text` cut to `limit` bytes of UTF-8, with a note saying so."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    head = raw[:limit].decode("utf-8", errors="ignore")
    return f"{head}\n[result cut: it was {len(raw):,} bytes; only the first {limit:,} are shown]"
