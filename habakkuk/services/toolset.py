"""The built-in tools of a runtime, registered by toolset (channels add theirs when configured)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from habakkuk.engine.toolkit.registry import ToolRegistry

if TYPE_CHECKING:
    from habakkuk.engine.config import Config


def build_tools(config: Config) -> ToolRegistry:
    """The built-in tools, registered by toolset."""
    from habakkuk.engine.toolkit.registry import Tool
    from habakkuk.tools.clarify import Clarify
    from habakkuk.tools.edit import EditFile
    from habakkuk.tools.fetch_tool import FetchUrl
    from habakkuk.tools.files import ListDir, ReadFile, WriteFile
    from habakkuk.tools.hardline import check_hardline
    from habakkuk.tools.patch_tool import ApplyPatch
    from habakkuk.tools.process_tools import (
        BackgroundExec,
        ProcessKill,
        ProcessList,
        ProcessOutput,
        ProcessWait,
        ProcessWrite,
    )
    from habakkuk.tools.search_tool import SearchFiles
    from habakkuk.tools.todo import Todo

    registry = ToolRegistry(hardline=check_hardline, inline_budget=config.tools.inline_budget)
    core: list[Tool] = [
        ReadFile(),
        WriteFile(),
        EditFile(),
        ListDir(),
        ApplyPatch(),
        SearchFiles(),
        BackgroundExec(),
        ProcessList(),
        ProcessOutput(),
        ProcessWait(),
        ProcessKill(),
        ProcessWrite(),
        FetchUrl(allow_private=config.tools.allow_private_urls),
        Todo(),
        Clarify(),
    ]
    for tool in core:
        registry.register(tool, "core")
    from habakkuk.knowledge.tools import memory_tools

    for tool in memory_tools():
        registry.register(tool, "memory")
    from habakkuk.knowledge.skills.tools import skills_tools

    for tool in skills_tools():
        registry.register(tool, "skills")
    from habakkuk.work.tools import schedule_tools

    for tool in schedule_tools():
        registry.register(tool, "schedule")
    from habakkuk.work.delegation_tools import delegate_tools

    for tool in delegate_tools():
        registry.register(tool, "delegate")
    if config.channels:
        from habakkuk.channels.service import register_tools

        register_tools(registry)
    return registry
