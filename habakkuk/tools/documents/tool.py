"""The read_document tool: a workspace file's text, read as read_file reads a file.

Its path is resolved and permitted as read_file's (risk read; the home's credential
files refused below full mode), and the file is opened once: the check of what was
opened and every read after it go through that one descriptor.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from habakkuk.engine.toolkit.registry import ToolContext, ToolError, ToolOutput
from habakkuk.tools.files import ReadsOneFile

from .output import MAX_OUTPUT_BYTES


class ReadDocument(ReadsOneFile):
    """The read_document tool."""

    name = "read_document"
    description = (
        "Read the text of a document: PDF (page by page), DOCX (with footnotes and "
        "endnotes), XLSX (tab-separated rows per sheet), PPTX (slide by slide, with notes), "
        "HTML or plain text. The format is told from the file's bytes. Output stops at "
        f"{MAX_OUTPUT_BYTES // 1000} KB with a note saying where; read on with offset. "
        "pages picks PDF pages or PPTX slides ('1-5,8,12-'); sheet picks an XLSX sheet."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the workspace"},
            "pages": {
                "type": "string",
                "description": "PDF pages or PPTX slides, e.g. '3', '1-5,8', '12-'",
            },
            "sheet": {"type": "string", "description": "XLSX sheet name or number"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "characters of the text to skip (from a cut note)",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = self.path(args, ctx)
        text = await asyncio.to_thread(
            _read,
            path,
            ctx,
            pages=args.get("pages"),
            sheet=args.get("sheet"),
            offset=int(args.get("offset", 0)),
        )
        return ToolOutput(text)


def _read(
    path: Path, ctx: ToolContext, *, pages: str | None, sheet: str | None, offset: int
) -> str:
    from habakkuk.tools.safe_open import check_opened_for_reading

    from .reader import read_document

    if path.is_dir():
        raise ToolError(f"{path} is a folder; use list_dir")
    name = _shown(path, ctx)
    try:
        with path.open("rb") as handle:
            check_opened_for_reading(handle.fileno(), path, ctx)
            document = read_document(handle, name, pages=pages, sheet=sheet, offset=offset)
    except FileNotFoundError:
        raise ToolError(f"{path}: no such file") from None
    return document.render(name)


def _shown(path: Path, ctx: ToolContext) -> str:
    """How the file is named in the output: relative to the workspace when inside it."""
    try:
        return str(path.relative_to(ctx.workspace))
    except ValueError:
        return str(path)
