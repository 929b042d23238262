"""edit_file: replace an exact piece of a file with another.

The old text must occur exactly once unless `replace_all` is set, so the model
cannot change a place it did not mean. CRLF files stay CRLF: when the old text
(written with LF line ends, as models do) only matches with CRLF, both sides
are converted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.safe_open import Confinement, confinement, write_atomic


def edit_text(text: str, old: str, new: str, *, replace_all: bool, label: str) -> tuple[str, int]:
    """Replace `old` with `new` in `text`; returns the new text and the count replaced.

    Raises ToolError naming `label` when the old text is empty, missing, or not unique.
    """
    if old == "":
        raise ToolError(f"{label}: old_string is empty; use write_file to create or replace a file")
    if old == new:
        raise ToolError(f"{label}: old_string and new_string are the same; nothing to change")
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(f"{label}: old_string not found{_near_miss(text, old)}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"{label}: old_string occurs {count} times; include more surrounding lines to make "
            "it unique, or set replace_all to change every occurrence"
        )
    if replace_all:
        return text.replace(old, new), count
    return text.replace(old, new, 1), 1


def _near_miss(text: str, old: str) -> str:
    """A hint when the text is there but with different whitespace."""
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    if not first:
        return ""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() == first:
            return (
                f" (line {number} has its first line {first[:80]!r} with different whitespace "
                "or the following lines differ; read the file and copy the text exactly)"
            )
    return " (read the file and copy the text to replace exactly, including whitespace)"


def _edit_file(
    path: Path, old: str, new: str, replace_all: bool, confine: Confinement | None
) -> int:
    if path.is_dir():
        raise ToolError(f"{path} is a folder")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"{path}: no such file; use write_file to create it") from None
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} is a binary file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not UTF-8 text; edit it with exec instead") from None
    updated, count = edit_text(text, old, new, replace_all=replace_all, label=str(path))
    write_atomic(path, updated.encode("utf-8"), confine=confine)
    return count


class EditFile(Tool):
    """Exact old -> new replacement in one file."""

    name = "edit_file"
    description = (
        "Replace old_string with new_string in a file. old_string must match exactly"
        " (whitespace too) and once, unless replace_all; read the file first."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": False,
    }
    risk = Risk.WRITE
    writes_files = True
    reads_files = True

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args["path"])]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args["path"])
        count = await asyncio.to_thread(
            _edit_file,
            path,
            args["old_string"],
            args["new_string"],
            bool(args.get("replace_all", False)),
            confinement(ctx),
        )
        noun = "occurrence" if count == 1 else "occurrences"
        return ToolOutput(f"replaced {count} {noun} in {path}")
