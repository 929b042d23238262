"""The issue's "done when": a user asks the agent to book a table on a site that needs
clicks, and it does, inside the guard. The real turn loop, a fake model server that reads
each snapshot as a model would, and a real Chromium against a booking page on 127.0.0.1;
the runtime's shutdown leaves no browser behind."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply, ToolCall
from tests.helpers import eventually_sync
from tests.tools.browser.conftest import Site, needs_chromium
from tests.tools.browser.test_browser_lifecycle import browsers_on

pytestmark = [needs_chromium, pytest.mark.timeout(240)]


def config(model_url: str) -> str:
    return (
        "providers:\n"
        f"  remote:\n    type: openai\n    base_url: {model_url}/v1\n    key_env: REMOTE_KEY\n"
        "agents:\n  main:\n    model: remote/gpt-fake\n    mode: workspace\n"
        "    toolsets: [core, browser]\n"
        "title_model: 'off'\n"
        "checkpoints: false\n"
        "browser:\n  allow_private: ['127.0.0.1']\n"
    )


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def _ref(snapshot: str, label: str) -> int:
    line = next(line for line in snapshot.splitlines() if label in line)
    found = re.search(r"\[ref=(\d+)\]", line)
    assert found, line
    return int(found.group(1))


def booking_model(url: str) -> Any:
    """A model that books a table: open, look, fill in, choose, press Book, answer."""

    def respond(request: RecordedRequest) -> Reply:
        messages = (request.json or {}).get("messages", [])
        results = [_content(m) for m in messages if m.get("role") == "tool"]
        step = len(results)
        if step == 0:
            return Reply(tool_calls=[ToolCall("browser_navigate", {"url": url})])
        if step == 1:
            return Reply(tool_calls=[ToolCall("browser_snapshot", {})])
        snapshot = results[1]
        if step == 2:
            args = {"ref": _ref(snapshot, 'textbox "Name"'), "text": "Ada Lovelace"}
            return Reply(tool_calls=[ToolCall("browser_type", args)])
        if step == 3:
            args = {"ref": _ref(snapshot, "combobox"), "values": ["Four people"]}
            return Reply(tool_calls=[ToolCall("browser_select", args)])
        if step == 4:
            args = {"ref": _ref(snapshot, 'button "Book"')}
            return Reply(tool_calls=[ToolCall("browser_click", args)])
        return Reply(text="Your table for four is booked.")

    return respond


async def test_the_agent_books_a_table_on_a_page_that_needs_clicks(
    runtime_factory: Any,
    model_server: FakeModelServer,
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    runtime = await runtime_factory(config(model_server.base_url))
    model_server.responder = booking_model(site.url("/form"))
    session = (await runtime.sessions.new_session("main")).id
    runtime.start_workers()
    turn = await runtime.turns.submit(session, "book a table for four", attended=False)
    outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 120)
    assert outcome.status == "done", outcome.error
    assert site.posted == [{"name": "Ada Lovelace", "size": "4"}]
    [snapshot] = [
        _content(m)
        for m in (model_server.requests[-1].json or {})["messages"]
        if m.get("role") == "tool" and "Book a table" in _content(m)
    ]
    assert snapshot.startswith("[page content follows")
    profile = runtime.home.root / "browser" / "main"
    assert browsers_on(profile)
    await runtime.tools.close()  # as the runtime closes: the toolsets' browsers
    eventually_sync(lambda: not browsers_on(profile), what="the browser to end at shutdown")
