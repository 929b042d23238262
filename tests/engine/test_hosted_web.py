"""The provider's hosted web search and fetch, through the real turn loop and the fake
model server speaking each API's wire: declared where the model has them (never for
Chat Completions, never with `web: false`), their blocks stored verbatim and replayed
only to the same provider, shown as placeholders by compaction and exports,
pause_turn resent with the conversation unchanged (and bounded), usage recorded."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from habakkuk.engine.agent.turn import MAX_PAUSES
from habakkuk.engine.llm.hosted import (
    hosted_web,
    is_paused,
    offered,
    pause_mark,
    sources_note,
    without_sources,
)
from habakkuk.engine.llm.pricing import PriceTable
from habakkuk.engine.llm.types import Message, OpaqueBlock, ToolSpec, Usage
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolOutput
from tests.fakes.model_server import FakeModelServer, Reply, WebFetch, WebSearch
from tests.server.conftest import ServeFactory, serve

__all__ = ["serve"]

WHATSNEW = "https://docs.python.org/3.14/whatsnew/3.14.html"
CITED = [(WHATSNEW, "What's New")]
SEARCH = WebSearch("python 3.14 new features", [("What's New In Python 3.14", WHATSNEW)])


class OwnWebSearch(Tool):
    """Our own function tool named like the provider's hosted search."""

    name = "web_search"
    description = "search the web"
    input_schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    risk = Risk.NETWORK

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("no results")


def config(
    url: str,
    *,
    model: str = "claude/claude-sonnet-4-5",
    web: bool | None = None,
    compact_at: int | None = None,
) -> str:
    """Three providers on the fake server (Anthropic, Responses, Chat) and one agent."""
    text = (
        "providers:\n"
        f"  claude:\n    type: anthropic\n    base_url: {url}\n    key_env: FAKE_KEY\n"
        f"  oai:\n    type: responses\n    base_url: {url}/v1\n    key_env: FAKE_KEY\n"
        f"  chat:\n    type: openai\n    base_url: {url}/v1\n    key_env: FAKE_KEY\n"
        f"agents:\n  main:\n    model: {model}\n"
    )
    if web is not None:
        text += f"    web: {'true' if web else 'false'}\n"
    if compact_at is not None:
        text += f"    compact_at: {compact_at}\n"
    return text


@pytest.fixture
def server(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    monkeypatch.setenv("FAKE_KEY", "k")
    return model_server


async def started(runtime_factory: Any, text: str) -> Any:
    runtime = await runtime_factory(text)
    runtime.tools.register(OwnWebSearch(), "core")
    runtime.start_workers(channels=False)
    return runtime


async def turn(runtime: Any, session: str, text: str) -> Any:
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session, text), poll=0.05)
    assert outcome.status == "done", outcome
    return outcome


def tool_types(request: Any) -> list[str]:
    return [t.get("type", "function") for t in request.json.get("tools", [])]


def function_names(request: Any) -> list[str]:
    tools = request.json.get("tools", [])
    return [t["name"] for t in tools if t.get("type", "function") == "function"]


def anthropic_blocks(request: Any) -> list[dict[str, Any]]:
    return [b for m in request.json["messages"] for b in m["content"]]


def responses_items(request: Any) -> list[dict[str, Any]]:
    return list(request.json["input"])


# -- declared where the model has them ---------------------------------------------------


async def test_anthropic_gets_hosted_search_and_fetch_in_place_of_our_web_search(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url))
    session = await runtime.sessions.new_session()
    server.script(Reply("hello"))
    await turn(runtime, session.id, "hi")
    (sent,) = server.requests
    tools = sent.json["tools"]
    hosted = [t for t in tools if "type" in t]
    assert hosted[0] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    assert hosted[1]["type"] == "web_fetch_20250910" and hosted[1]["name"] == "web_fetch"
    assert tools[-1]["cache_control"] == {"type": "ephemeral"}  # the cached prefix ends there
    # Our function tool of that name is not offered beside it (two would be a 400).
    assert "web_search" not in function_names(sent)
    assert "fetch_url" in function_names(sent)  # it stays, for private URLs


async def test_web_false_declares_no_hosted_tool_and_offers_our_web_search(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url, web=False))
    session = await runtime.sessions.new_session()
    server.script(Reply("hello"))
    await turn(runtime, session.id, "hi")
    (sent,) = server.requests
    assert set(tool_types(sent)) == {"function"}
    assert "web_search" in function_names(sent)


async def test_chat_completions_providers_get_no_hosted_tool(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url, model="chat/gpt-5"))
    session = await runtime.sessions.new_session()
    server.script(Reply("hello"))
    await turn(runtime, session.id, "hi")
    (sent,) = server.requests
    assert sent.api == "chat"
    assert {t["type"] for t in sent.json["tools"]} == {"function"}
    names = [t["function"]["name"] for t in sent.json["tools"]]
    assert "web_search" in names and "fetch_url" in names


async def test_a_model_without_hosted_tools_gets_none_on_the_same_provider(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url, model="claude/claude-3-haiku"))
    session = await runtime.sessions.new_session()
    server.script(Reply("hello"))
    await turn(runtime, session.id, "hi")
    assert set(tool_types(server.requests[0])) == {"function"}


async def test_a_provider_refusing_the_hosted_tools_fails_the_turn_saying_web_false_fixes_it(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url))
    server.no_hosted_tools = {"claude-sonnet-4-5"}
    session = await runtime.sessions.new_session()
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hi"), poll=0.05)
    assert outcome.status == "failed"
    assert "web_search_20250305" in (outcome.error or "")
    assert "set `web: false` on the agent" in (outcome.error or "")


# -- stored verbatim, replayed to the same provider only ----------------------------------


async def test_anthropic_search_blocks_are_stored_verbatim_and_replayed_as_they_came(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url))
    session = await runtime.sessions.new_session()
    server.script(
        Reply(
            "Python 3.14 brings template strings.",
            web=[SEARCH, WebFetch(WHATSNEW, "Template strings ...")],
            citations=[(WHATSNEW, "What's New In Python 3.14")],
        ),
        Reply("You're welcome."),
    )
    with runtime.bus.subscribe(lambda e: e.kind == "turn.text") as texts:
        first = await turn(runtime, session.id, "what's new in python 3.14?")
        streamed = ""
        while len(streamed) < len(first.reply):
            streamed += (await asyncio.wait_for(texts.get(), 5)).data["text"]
    # The answer keeps its sources, streamed and in the reply.
    note = f"\n\nSources:\n- [What's New In Python 3.14]({WHATSNEW})"
    assert first.reply == "Python 3.14 brings template strings." + note
    assert streamed == first.reply
    stored = (await runtime.sessions.messages(session.id))[1].message
    opaque = [b for b in stored.blocks if isinstance(b, OpaqueBlock)]
    assert [b.provider for b in opaque] == ["anthropic"] * 4
    assert [b.data["type"] for b in opaque] == [
        "server_tool_use",
        "web_search_tool_result",
        "server_tool_use",
        "web_fetch_tool_result",
    ]
    assert opaque[0].data["input"] == {"query": "python 3.14 new features"}
    assert opaque[1].data["content"][0]["url"] == WHATSNEW
    assert opaque[1].data["content"][0]["encrypted_content"]  # kept for the replay

    await turn(runtime, session.id, "thanks")
    replayed = [b for b in anthropic_blocks(server.requests[1]) if b["type"] != "text"]
    assert replayed == [b.data for b in opaque]


async def test_responses_web_search_calls_are_stored_and_replayed_to_responses(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url, model="oai/gpt-5"))
    session = await runtime.sessions.new_session()
    server.script(
        Reply("3.14 adds t-strings.", web=[SEARCH], citations=[(WHATSNEW, "What's New")]),
        Reply("Glad to help."),
    )
    first = await turn(runtime, session.id, "what's new in python 3.14?")
    sent = server.requests[0]
    assert {"type": "web_search"} in sent.json["tools"]
    assert "web_search" not in function_names(sent)
    assert first.reply == f"3.14 adds t-strings.\n\nSources:\n- [What's New]({WHATSNEW})"
    stored = (await runtime.sessions.messages(session.id))[1].message
    (call,) = [b for b in stored.blocks if isinstance(b, OpaqueBlock)]
    assert call.provider == "responses" and call.data["type"] == "web_search_call"
    assert call.data["action"]["query"] == "python 3.14 new features"

    await turn(runtime, session.id, "thanks")
    assert call.data in responses_items(server.requests[1])


async def test_a_session_switched_to_another_provider_drops_the_blocks_and_gets_them_back(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url))
    session = await runtime.sessions.new_session()
    server.script(Reply("Found it.", web=[SEARCH]), Reply("From OpenAI."), Reply("Back."))
    await turn(runtime, session.id, "search please")
    opaque = [
        b.data
        for b in (await runtime.sessions.messages(session.id))[1].message.blocks
        if isinstance(b, OpaqueBlock)
    ]

    await runtime.settings.set_session_model(session.id, "oai/gpt-5")
    await turn(runtime, session.id, "and now?")
    to_openai = json.dumps(server.requests[1].json)
    assert "server_tool_use" not in to_openai and "web_search_tool_result" not in to_openai
    assert "Found it." in to_openai  # the words stay

    await runtime.settings.set_session_model(session.id, "claude/claude-sonnet-4-5")
    await turn(runtime, session.id, "and back?")
    assert [b for b in anthropic_blocks(server.requests[2]) if b["type"] != "text"] == opaque


# -- pause_turn ---------------------------------------------------------------------------


async def test_pause_turn_resends_the_conversation_unchanged_with_the_paused_message(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url))
    session = await runtime.sessions.new_session()
    server.script(
        Reply("Searching. ", web=[SEARCH], citations=CITED, stop_reason="pause_turn"),
        Reply("Python 3.14 adds t-strings.", citations=CITED),
    )
    outcome = await turn(runtime, session.id, "what's new in python 3.14?")
    note = f"\n\nSources:\n- [What's New]({WHATSNEW})"
    assert outcome.reply == "Searching. Python 3.14 adds t-strings." + note
    first, resent = server.requests
    assert resent.json["messages"][:-1] == first.json["messages"]
    paused = resent.json["messages"][-1]
    assert paused["role"] == "assistant"
    assert [b["type"] for b in paused["content"]] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert resent.json["tools"] == first.json["tools"]
    assert paused["content"][-1]["text"] == "Searching."  # no trailing space: a 400 else
    stored = [m.message for m in await runtime.sessions.messages(session.id)]
    assert [m.role for m in stored] == ["user", "assistant", "assistant"]
    assert is_paused(stored[1]) and not is_paused(stored[2])


async def test_a_turn_resumed_after_a_crash_mid_pause_sends_the_paused_message_again(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    """The transcript a crash left right after a paused reply was stored: the resumed
    turn resumes the provider's work instead of taking the paused text as the reply."""
    runtime = await runtime_factory(config(server.base_url))
    session = await runtime.sessions.new_session()
    use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    paused = Message("assistant", [OpaqueBlock("anthropic", use), pause_mark()])
    await runtime.transcripts.append(session.id, Message.user_text("go"), turn_id="turn_x")
    await runtime.transcripts.append(session.id, paused, turn_id="turn_x")
    await runtime.queue.enqueue(
        "turn_x", "turn", {"session": session.id, "text": "go"}, serial_key=session.id
    )
    server.script(Reply("Done searching."))
    runtime.start_workers(channels=False)
    outcome = await runtime.turns.wait_turn("turn_x", poll=0.05)
    assert outcome.status == "done" and outcome.reply == "Done searching."
    (resent,) = server.requests
    assert resent.json["messages"][-1] == {"role": "assistant", "content": [use]}


async def test_pause_turn_is_resent_at_most_max_pauses_times(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url))
    session = await runtime.sessions.new_session()
    paused = [Reply(f"p{i} ", stop_reason="pause_turn") for i in range(MAX_PAUSES + 1)]
    server.script(*paused, Reply("never sent"))
    outcome = await turn(runtime, session.id, "go")
    assert len(server.requests) == MAX_PAUSES + 1
    assert server.pending("anthropic") + server.pending() == 1
    assert outcome.reply == "".join(f"p{i} " for i in range(MAX_PAUSES + 1))


# -- placeholders, usage ------------------------------------------------------------------


async def test_compaction_and_exports_show_hosted_blocks_as_placeholders(
    server: FakeModelServer, runtime_factory: Any
) -> None:
    runtime = await started(runtime_factory, config(server.base_url, compact_at=5000))
    session = await runtime.sessions.new_session()
    server.script(
        Reply("Found it.", web=[SEARCH, WebFetch(WHATSNEW)]), Reply("SUMMARY"), Reply("ok")
    )
    await turn(runtime, session.id, "search please")
    # Over compact_at: the first turn is folded into a summary before this turn's call.
    await turn(runtime, session.id, "more " + "x" * 30_000)
    summarize = json.dumps(server.requests[1].json)
    assert "[web search: python 3.14 new features]" in summarize
    assert f"[web page fetched: {WHATSNEW}]" in summarize
    assert "encrypted_content" not in summarize and "server_tool_use" not in summarize

    markdown = await runtime.sessions.export_session(session.id, "md")
    assert "*[web search: python 3.14 new features]*" in markdown
    assert f"[web search results: What's New In Python 3.14 <{WHATSNEW}>]" in markdown
    assert f"*[web page fetched: {WHATSNEW}]*" in markdown
    page = await runtime.sessions.export_session(session.id, "html")
    assert "[web fetch: " in page and "encrypted_content" not in page
    shown = json.loads(await runtime.sessions.export_session(session.id, "json"))
    blocks = shown["messages"][1]["blocks"]
    assert {"type": "opaque", "provider": "anthropic", "text": f"[web fetch: {WHATSNEW}]"} in blocks
    assert "encrypted_content" not in json.dumps(shown)


async def test_hosted_searches_are_counted_and_priced_in_usage_and_shown_by_slash_usage(
    server: FakeModelServer, serve: ServeFactory
) -> None:
    served = await serve(config(server.base_url))
    server.script(Reply("Found it.", web=[SEARCH, SEARCH, WebFetch(WHATSNEW)]))
    sent = await served.post_json("/api/chat", {"conversation": "u", "text": "search"})
    await served.runtime.turns.wait_turn(sent["turn"])
    (total,) = await served.runtime.ledger.usage_totals(session=sent["session"])
    assert (total.web_searches, total.web_fetches) == (2, 1)
    tokens = PriceTable().cost("claude-sonnet-4-5", Usage(10, 5))
    assert tokens is not None and total.cost == pytest.approx(tokens + 2 * 10.0 / 1000)
    usage = await served.post_json("/api/chat", {"conversation": "u", "text": "/usage"})
    assert "2 web searches, 1 web fetch" in usage["message"]


# -- the table and the name rule ----------------------------------------------------------


def test_the_support_table_matches_families_and_their_exceptions() -> None:
    assert hosted_web("anthropic", "claude-opus-4-1-20250805", True).fetch
    assert hosted_web("anthropic", "claude-sonnet-4.5", True).search  # dots as dashes
    assert not hosted_web("anthropic", "claude-3-haiku-20240307", True)
    assert not hosted_web("anthropic", "claude-sonnet-4-5", False)  # web: false
    assert hosted_web("responses", "gpt-4.1-mini", True).search
    assert not hosted_web("responses", "gpt-4.1-nano", True)
    assert not hosted_web("responses", "o3-mini", True)
    assert not hosted_web("responses", "o30", True)
    assert not hosted_web("openai", "gpt-5", True)  # Chat Completions: never


def test_only_a_function_tool_the_hosted_one_names_is_left_out() -> None:
    ours = [ToolSpec("fetch_url", "", {}), ToolSpec("web_search", "", {})]
    assert offered(ours, hosted_web("anthropic", "claude-haiku-4-5", True)) == ours[:1]
    assert offered(ours, hosted_web("anthropic", "claude-haiku-4-5", False)) is ours
    assert offered(ours[:1], hosted_web("responses", "gpt-5", True)) == ours[:1]


def test_the_sources_note_lists_each_page_once_and_comes_off_a_json_answer() -> None:
    note = sources_note([(WHATSNEW, "What's [New]"), (WHATSNEW, "again"), ("", "no url")])
    assert note == f"\n\nSources:\n- [What's (New)]({WHATSNEW})"
    assert without_sources('{"ok": true}' + note) == '{"ok": true}'
    written = "Sources:\n- not a note"
    assert without_sources(written) == written
