"""File tools of the core toolset: read_file, write_file, list_dir."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.safe_open import check_opened_for_reading, confinement, write_atomic

MAX_LINE_CHARS = 2000
DEFAULT_LINES = 2000
MAX_LIST_ENTRIES = 1000


class ReadsOneFile(Tool):
    """A tool that reads the one file its `path` argument names (read_file,
    read_document): risk read, and that path is what the permission check and the
    credential-file rule see (reads_files)."""

    risk = Risk.READ
    reads_files = True

    def path(self, args: dict[str, Any], ctx: ToolContext) -> Path:
        """The file the call reads, resolved against the workspace."""
        return ctx.resolve(args["path"])

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [self.path(args, ctx)]


class ReadFile(ReadsOneFile):
    name = "read_file"
    description = (
        "Read a text file, lines numbered; page with offset (first line, 1-based) and limit."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "offset": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = self.path(args, ctx)
        offset = int(args.get("offset", 1))
        limit = int(args.get("limit", DEFAULT_LINES))
        return ToolOutput(await asyncio.to_thread(_read_lines, path, offset, limit, ctx))


def _read_lines(path: Path, offset: int, limit: int, ctx: ToolContext) -> str:
    if path.is_dir():
        raise ToolError(f"{path} is a folder; use list_dir")
    try:
        with path.open("rb") as handle:
            check_opened_for_reading(handle.fileno(), path, ctx)
            head = handle.read(8192)
            if b"\0" in head:
                raise ToolError(f"{path} is a binary file")
            data = head + handle.read()
    except FileNotFoundError:
        raise ToolError(f"{path}: no such file") from None
    return numbered_lines(data.decode("utf-8", errors="replace"), path, offset, limit)


def numbered_lines(text: str, path: Path | str, offset: int, limit: int) -> str:
    """`limit` lines of `text` from line `offset` (1-based), numbered as read_file shows
    them, with a note on how to read on (an editor's buffer is shown the same way)."""
    lines = text.splitlines()
    chosen = lines[offset - 1 : offset - 1 + limit]
    out = []
    for number, line in enumerate(chosen, start=offset):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " …[line cut]"
        out.append(f"{number:6}\t{line}")
    end = offset - 1 + len(chosen)
    if end < len(lines):
        out.append(f"[lines {offset}-{end} of {len(lines)}; continue with offset={end + 1}]")
    if not lines:
        return f"[{path} is empty]"
    return "\n".join(out)


class WriteFile(Tool):
    name = "write_file"
    description = "Create or overwrite a file (parent folders are made)."
    input_schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    risk = Risk.WRITE
    writes_files = True

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args["path"])]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args["path"])
        if path.is_dir():
            raise ToolError(f"{path} is a folder")
        data = args["content"].encode("utf-8")
        await asyncio.to_thread(write_atomic, path, data, confine=confinement(ctx))
        return ToolOutput(f"wrote {len(data):,} bytes to {path}")


class ListDir(Tool):
    name = "list_dir"
    description = "List a folder (default: the workspace) with sizes; folders end with '/'."
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "additionalProperties": False,
    }
    risk = Risk.READ

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.get("path", "."))]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.get("path", "."))
        return ToolOutput(await asyncio.to_thread(_list, path))


def _list(path: Path) -> str:
    try:
        entries = sorted(os.scandir(path), key=lambda e: (not e.is_dir(), e.name))
    except FileNotFoundError:
        raise ToolError(f"{path}: no such folder") from None
    except NotADirectoryError:
        raise ToolError(f"{path} is a file; use read_file") from None
    lines = []
    for entry in entries[:MAX_LIST_ENTRIES]:
        try:
            if entry.is_dir(follow_symlinks=False):
                lines.append(entry.name + "/")
            elif entry.is_symlink():
                lines.append(f"{entry.name} -> {os.readlink(entry.path)}")
            else:
                lines.append(f"{entry.name}  ({entry.stat(follow_symlinks=False).st_size:,} bytes)")
        except FileNotFoundError:
            continue  # removed while we listed (e.g. a temp file renamed by a parallel write)
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return "\n".join(lines) if lines else f"[{path} is empty]"
