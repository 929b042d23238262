"""Lean requests: a default agent's first request stays small, and what it leaves out still
loads on demand (through tool_search, or a direct call by name) in a real turn."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from habakkuk.engine.config import AgentConfig
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.engine.toolsets import ON_DEMAND_TOOLS
from habakkuk.protocols.mcp.toolsearch import ToolSearchView, listing
from tests.conftest import OpenRuntime
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall
from tests.mcp.test_mcp_tool_search import make_tool

# Tools plus system text of a default agent's first request, at most (issue 33, part 6).
BUDGET = 8 * 1024
BOUND = 60.0
PROVIDERS = {
    "anthropic": ("type: anthropic\n    base_url: {url}", "claude-haiku-4-5"),
    "openai": ("type: openai\n    base_url: {url}/v1", "gpt-5-mini"),
}


def default_agent(kind: str, url: str) -> str:
    """A fresh home's agent as the starter writes it (no `toolsets:`: the default),
    on a fake model server speaking `kind`'s wire."""
    provider, model = PROVIDERS[kind]
    return (
        "providers:\n"
        f"  remote:\n    {provider.format(url=url)}\n    key_env: REMOTE_KEY\n"
        f"agents:\n  habakkuk:\n    model: remote/{model}\n    mode: full\n"
    )


@pytest.fixture
def srv(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("REMOTE_KEY", "k")
    return model_server


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def tools_and_system(kind: str, body: dict[str, Any]) -> tuple[int, int]:
    """Bytes of the tool schemas (as sent) and of the system text of a recorded request."""
    if kind == "anthropic":
        system = "".join(block["text"] for block in body.get("system", []))
    else:
        system = "".join(m["content"] for m in body["messages"] if m["role"] == "system")
    return _size(body.get("tools", [])), len(system.encode("utf-8"))


def tool_names(kind: str, body: dict[str, Any]) -> list[str]:
    """The function tools of a recorded request, in order (not the provider's hosted ones,
    which the Anthropic adapter puts last, in place of web_search)."""
    if kind == "anthropic":
        return [t["name"] for t in body["tools"] if "input_schema" in t]
    return [t["function"]["name"] for t in body["tools"]]


async def finish(runtime: Any, session: str, text: str) -> str:
    turn = await runtime.turns.submit(session, text)
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), BOUND)
    assert outcome.status == "done", outcome.error
    return str(outcome.reply)


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_a_default_agents_first_hello_sends_at_most_8_kb_of_tools_and_system_text(
    kind: str, runtime_factory: OpenRuntime, srv: FakeModelServer
) -> None:
    runtime = await runtime_factory(default_agent(kind, srv.base_url))
    srv.script(Reply(text="Hello!"))
    # A chat session, as the terminal app opens: the one-time welcome is in its prompt.
    session = await runtime.sessions.new_session("habakkuk", chat=True)
    assert "# Welcome" in session.system_prompt
    runtime.start_workers()
    await finish(runtime, session.id, "hello")
    body = srv.requests[0].json
    tools, system = tools_and_system(kind, body)
    assert tools + system <= BUDGET, f"{tools} B of tools + {system} B of system text"
    names = tool_names(kind, body)
    assert {"read_file", "edit_file", "exec", "memory_save", "tool_search"} <= set(names)
    assert not set(names) & ON_DEMAND_TOOLS
    # Nothing is lost: tool_search's description names what loads on demand.
    (search,) = [
        t
        for t in body["tools"]
        if t.get("name", t.get("function", {}).get("name")) == "tool_search"
    ]
    said = json.dumps(search)
    for family in ("schedule_{create,", "board_{", "delegate", "process_{", "view_image", "todo"):
        assert family in said, family


async def test_a_tool_that_loads_on_demand_is_found_and_called_and_the_prefix_holds(
    runtime_factory: OpenRuntime, srv: FakeModelServer
) -> None:
    runtime = await runtime_factory(default_agent("anthropic", srv.base_url))
    srv.script(
        Reply(tool_calls=[ToolCall("tool_search", {"query": "schedule"})]),
        Reply(
            tool_calls=[
                ToolCall(
                    "schedule_create",
                    {"name": "standup", "when": "0 9 * * 1-5", "prompt": "summarise the board"},
                )
            ]
        ),
        Reply(text="Scheduled."),
        Reply(tool_calls=[ToolCall("schedule_list", {})]),
        Reply(text="Here it is."),
    )
    session = await runtime.sessions.new_session("habakkuk")
    runtime.start_workers()
    await finish(runtime, session.id, "remind me of the standup on weekdays")
    await finish(runtime, session.id, "which schedules do I have?")
    results = [
        r for m in await runtime.sessions.messages(session.id) for r in m.message.tool_results
    ]
    assert "[callable now: " in results[0].text and "schedule_create" in results[0].text
    assert not results[1].is_error, results[1].text
    assert "standup" in results[2].text and not results[2].is_error
    offered = [tool_names("anthropic", r.json) for r in srv.requests]
    # Each request's list starts with the one before it: the cached prefix never moves;
    # the next turn of the session starts from the list the last one ended with.
    for before, after in itertools.pairwise(offered):
        assert after[: len(before)] == before
    assert "schedule_create" not in offered[0] and "schedule_create" in offered[1]
    assert offered[3] == offered[2]


async def test_an_on_demand_tool_called_by_name_runs_and_is_offered_from_then_on(
    runtime_factory: OpenRuntime, srv: FakeModelServer
) -> None:
    runtime = await runtime_factory(default_agent("openai", srv.base_url))
    srv.script(
        Reply(tool_calls=[ToolCall("todo", {"action": "add", "items": ["book the ferry"]})]),
        Reply(text="Noted."),
    )
    session = await runtime.sessions.new_session("habakkuk")
    runtime.start_workers()
    await finish(runtime, session.id, "note the ferry")
    (result,) = [
        r for m in await runtime.sessions.messages(session.id) for r in m.message.tool_results
    ]
    assert not result.is_error, result.text
    first, second = (tool_names("openai", r.json) for r in srv.requests)
    assert "todo" not in first and second == [*first, "todo"]


def test_tool_search_over_minus_one_lists_every_tool_again() -> None:
    registry = ToolRegistry()
    for name in ("read_file", "schedule_list", "todo"):
        registry.register(make_tool(name), "core")
    view = ToolSearchView(registry)
    agent = AgentConfig(model="m/x", toolsets=["core"])
    tools = registry.tools_for(agent.toolsets)
    assert [t.name for t in view(agent, tools, [])] == ["read_file", "tool_search", "tool_describe"]
    assert view.reachable(agent, tools) == {"schedule_list", "todo"}
    agent.tool_search_over = -1
    assert view(agent, tools, []) == tools and view.reachable(agent, tools) == set()


def test_the_listing_folds_families_and_names_mcp_tools_only_when_some_are_hidden() -> None:
    names = ["todo", "board_list", "apply_patch", "board_create", "user_profile_read"]
    assert listing(names, others=False) == (
        "Loadable: apply_patch, board_{create,list}, todo, user_profile_read."
    )
    assert listing(["todo"], others=True) == "Loadable: todo, more (search by words)."
    assert listing(["todo", "todo_more"], others=False) == "Loadable: todo, todo_more."
    assert listing([], others=False) == ""
