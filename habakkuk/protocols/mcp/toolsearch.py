"""Tool search: agents see their everyday tools plus a way to load the rest on demand.

Each model call offers the agent's tools less the built-in ones that load on demand
(engine/toolsets.py ON_DEMAND_TOOLS: schedules, the board, processes, media, ...), plus
tool_search(query, limit?) and tool_describe(name); tool_search's description names the
tools that load on demand. When an agent's toolsets hold more tools than
`tool_search_over` (default 60; -1 turns tool search off and lists every tool), only
the core toolset's everyday tools are listed. tool_search and tool_describe end their
result with a `[callable now: ...]` line; the tools it names are appended to the offered
list from the next model call on, after the ones already there, so the start of the
list (and the provider's cached prefix) never moves. A direct call of an on-demand tool
by name runs too (the model may know it from the prompt) and loads it the same way.
The list is read back from the transcript at every step, in the order found, so it is
stable for the session and survives restarts; a compaction's summary ends with the line
of the tools its folded messages had unlocked, so it survives folding too. Only results
of tool_search and tool_describe calls (and that summary line) and the names of
on-demand tools the model called count, so no tool's output can unlock tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from habakkuk.engine.config import AgentConfig
from habakkuk.engine.llm.types import Message, ToolSpec
from habakkuk.engine.sessions import SUMMARY_PREFIX
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry
from habakkuk.engine.toolsets import ON_DEMAND_TOOLS

SEARCH = "tool_search"
DESCRIBE = "tool_describe"
TOOLSET = "tool_search"
DEFAULT_LIMIT = 8
MAX_LIMIT = 30
_CALLABLE = re.compile(r"^\[callable now: (.*)\]$", re.MULTILINE)


def callable_line(names: Sequence[str]) -> str:
    return f"[callable now: {', '.join(names)}]" if names else "[callable now: none]"


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def rank(catalog: Sequence[Tool], query: str) -> list[tuple[float, Tool]]:
    """Tools scored by the query: whole name words, then parts of names, then descriptions.

    Anything under two thirds of the best score is left out.
    """
    words = _words(query)
    scored: list[tuple[float, Tool]] = []
    for tool in catalog:
        name_words = set(_words(tool.name))
        name = tool.name.lower()
        description = tool.description.lower()
        score = 0.0
        for word in words:
            if word in name_words:
                score += 3
            elif word in name:
                score += 2
            elif word in description:
                score += 1
        if score > 0:
            scored.append((score, tool))
    if not scored:
        return []
    best = max(score for score, _ in scored)
    kept = [(s, t) for s, t in scored if s >= best * 2 / 3]
    kept.sort(key=lambda item: (-item[0], item[1].name))
    return kept


def _catalog(ctx: ToolContext) -> list[Tool]:
    catalog = ctx.tool_catalog
    if catalog is None:
        raise ToolError("tool search is not available in this turn")
    return [t for t in catalog if t.name not in (SEARCH, DESCRIBE)]


class ToolSearchTool(Tool):
    name = SEARCH
    description = (
        "Load tools not listed here: give a few words or exact names (e.g. 'schedule',"
        " 'memory_read'); what it finds is callable from your next step."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    risk = Risk.READ

    def __init__(self, listing: str = "") -> None:
        self.listing = listing  # what the agent can load, said after the description

    def spec(self) -> ToolSpec:
        """The description with this agent's listing (one spec per listing, reused)."""
        if not self.listing:
            return super().spec()
        cached: ToolSpec | None = self.__dict__.get("_listed")
        if cached is None:
            text = f"{self.description} {self.listing}"
            cached = self.__dict__["_listed"] = ToolSpec(self.name, text, self.input_schema)
        return cached

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("query", ""))[:200]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        limit = min(max(int(args.get("limit") or DEFAULT_LIMIT), 1), MAX_LIMIT)
        found = rank(_catalog(ctx), str(args["query"]))[:limit]
        if not found:
            return ToolOutput(f"no tool matches {args['query']!r}\n{callable_line([])}")
        lines = []
        for _, tool in found:
            summary = (tool.description.strip().splitlines() or [""])[0][:160]
            lines.append(f"- {tool.name}: {summary}")
        lines.append(callable_line([t.name for _, t in found]))
        return ToolOutput("\n".join(lines))


def listing(names: Sequence[str], others: bool) -> str:
    """What tool_search's description says an agent can load: its on-demand tools, those
    of one family folded (`board_{create,list}`), and "more" when `others` (MCP tools
    past tool_search_over)."""
    families: dict[str, list[str]] = {}
    parts = []
    for name in sorted(names):
        stem, _, last = name.rpartition("_")
        if stem:
            families.setdefault(stem, []).append(last)
        else:
            parts.append(name)
    for stem, lasts in families.items():
        parts.append(f"{stem}_{{{','.join(lasts)}}}" if len(lasts) > 1 else f"{stem}_{lasts[0]}")
    parts.sort()
    if others:
        parts.append("more (search by words)")
    return f"Loadable: {', '.join(parts)}." if parts else ""


class ToolDescribeTool(Tool):
    name = DESCRIBE
    description = "Show a tool's description and input schema; it becomes callable."
    input_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    risk = Risk.READ

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("name", ""))[:200]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        catalog = {t.name: t for t in _catalog(ctx)}
        tool = catalog.get(str(args["name"]))
        if tool is None:
            raise ToolError(f"no tool named {args['name']!r}; use tool_search to find one")
        schema = json.dumps(tool.input_schema, indent=2, ensure_ascii=False)
        text = f"{tool.name}\n\n{tool.description}\n\ninput schema:\n{schema}"
        return ToolOutput(f"{text}\n{callable_line([tool.name])}")


def unlocked(messages: Sequence[Message], direct: Collection[str] = ()) -> list[str]:
    """Tool names from the [callable now: ...] lines of tool_search/describe results and
    the calls of `direct` tools (on-demand tools called by name), in order.

    A compaction summary at the head of the view carries the names its folded
    messages had unlocked (see `ToolSearchView.carry`); they come first.
    """
    searches: set[str] = set()
    names: list[str] = []

    def add(text: str) -> None:
        for match in _CALLABLE.finditer(text):
            for name in match.group(1).split(","):
                name = name.strip()
                if name and name != "none" and name not in names:
                    names.append(name)

    if messages and _is_summary(messages[0]):
        add(messages[0].text)
    for message in messages:
        for use in message.tool_uses:
            if use.tool in (SEARCH, DESCRIBE):
                searches.add(use.tool_use_id)
            elif use.tool in direct and use.tool not in names:
                names.append(use.tool)
        for result in message.tool_results:
            if result.tool_use_id in searches and not result.is_error:
                add(result.text)
    return names


def _is_summary(message: Message) -> bool:
    return message.role == "user" and message.text.startswith(SUMMARY_PREFIX)


class ToolSearchView:
    """The turn's `tool_view`: which of an agent's tools to offer at each model call."""

    def __init__(self, registry: ToolRegistry, on_demand: frozenset[str] = ON_DEMAND_TOOLS):
        self.registry = registry
        self.on_demand = on_demand
        self.search = ToolSearchTool()
        self.describe = ToolDescribeTool()
        registry.register(self.search, TOOLSET)
        registry.register(self.describe, TOOLSET)
        # tool_search as offered, one per listing of what loads (a stable spec each)
        self._searches: dict[str, ToolSearchTool] = {}

    def applies(self, agent: AgentConfig, tools: Sequence[Tool]) -> bool:
        """Whether `agent` gets tool search: it has on-demand tools or more tools than
        its tool_search_over (-1: never; every tool is listed)."""
        limit = agent.tool_search_over
        if limit < 0:
            return False
        return len(tools) > limit or any(t.name in self.on_demand for t in tools)

    def reachable(self, agent: AgentConfig, tools: Sequence[Tool]) -> set[str]:
        """Tools a call may name even before they are offered: the on-demand ones."""
        if not self.applies(agent, tools):
            return set()
        return {t.name for t in tools if t.name in self.on_demand}

    def __call__(
        self, agent: AgentConfig, tools: Sequence[Tool], messages: Sequence[Message]
    ) -> list[Tool]:
        """All `tools`, or the listed ones + search + what the transcript unlocked (a
        stable order: the listed tools by name, then the rest in the order found)."""
        if not self.applies(agent, tools):
            return list(tools)
        listed = [t for t in tools if t.name not in self.on_demand]
        if len(tools) > agent.tool_search_over:
            core = {t.name for t in self.registry.tools_for(["core"])}
            listed = [t for t in listed if t.name in core]
        offered: list[Tool] = [*listed, self._search(tools, listed), self.describe]
        by_name = {t.name: t for t in tools}
        for name in unlocked(messages, self.on_demand):
            tool = by_name.get(name)
            if tool is not None and tool not in offered:
                offered.append(tool)
        return offered

    def _search(self, tools: Sequence[Tool], listed: Sequence[Tool]) -> ToolSearchTool:
        """tool_search with the listing of what this catalog loads on demand."""
        shown = {t.name for t in listed}
        hidden = [t.name for t in tools if t.name not in shown]
        loadable = [name for name in hidden if name in self.on_demand]
        text = listing(loadable, others=len(loadable) < len(hidden))
        search = self._searches.get(text)
        if search is None:
            search = self._searches[text] = ToolSearchTool(text)
        return search

    def carry(self, folded: Sequence[Message]) -> str:
        """The folded messages' unlocked tools as a [callable now: ...] line for the summary.

        Without it, a tool found before a compaction would drop out of the offer once
        the search result is folded away (the summary is the model's prose).
        """
        names = unlocked(folded, self.on_demand)
        return callable_line(names) if names else ""
