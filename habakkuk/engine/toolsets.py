"""Toolsets: the built-in ones, the default an agent gets, and how MCP servers join it.

This module is the one definition of the default toolsets (spec 000 "Setup and
maintenance"). Nothing Habakkuk writes (the starter config, `habakkuk setup`, the setup
screen) spells the list out: an agent whose config.yaml entry has no `toolsets:` gets
DEFAULT_TOOLSETS plus the toolset `mcp:<server>` of every MCP server, configured in
config.yaml or brought by an enabled plugin. An agent that lists `toolsets:` gets exactly
that list, which may name `mcp:<server>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_TOOLSETS = ("core", "media", "memory", "skills", "schedule", "delegate", "board")
# Offered only to an agent whose `toolsets:` names them: they act on the world outside the
# computer (homeassistant: the house, per spec 000 "Home Assistant"; browser: the web as a
# person clicks it; a2a: other agents; meeting: calls attended as a guest), or on the
# computer's desktop (computer: mouse, keyboard, screen; computer-open: starting apps on it).
OPT_IN_TOOLSETS = ("homeassistant", "browser", "a2a", "meeting", "computer", "computer-open")
KNOWN_TOOLSETS = DEFAULT_TOOLSETS + OPT_IN_TOOLSETS
MCP_PREFIX = "mcp:"

# Built-in tools an agent has but is not shown in every request: they load on demand
# through tool_search (habakkuk/protocols/mcp/toolsearch.py), and a direct call by name
# runs too and loads them. Every request lists the rest (files, exec, web, memory basics)
# plus tool_search and tool_describe, so a first "hello" stays small. `tool_search_over:
# -1` on an agent lists everything again.
ON_DEMAND_TOOLS = frozenset(
    {
        # core: rarer file and session tools, background processes, chat extras
        "apply_patch",
        "clarify",
        "todo",
        "process_kill",
        "process_list",
        "process_output",
        "process_wait",
        "process_write",
        "send_file",
        "poll",
        # memory beyond search and save
        "memory_read",
        "memory_forget",
        "user_profile_read",
        "user_profile_update",
        "set_identity",
        "session_search",
        # skills (the prompt's # Skills section names them when there are any)
        "skill_view",
        "skill_file",
        "skill_save",
        "skill_search",
        # schedules, the board, sub-agents
        "schedule_create",
        "schedule_list",
        "schedule_pause",
        "schedule_resume",
        "schedule_delete",
        "board_create",
        "board_list",
        "board_show",
        "board_update",
        "board_comment",
        "board_block",
        "board_complete",
        "delegate",
        # media
        "view_image",
        "read_document",
        "image_generate",
        "video_generate",
        "speak",
    }
)


def mcp_toolset(server: str) -> str:
    """The toolset that holds MCP server `server`'s tools."""
    return f"{MCP_PREFIX}{server}"


def uses_default_toolsets(agent: Any) -> bool:
    """Whether the agent's config left `toolsets:` out (so it gets the default).

    `agent` is an AgentConfig; the loader records the lines of the keys it read, so a
    `toolsets:` written in the file, even one equal to the default, is "listed"."""
    return "toolsets" not in getattr(agent, "_lines", {})


def offer_to_default_agents(agents: Iterable[Any], server: str) -> None:
    """Add server `server`'s toolset to every agent on the default toolsets."""
    toolset = mcp_toolset(server)
    for agent in agents:
        if uses_default_toolsets(agent) and toolset not in agent.toolsets:
            agent.toolsets.append(toolset)


def agents_offered(agents: Mapping[str, Any], server: str) -> list[str]:
    """The names of the agents whose toolsets hold server `server`'s tools, sorted."""
    toolset = mcp_toolset(server)
    return sorted(name for name, agent in agents.items() if toolset in agent.toolsets)
