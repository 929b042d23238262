"""Tool search: agents with very many tools see the core ones plus a way to find the rest.

When an agent's toolsets hold more tools than `tool_search_over` (default 60;
-1 turns it off), each model call offers the core toolset's tools plus
tool_search(query, limit?) and tool_describe(name). Both end their result with
a `[callable now: ...]` line; the tools it names are appended to the offered
list from the next model call on, after the ones already there, so the start
of the list (and the provider's cached prefix) never moves. The list is read
back from the transcript at every step, in the order found, so it is stable
for the session and survives restarts; a compaction's summary ends with the
line of the tools its folded messages had unlocked, so it survives folding too.
Only results of tool_search and tool_describe calls (and that summary line)
count, so no other tool's output can unlock tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from habakkuk.engine.config import AgentConfig
from habakkuk.engine.llm.types import Message
from habakkuk.engine.sessions import SUMMARY_PREFIX
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry

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
        "Find tools by what they do. This agent has more tools than are listed; search them "
        "with a few words (e.g. 'create github issue'). The tools found become callable from "
        "your next step on."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words describing the task"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    risk = Risk.READ

    def title(self, args: dict[str, Any]) -> str:
        return str(args.get("query", ""))[:200]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        limit = int(args.get("limit") or DEFAULT_LIMIT)
        found = rank(_catalog(ctx), str(args["query"]))[:limit]
        if not found:
            return ToolOutput(f"no tool matches {args['query']!r}\n{callable_line([])}")
        lines = []
        for _, tool in found:
            summary = (tool.description.strip().splitlines() or [""])[0][:160]
            lines.append(f"- {tool.name}: {summary}")
        lines.append(callable_line([t.name for _, t in found]))
        return ToolOutput("\n".join(lines))


class ToolDescribeTool(Tool):
    name = DESCRIBE
    description = "Show one tool's full description and input schema (it becomes callable)."
    input_schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the tool's exact name"}},
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


def unlocked(messages: Sequence[Message]) -> list[str]:
    """Tool names from the [callable now: ...] lines of tool_search/describe results, in order.

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
        for result in message.tool_results:
            if result.tool_use_id in searches and not result.is_error:
                add(result.text)
    return names


def _is_summary(message: Message) -> bool:
    return message.role == "user" and message.text.startswith(SUMMARY_PREFIX)


class ToolSearchView:
    """The turn's `tool_view`: which of an agent's tools to offer at each model call."""

    def __init__(self, registry: ToolRegistry):
        self.registry = registry
        self.search = ToolSearchTool()
        self.describe = ToolDescribeTool()
        registry.register(self.search, TOOLSET)
        registry.register(self.describe, TOOLSET)

    def applies(self, agent: AgentConfig, tools: Sequence[Tool]) -> bool:
        limit = agent.tool_search_over
        return limit >= 0 and len(tools) > limit

    def __call__(
        self, agent: AgentConfig, tools: Sequence[Tool], messages: Sequence[Message]
    ) -> list[Tool]:
        """All `tools`, or core + search + what the transcript unlocked (stable order)."""
        if not self.applies(agent, tools):
            return list(tools)
        core = {t.name for t in self.registry.tools_for(["core"])}
        offered = [t for t in tools if t.name in core]
        offered += [self.search, self.describe]
        by_name = {t.name: t for t in tools}
        for name in unlocked(messages):
            tool = by_name.get(name)
            if tool is not None and tool not in offered:
                offered.append(tool)
        return offered

    def carry(self, folded: Sequence[Message]) -> str:
        """The folded messages' unlocked tools as a [callable now: ...] line for the summary.

        Without it, a tool found before a compaction would drop out of the offer once
        the search result is folded away (the summary is the model's prose).
        """
        names = unlocked(folded)
        return callable_line(names) if names else ""
