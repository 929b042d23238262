"""What the editor is shown, and what its prompt becomes.

Tool calls go out with an ACP kind (read, edit, execute, search, fetch, think, other), the
title the registry gave them and the files they touch as locations; a stored session
replays as the same updates a live turn streamed (session/load).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from acp.schema import (
        AgentMessageChunk,
        AgentThoughtChunk,
        AudioContentBlock,
        EmbeddedResourceContentBlock,
        ImageContentBlock,
        PlanEntry,
        ResourceContentBlock,
        TextContentBlock,
        ToolCallLocation,
        ToolCallProgress,
        ToolCallStart,
        UserMessageChunk,
    )

    from habakkuk.engine.sessions import StoredMessage

    PromptBlock = (
        TextContentBlock
        | ImageContentBlock
        | AudioContentBlock
        | ResourceContentBlock
        | EmbeddedResourceContentBlock
    )
    Replayed = (
        UserMessageChunk | AgentMessageChunk | AgentThoughtChunk | ToolCallStart | ToolCallProgress
    )

AcpKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
PLAN_TOOL = "update_plan"

# Our tools by what the editor shows them as (an unlisted tool, an MCP one, is "other").
TOOL_KINDS: dict[str, AcpKind] = {
    "read_file": "read",
    "list_dir": "read",
    "read_document": "read",
    "view_image": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "apply_patch": "edit",
    "exec": "execute",
    "process_list": "execute",
    "process_output": "execute",
    "process_wait": "execute",
    "process_kill": "execute",
    "process_write": "execute",
    "search_files": "search",
    "session_search": "search",
    "memory_search": "search",
    "skill_search": "search",
    "web_search": "fetch",
    "fetch_url": "fetch",
    "todo": "think",
    PLAN_TOOL: "think",
}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
PLAN_STATUSES = ("pending", "in_progress", "completed")
PLAN_PRIORITIES = ("high", "medium", "low")


def tool_kind(tool: str) -> AcpKind:
    """The ACP kind of our tool `tool`."""
    return TOOL_KINDS.get(tool, "other")


def tool_paths(tool_input: Mapping[str, Any], workspace: Path) -> list[Path]:
    """The files a call names (its `path`, or the files an apply_patch patch touches),
    absolute: relative ones are inside `workspace`, as the tools resolve them."""
    named: list[str] = []
    path = tool_input.get("path")
    if isinstance(path, str) and path:
        named.append(path)
    patch = tool_input.get("patch") or tool_input.get("input")
    if isinstance(patch, str):
        named.extend(match.strip() for match in _PATCH_FILE.findall(patch))
    found = []
    for name in named:
        candidate = Path(name).expanduser()
        found.append(candidate if candidate.is_absolute() else workspace / candidate)
    return found


def locations(tool_input: Mapping[str, Any], workspace: Path) -> list[ToolCallLocation]:
    """The call's files as ACP locations (with the first line a read starts at)."""
    from acp.schema import ToolCallLocation

    offset = tool_input.get("offset")
    line = offset if isinstance(offset, int) and not isinstance(offset, bool) else None
    return [ToolCallLocation(path=str(p), line=line) for p in tool_paths(tool_input, workspace)]


def tool_started(
    call_id: str, tool: str, title: str, tool_input: Mapping[str, Any], workspace: Path
) -> ToolCallStart:
    """The tool_call update of a call that starts."""
    from acp import start_tool_call

    return start_tool_call(
        call_id,
        title or tool,
        kind=tool_kind(tool),
        status="in_progress",
        locations=locations(tool_input, workspace),
        raw_input=dict(tool_input),
    )


def tool_ended(
    call_id: str,
    tool: str,
    tool_input: Mapping[str, Any],
    failed: bool,
    text: str,
    workspace: Path,
) -> ToolCallProgress:
    """The tool_call_update of a call that ended: its status, its output as text, and for
    a write or an edit that went through the change as a diff."""
    from acp import text_block, tool_content, update_tool_call

    content: list[Any] = [tool_content(text_block(text))] if text else []
    if not failed:
        content.extend(diff_content(tool, tool_input, workspace))
    return update_tool_call(
        call_id, status="failed" if failed else "completed", content=content, raw_output=text
    )


def diff_content(tool: str, tool_input: Mapping[str, Any], workspace: Path) -> list[Any]:
    """The change a write_file or edit_file call makes, as an ACP diff (none for others):
    shown when it asks permission and when it is done."""
    from acp import tool_diff_content

    paths = tool_paths(tool_input, workspace)
    if not paths:
        return []
    if tool == "write_file":
        return [tool_diff_content(str(paths[0]), str(tool_input.get("content", "")))]
    old, new = tool_input.get("old_string"), tool_input.get("new_string")
    if tool == "edit_file" and isinstance(old, str) and isinstance(new, str):
        return [tool_diff_content(str(paths[0]), new, old)]
    return []


def plan_entries(tool_input: Mapping[str, Any]) -> list[PlanEntry]:
    """The plan an update_plan call gave, as ACP plan entries."""
    from acp import plan_entry

    entries = []
    for raw in tool_input.get("entries") or []:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("content"), str):
            continue
        status = raw.get("status")
        priority = raw.get("priority")
        entries.append(
            plan_entry(
                raw["content"],
                status="in_progress"
                if status == "in_progress"
                else "completed"
                if status == "completed"
                else "pending",
                priority="high" if priority == "high" else "low" if priority == "low" else "medium",
            )
        )
    return entries


def prompt_text(blocks: Sequence[PromptBlock]) -> str:
    """The turn's text from the prompt's content blocks: its words, files the editor
    attached (their text inside a fence, named by their URI) and links to files."""
    from acp.schema import (
        EmbeddedResourceContentBlock,
        ResourceContentBlock,
        TextContentBlock,
        TextResourceContents,
    )

    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[file: {block.uri}]")
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(f"[file: {resource.uri}]\n```\n{resource.text}\n```")
            else:
                parts.append(f"[file: {resource.uri} (binary, not included)]")
        else:
            parts.append(f"[{block.type} not supported here; left out]")
    return "\n\n".join(part for part in parts if part)


def replay(
    stored: Sequence[StoredMessage], workspace: Path, title: Callable[[str, dict[str, Any]], str]
) -> Iterator[Replayed]:
    """The updates that show a stored session as it was streamed: the user's words, the
    model's thinking and text, and each tool call (its `title(tool, input)`) with how it
    ended."""
    from acp import (
        update_agent_message_text,
        update_agent_thought_text,
        update_user_message_text,
    )

    from habakkuk.engine.llm.types import TextBlock, ThinkingBlock, ToolUseBlock

    calls: dict[str, ToolUseBlock] = {}
    for item in stored:
        message = item.message
        if message.role == "user":
            if message.text:
                yield update_user_message_text(message.text)
            for result in message.tool_results:
                use = calls.get(result.tool_use_id)
                tool, given = (use.tool, use.input) if use is not None else ("", {})
                yield tool_ended(
                    result.tool_use_id, tool, given, result.is_error, result.text, workspace
                )
            continue
        for block in message.blocks:
            if isinstance(block, ThinkingBlock) and block.text:
                yield update_agent_thought_text(block.text)
            elif isinstance(block, TextBlock) and block.text:
                yield update_agent_message_text(block.text)
            elif isinstance(block, ToolUseBlock):
                calls[block.tool_use_id] = block
                named = title(block.tool, block.input)
                yield tool_started(block.tool_use_id, block.tool, named, block.input, workspace)
