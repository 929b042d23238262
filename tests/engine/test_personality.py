"""/personality: a persona rides after the session's frozen system prompt in every request,
read at each turn, so the frozen prompt stays the cached prefix."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import Home
from habakkuk.engine.personas import BUILTIN
from habakkuk.runtime import Runtime
from tests.conftest import OpenRuntime
from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply


def _config(url: str, kind: str) -> str:
    base = f"{url}/v1" if kind == "openai" else url
    return (
        "providers:\n"
        f"  fake:\n    type: {kind}\n    base_url: {base}\n    key_env: FAKE_KEY\n"
        "title_model: off\n"
        "agents:\n  main:\n    model: fake/some-model\n"
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", "k")


async def _turn(runtime: Runtime, session: str, text: str) -> None:
    turn = await runtime.turns.submit(session, text)
    outcome = await runtime.turns.wait_turn(turn, poll=0.05)
    assert outcome.status == "done", outcome


def _anthropic_system(request: RecordedRequest) -> list[dict[str, Any]]:
    system: list[dict[str, Any]] = request.json["system"]
    return system


def _chat_system(request: RecordedRequest) -> str:
    first = request.json["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_anthropic_gets_the_persona_as_a_block_after_the_frozen_prompts_breakpoint(
    model_server: FakeModelServer, runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url, "anthropic"))
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session()
    model_server.script(Reply("one"), Reply("two"), Reply("three"), Reply("four"))
    (home.root / "personalities").mkdir()
    mine = home.root / "personalities" / "pirate.md"
    mine.write_text("Speak like a pirate.\n", encoding="utf-8")

    await _turn(runtime, session.id, "plain")
    assert await runtime.settings.set_session_personality(session.id, "pirate") == "pirate"
    await _turn(runtime, session.id, "ahoy")
    mine.write_text("Speak like a very old pirate.\n", encoding="utf-8")  # between turns
    await _turn(runtime, session.id, "again")
    mine.unlink()  # gone: the turn goes on without it
    await _turn(runtime, session.id, "and now")

    plain, ahoy, again, gone = (_anthropic_system(r) for r in model_server.requests)
    frozen = plain[0]
    assert len(plain) == 1 and frozen["cache_control"] == {"type": "ephemeral"}
    assert frozen["text"] == session.system_prompt
    assert ahoy == [frozen, {"type": "text", "text": "Speak like a pirate."}]
    assert again == [frozen, {"type": "text", "text": "Speak like a very old pirate."}]
    assert gone == [frozen]


async def test_prefix_cached_apis_get_the_persona_appended_to_the_frozen_prompt(
    model_server: FakeModelServer, runtime_factory: OpenRuntime
) -> None:
    runtime = await runtime_factory(_config(model_server.base_url, "openai"))
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session()
    model_server.script(Reply("one"), Reply("two"), Reply("three"))

    await runtime.settings.set_session_personality(session.id, "concise")
    await _turn(runtime, session.id, "brief please")
    await runtime.settings.set_session_personality(session.id, "default")
    await _turn(runtime, session.id, "as you like")
    other = await runtime.sessions.new_session()  # what /new makes: no persona
    await _turn(runtime, other.id, "hello")

    concise, cleared, fresh = (_chat_system(r) for r in model_server.requests)
    assert concise == f"{session.system_prompt}\n\n{BUILTIN['concise']}"
    assert concise.startswith(session.system_prompt)
    assert cleared == session.system_prompt
    assert BUILTIN["concise"] not in fresh
    assert await runtime.settings.session_personality(other.id) is None


async def test_a_persona_name_is_a_plain_name_among_the_choices(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(_config("http://127.0.0.1:9", "openai"))
    session = await runtime.sessions.new_session()
    (home.root / "secret.md").write_text("not a persona", encoding="utf-8")
    (home.root / "personalities").mkdir()
    (home.root / "personalities" / "mine.md").write_text("Mine.", encoding="utf-8")
    assert runtime.settings.personalities() == [*BUILTIN, "mine"]

    for name in ("../secret", "..", "mine.md", "nosuch", "a/b"):
        with pytest.raises(HabakkukError) as caught:
            await runtime.settings.set_session_personality(session.id, name)
        assert str(caught.value) == (
            f"/personality: unknown persona '{name}' "
            "(choices: concise, warm, formal, technical, playful, mine, default)"
        )
    assert await runtime.settings.session_personality(session.id) is None
    assert await runtime.settings.set_session_personality(session.id, "mine") == "mine"
    assert await runtime.settings.set_session_personality(session.id, "OFF") is None
