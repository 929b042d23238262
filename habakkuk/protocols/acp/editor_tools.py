"""The file tools through the editor, and update_plan: the tools of editor sessions.

When the editor offers fs.readTextFile and fs.writeTextFile, read_file, write_file and
edit_file read and write through it, so they see (and change) its unsaved buffers; the
registry's checks (mode, workspace, the home's own files) run first as for any call. A
session whose editor offers neither keeps the ordinary tools. update_plan exists only in
editor sessions: the editor shows the plan it gives (session_agent.py sends it when the
call succeeds).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import (
    NativeTool,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
)
from habakkuk.tools.edit import EditFile, edit_text
from habakkuk.tools.files import DEFAULT_LINES, ReadFile, WriteFile, numbered_lines

from .mapping import PLAN_PRIORITIES, PLAN_STATUSES, PLAN_TOOL

MAX_PLAN_ENTRIES = 50


class EditorFiles(Protocol):
    """The editor's file system, per session (session_agent.py's)."""

    def reads(self, session: str) -> bool:
        """Whether the session's editor offers fs.readTextFile."""
        ...

    def writes(self, session: str) -> bool:
        """Whether the session's editor offers fs.writeTextFile."""
        ...

    async def read_text(self, session: str, path: str) -> str:
        """The file's text as the editor has it (ToolError when it cannot)."""
        ...

    async def write_text(self, session: str, path: str, content: str) -> None:
        """Write the file through the editor (ToolError when it cannot)."""
        ...


class EditorReadFile(ReadFile):
    """read_file, from the editor's buffer when it offers one."""

    def __init__(self, editor: EditorFiles):
        self.editor = editor

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if not self.editor.reads(ctx.session):
            return await super().run(args, ctx)
        path = self.path(args, ctx)
        if path.is_dir():
            raise ToolError(f"{path} is a folder; use list_dir")
        text = await self.editor.read_text(ctx.session, str(path))
        if "\0" in text[:8192]:
            raise ToolError(f"{path} is a binary file")
        offset = int(args.get("offset", 1))
        limit = int(args.get("limit", DEFAULT_LINES))
        return ToolOutput(numbered_lines(text, path, offset, limit))


class EditorWriteFile(WriteFile):
    """write_file, into the editor's buffer when it offers to write."""

    def __init__(self, editor: EditorFiles):
        self.editor = editor

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if not self.editor.writes(ctx.session):
            return await super().run(args, ctx)
        path = ctx.resolve(args["path"])
        if path.is_dir():
            raise ToolError(f"{path} is a folder")
        content = str(args["content"])
        await self.editor.write_text(ctx.session, str(path), content)
        return ToolOutput(f"wrote {len(content.encode('utf-8')):,} bytes to {path}")


class EditorEditFile(EditFile):
    """edit_file on the editor's buffer when it offers to read and write."""

    def __init__(self, editor: EditorFiles):
        self.editor = editor

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        session = ctx.session
        if not (self.editor.reads(session) and self.editor.writes(session)):
            return await super().run(args, ctx)
        path = ctx.resolve(args["path"])
        if path.is_dir():
            raise ToolError(f"{path} is a folder")
        text = await self.editor.read_text(session, str(path))
        updated, count = edit_text(
            text,
            args["old_string"],
            args["new_string"],
            replace_all=bool(args.get("replace_all", False)),
            label=str(path),
        )
        await self.editor.write_text(session, str(path), updated)
        noun = "occurrence" if count == 1 else "occurrences"
        return ToolOutput(f"replaced {count} {noun} in {path}")


class UpdatePlan(Tool):
    """update_plan: the plan the editor shows beside the conversation."""

    name = PLAN_TOOL
    description = (
        "Show the user your plan for this task in the editor: the whole list each time, "
        "each entry with its content, status (pending, in_progress, completed) and "
        "priority (high, medium, low). Update it as entries start and finish."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "maxItems": MAX_PLAN_ENTRIES,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": list(PLAN_STATUSES)},
                        "priority": {"type": "string", "enum": list(PLAN_PRIORITIES)},
                    },
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["entries"],
        "additionalProperties": False,
    }
    # It changes only what the editor shows: no file, no command.
    risk = Risk.READ

    def title(self, args: dict[str, Any]) -> str:
        return "plan"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        entries = args["entries"]
        done = sum(1 for entry in entries if entry.get("status") == "completed")
        return ToolOutput(f"plan shown: {len(entries)} entries, {done} completed")


class EditorRegistry(ToolRegistry):
    """The home's registry as an editor session sees it: the same tools (MCP servers'
    included, as they connect), the same session grants and hooks, with the file tools
    going through the editor and update_plan added."""

    def __init__(self, base: ToolRegistry, editor: EditorFiles):
        super().__init__(hardline=base.hardline, inline_budget=base.inline_budget)
        self.base = base
        self.grants = base.grants
        self.hooks = base.hooks
        self.mutators = base.mutators
        replaced: Sequence[Tool] = (
            EditorReadFile(editor),
            EditorWriteFile(editor),
            EditorEditFile(editor),
        )
        self.replaced = {tool.name: tool for tool in replaced}
        self.extra: dict[str, Tool] = {PLAN_TOOL: UpdatePlan()}

    def register(self, tool: Tool, toolset: str = "core") -> None:
        """Tools join the home's registry (the one of record)."""
        self.base.register(tool, toolset)

    def get(self, name: str) -> Tool | None:
        if name in self.extra:
            return self.extra[name]
        found = self.base.get(name)
        if found is None:
            return None
        return self.replaced.get(name, found)

    def native(self, toolset: str) -> NativeTool | None:
        """The home's native tool for `toolset` (the computer's), as in any session."""
        return self.base.native(toolset)

    def toolset(self, name: str) -> list[str]:
        """The names of the home's toolset `name`."""
        return self.base.toolset(name)

    def tools_for(self, toolsets: list[str]) -> list[Tool]:
        """The agent's tools (the editor's file tools in place of the ordinary ones)
        and update_plan, sorted by name."""
        tools = [self.replaced.get(tool.name, tool) for tool in self.base.tools_for(toolsets)]
        tools.extend(self.extra.values())
        return sorted(tools, key=lambda tool: tool.name)
