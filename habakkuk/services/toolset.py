"""The built-in tools of a runtime, registered by toolset (channels add theirs when any runs).

Each toolset is built here on the services it uses (`ToolServices`), typed: the tools
hold them from construction (engine/toolkit/service_tool.py), so nothing of the layers
above the engine travels in a call's ToolContext.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.toolkit.registry import ToolRegistry

if TYPE_CHECKING:
    from habakkuk.channels.service import ChannelService
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Environment
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.knowledge.memory_types import MemoryAccess
    from habakkuk.knowledge.skills.types import SkillsAccess
    from habakkuk.protocols.nodes.hub import NodeHub
    from habakkuk.services.usage import UsageLedger
    from habakkuk.tools.browser.fleet import BrowserFleet
    from habakkuk.tools.meeting.desk import MeetingDesk
    from habakkuk.tools.process_tools import Started
    from habakkuk.tools.processes import ProcessManager
    from habakkuk.work.board_types import BoardAccess
    from habakkuk.work.delegation_types import DelegationAccess
    from habakkuk.work.schedule_types import SchedulesAccess


@dataclass(frozen=True)
class ToolServices:
    """What the built-in toolsets use, each bound to its tools when they are built."""

    processes: ProcessManager  # exec's background processes, process_*
    process_started: Started  # told which turn started a background process
    memory: MemoryAccess  # the memory toolset
    skills: SkillsAccess  # the skills toolset
    schedules: SchedulesAccess  # the schedule toolset
    board: BoardAccess  # the board toolset
    delegation: DelegationAccess  # delegate (never offered to a sub-agent's turn)
    # The running channel service (the chat a turn answers to, send_file, poll), or None
    # while no channel runs in this process: it is made after the tools.
    channels: Callable[[], ChannelService | None]
    # Where paid generations and web searches are recorded; None: nowhere.
    usage: UsageLedger | None = None
    # Where tools read their API keys (the process environment over the home's .env).
    env: Environment | None = None
    # The device nodes (nodes_list, node_invoke join core); None without `nodes:`.
    nodes: NodeHub | None = None
    # The agents' browsers (the browser toolset, closed with the registry); None: no agent
    # lists the toolset, so it is not offered (and nothing of it is imported).
    browsers: BrowserFleet | None = None
    # The home's meetings (the meeting toolset); None: its calls say it is unavailable.
    meetings: MeetingDesk | None = None


def chats_run(config: Config) -> bool:
    """True when any chat runs for this home: a configured channel, or the web chat of
    the HTTP server (a channel account of its own even without a `channels:` entry)."""
    return bool(config.channels) or config.http is not None


def _check_hardline(command: str) -> str | None:
    """tools.hardline's check, its shell parser loaded by the first command checked (a
    turn that runs none, as most one-shot runs, never pays for it)."""
    from habakkuk.tools.hardline import check_hardline

    return check_hardline(command)


def build_tools(config: Config, services: ToolServices) -> ToolRegistry:
    """The built-in tools on `services`, registered by toolset."""
    from habakkuk.engine.toolkit.registry import Tool
    from habakkuk.tools.clarify import Clarify
    from habakkuk.tools.edit import EditFile
    from habakkuk.tools.fetch_tool import FetchUrl
    from habakkuk.tools.files import ListDir, ReadFile, WriteFile
    from habakkuk.tools.patch_tool import ApplyPatch
    from habakkuk.tools.process_tools import process_tools
    from habakkuk.tools.search_tool import SearchFiles
    from habakkuk.tools.todo import Todo

    registry = ToolRegistry(hardline=_check_hardline, inline_budget=config.tools.inline_budget)
    core: list[Tool] = [
        ReadFile(),
        WriteFile(),
        EditFile(),
        ListDir(),
        ApplyPatch(),
        SearchFiles(),
        *process_tools(services.processes, services.process_started),
        FetchUrl(allow_private=config.tools.allow_private_urls),
        Todo(),
        Clarify(),
    ]
    for tool in core:
        registry.register(tool, "core")
    from habakkuk.tools.web_search.tool import web_search_tool

    # Always offered: without a search: section it reads DuckDuckGo's page.
    search = web_search_tool(config.search, env=services.env, usage=services.usage)
    registry.register(search, "core")
    from habakkuk.tools.view_image import ViewImage

    registry.register(ViewImage(allow_private=config.tools.allow_private_urls), "media")
    from habakkuk.tools.documents.tool import ReadDocument

    registry.register(ReadDocument(), "media")
    from habakkuk.knowledge.tools import memory_tools

    for tool in memory_tools(services.memory):
        registry.register(tool, "memory")
    from habakkuk.knowledge.skills.tools import skills_tools

    for tool in skills_tools(services.skills):
        registry.register(tool, "skills")
    from habakkuk.work.tools import schedule_tools

    for tool in schedule_tools(services.schedules, services.channels):
        registry.register(tool, "schedule")
    from habakkuk.work.board_tools import board_tools

    for tool in board_tools(services.board, services.channels):
        registry.register(tool, "board")
    from habakkuk.work.delegation_tools import delegate_tools

    for tool in delegate_tools(services.delegation):
        registry.register(tool, "delegate")
    from habakkuk.tools.generate import generation_tools

    for tool in generation_tools(config, services.usage, services.env):  # offered when configured
        registry.register(tool, "media")
    if config.nodes is not None:
        from habakkuk.protocols.nodes.tools import node_tools

        for tool in node_tools(services.nodes, config.nodes):
            registry.register(tool, "core")
    if config.homeassistant is not None:  # offered to the agents that list the toolset
        from habakkuk.protocols.homeassistant.tools import homeassistant_tools

        for tool in homeassistant_tools(config.homeassistant, services.env):
            registry.register(tool, "homeassistant")
    # The opt-in toolsets (engine/toolsets.py OPT_IN_TOOLSETS): built, and their modules
    # imported, only when an agent lists them.
    if services.browsers is not None:
        from habakkuk.tools.browser.tools import browser_tools

        for tool in browser_tools(services.browsers):
            registry.register(tool, "browser")
        registry.on_close(services.browsers.close)
    if listed(config, "a2a"):
        from habakkuk.protocols.a2a.client import A2APeers
        from habakkuk.protocols.a2a.tools import a2a_tools

        peers = A2APeers(config.a2a, services.env, allow_private=config.tools.allow_private_urls)
        for tool in a2a_tools(peers):
            registry.register(tool, "a2a")
    if listed(config, "computer", "computer-open"):
        from habakkuk.tools.computer import register_computer

        register_computer(registry, config)
    if listed(config, "meeting"):
        from habakkuk.tools.meeting.tools import meeting_tools

        for tool in meeting_tools(services.meetings, services.channels):
            registry.register(tool, "meeting")
    if chats_run(config):
        from habakkuk.channels.service import register_tools

        register_tools(registry, services.channels, config.tts, services.env)
    return registry


def listed(config: Config, *toolsets: str) -> bool:
    """Does any agent list one of `toolsets` (an opt-in toolset is offered only then)?"""
    return any(name in agent.toolsets for agent in config.agents.values() for name in toolsets)


def offered_meetings(root: Path, queue: JobQueue, config: Config) -> MeetingDesk | None:
    """`meetings` where an agent lists the meeting toolset, else None: nothing calls the
    desk then, and its modules stay unloaded. The meeting job kind is declared all the
    same, so any process takes back an interrupted meeting job."""
    from habakkuk.tools.meeting import kind as _kind  # noqa: F401  # the meeting job kind

    return meetings(root, queue, config) if listed(config, "meeting") else None


def meetings(root: Path, queue: JobQueue, config: Config) -> MeetingDesk:
    """The home's meetings, as the meeting toolset records and queues them (limits from
    the config's `meeting:` section)."""
    from habakkuk.tools.meeting.desk import MeetingDesk

    section = config.meeting
    return MeetingDesk(
        root, queue, default_limit=section.duration_seconds, max_duration=section.max_seconds
    )


def browser_fleet(root: Path, config: Config) -> BrowserFleet | None:
    """The agents' browsers of a home (none starts before an agent's first browser call);
    None when no agent lists the browser toolset."""
    if not listed(config, "browser"):
        return None
    from habakkuk.tools.browser.fleet import BrowserFleet, agent_settings

    return BrowserFleet(root, agent_settings(config))
