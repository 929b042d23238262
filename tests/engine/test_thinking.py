"""/think: a session's reasoning effort reaches every model request of its turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError, HabakkukError
from habakkuk.engine.home import Home
from tests.fakes.model_server import FakeModelServer, Reply


def _config(base_url: str, thinking: str | None = None) -> str:
    agent_thinking = f"    thinking: {thinking}\n" if thinking else ""
    return (
        "providers:\n"
        "  fake:\n"
        "    type: openai\n"
        f"    base_url: {base_url}/v1\n"
        "    key_env: FAKE_KEY\n"
        "agents:\n"
        "  main:\n"
        "    model: fake/gpt-fake\n" + agent_thinking
    )


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


async def _turn(runtime: Any, session: str, text: str) -> None:
    turn = await runtime.turns.submit(session, text)
    outcome = await runtime.turns.wait_turn(turn, poll=0.05)
    assert outcome.status == "done", outcome


async def test_think_level_is_sent_with_the_sessions_requests_and_default_clears_it(
    server: FakeModelServer, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    runtime = await runtime_factory(_config(server.base_url))
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session()
    server.script(Reply("one"), Reply("two"), Reply("three"))

    await _turn(runtime, session.id, "plain")
    assert "reasoning_effort" not in server.requests[-1].json

    assert await runtime.settings.set_session_thinking(session.id, "High") == ("high", True)
    assert await runtime.settings.session_thinking(session.id) == ("high", True)
    await _turn(runtime, session.id, "think hard")
    assert server.requests[-1].json["reasoning_effort"] == "high"

    assert await runtime.settings.set_session_thinking(session.id, "default") == ("off", False)
    assert await runtime.settings.session_thinking(session.id) == ("off", False)
    await _turn(runtime, session.id, "plain again")
    assert "reasoning_effort" not in server.requests[-1].json


async def test_the_agents_thinking_setting_applies_until_a_session_overrides_it(
    server: FakeModelServer, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")
    runtime = await runtime_factory(_config(server.base_url, thinking="medium"))
    runtime.start_workers(channels=False)
    first = await runtime.sessions.new_session()
    other = await runtime.sessions.new_session()
    server.script(Reply("a"), Reply("b"))

    await runtime.settings.set_session_thinking(first.id, "off")
    await _turn(runtime, first.id, "quick")
    assert "reasoning_effort" not in server.requests[-1].json
    # A session's choice is its own: another session keeps the agent's setting.
    assert await runtime.settings.session_thinking(other.id) == ("medium", False)
    await _turn(runtime, other.id, "considered")
    assert server.requests[-1].json["reasoning_effort"] == "medium"


async def test_an_unknown_level_is_refused_with_the_levels_named(runtime_factory: Any) -> None:
    runtime = await runtime_factory(
        "providers:\n  mock:\n    type: mock\nagents:\n  main:\n    model: mock/x\n"
    )
    session = await runtime.sessions.new_session()
    with pytest.raises(HabakkukError, match=r"unknown level 'extreme' \(levels: off, low"):
        await runtime.settings.set_session_thinking(session.id, "extreme")
    assert await runtime.settings.session_thinking(session.id) == ("off", False)


def test_a_bad_thinking_value_in_config_names_the_line_and_key(tmp_path: Path) -> None:
    text = "providers:\n  mock:\n    type: mock\nagents:\n  main:\n    model: mock/x\n"
    text += "    thinking: maximum\n"
    path = tmp_path / "config.yaml"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, path, Home(tmp_path))
    assert "config.yaml:7: agents.main.thinking" in str(caught.value)
