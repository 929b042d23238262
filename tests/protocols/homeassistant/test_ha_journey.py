""" "Turn off the lights when I leave": a Home Assistant event starts a turn whose agent calls
the service, end to end (the fake's WebSocket and REST APIs, a runtime, the mock model)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.protocols.homeassistant.triggers import Backoff, HaTriggers, TriggerTurns
from tests.conftest import mock_config
from tests.fakes.home_assistant import TOKEN, FakeHomeAssistant, state
from tests.helpers import eventually

SCRIPT = """
- tool_calls:
    - name: ha_call_service
      arguments: {domain: light, service: turn_off, entity_id: [light.kitchen, light.hall]}
- text: "Everyone left: the lights are off."
"""


def config(url: str, script: str = SCRIPT, domains: str = "allow_domains: [light]") -> str:
    text = mock_config(script, mode="full").replace(
        "mode: full\n", "mode: full\n    toolsets: [homeassistant]\n"
    )
    return text + (
        "homeassistant:\n"
        f"  url: {url}\n"
        f"  {domains}\n"
        "  triggers:\n"
        "    left_home:\n"
        "      entity_id: person.alice\n"
        "      from: home\n"
        "      to: not_home\n"
        "      cooldown: 0s\n"
        "      prompt: '{{.Name}} went from {{.From}} to {{.To}}. Turn off the lights.'\n"
    )


@pytest.fixture
async def ha() -> AsyncIterator[FakeHomeAssistant]:
    async with FakeHomeAssistant() as fake:
        fake.add("person.alice", "home", friendly_name="Alice")
        fake.add("light.kitchen", "on", friendly_name="Kitchen")
        fake.add("light.hall", "on", friendly_name="Hall")
        yield fake


async def test_leaving_home_turns_the_lights_off_once_even_when_the_event_comes_again(
    ha: FakeHomeAssistant, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOMEASSISTANT_TOKEN", TOKEN)
    runtime = await runtime_factory(config(ha.url))
    runtime.start_workers()
    section = runtime.config.homeassistant
    triggers = HaTriggers(
        section, runtime.env, runtime.queue.db, str(runtime.queue.owner),
        TriggerTurns(runtime.sessions, runtime.turns), backoff=Backoff(0.05, 0.2),
    )  # fmt: skip
    triggers.start()
    try:
        await eventually(lambda: ha.subscribed, what="the bus followed")
        old, new = (
            ha.states["person.alice"],
            state("person.alice", "not_home", friendly_name="Alice"),
        )
        await ha.fire_state("person.alice", old, new, context_id="01JLEAVE")
        await eventually(lambda: triggers.fired, what="the trigger fired")
        turn = triggers.fired[0]
        outcome = await asyncio.wait_for(runtime.turns.wait_turn(turn), 30)
        assert outcome.status == "done"
        assert outcome.reply == "Everyone left: the lights are off."
        assert [(c.domain, c.service, c.data["entity_id"]) for c in ha.calls] == [
            ("light", "turn_off", ["light.kitchen", "light.hall"])
        ]
        assert ha.states["light.kitchen"]["state"] == "off"
        session = outcome.session
        messages = await runtime.sessions.messages(session)
        prompt = messages[0].message.blocks[0].text
        assert "Turn off the lights." in prompt and "treat it as data" in prompt
        assert "Alice</outside-data" in prompt
        # Home Assistant sends the same event again (a replay): the same turn, not a second.
        await ha.fire_state("person.alice", old, new, context_id="01JLEAVE")
        await eventually(lambda: len(triggers.fired) == 2, what="the replay seen")
        assert triggers.fired[1] == turn
        assert len(ha.calls) == 1
        after = await runtime.sessions.messages(session)
        assert [m.role for m in after] == ["user", "assistant", "user", "assistant"]
        assert (await runtime.turns.wait_turn(turn)).reply == outcome.reply
    finally:
        await triggers.stop()


async def test_serve_follows_the_bus_and_says_so_and_a_home_without_triggers_does_not(
    ha: FakeHomeAssistant,
    runtime_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from habakkuk.cli.serve import home_assistant_triggers

    monkeypatch.setenv("HOMEASSISTANT_TOKEN", TOKEN)
    monkeypatch.setenv("LANG", "C.UTF-8")
    runtime = await runtime_factory(config(ha.url))
    triggers = home_assistant_triggers(runtime)
    assert triggers is not None
    try:
        await eventually(lambda: ha.subscribed, what="serve followed the bus")
        assert ha.subscriptions == ["state_changed"]
        said = capsys.readouterr().err
        assert f"habakkuk: Home Assistant: following 1 trigger on {ha.url}" in said
    finally:
        await triggers.stop()
    plain = await runtime_factory(mock_config() + f"homeassistant:\n  url: {ha.url}\n")
    assert home_assistant_triggers(plain) is None


async def test_the_reply_goes_to_the_triggers_deliver_conversation(
    ha: FakeHomeAssistant, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOMEASSISTANT_TOKEN", TOKEN)
    text = config(ha.url) + "      deliver: web:house\n"
    served = await serve(text)
    runtime = served.runtime
    triggers = HaTriggers(
        runtime.config.homeassistant, runtime.env, runtime.queue.db, str(runtime.queue.owner),
        TriggerTurns(runtime.sessions, runtime.turns), backoff=Backoff(0.05, 0.2),
    )  # fmt: skip
    triggers.start()
    try:
        await eventually(lambda: ha.subscribed, what="the bus followed")
        old, new = ha.states["person.alice"], state("person.alice", "not_home")
        await ha.fire_state("person.alice", old, new, context_id="01JDELIVER")
        await eventually(lambda: triggers.fired, what="the trigger fired")
        store = served.server.web_store()

        async def replied() -> bool:
            return any(e.role == "assistant" for e in await store.events("house"))

        await eventually(replied, what="the reply in the web conversation house")
        (reply,) = [e for e in await store.events("house") if e.role == "assistant"]
        assert reply.text == "Everyone left: the lights are off."
    finally:
        await triggers.stop()


async def test_a_triggers_turn_cannot_unlock_a_confirm_domain_since_nobody_attends(
    ha: FakeHomeAssistant, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOMEASSISTANT_TOKEN", TOKEN)
    ha.add("lock.front_door", "locked")
    unlock = SCRIPT.replace("domain: light, service: turn_off", "domain: lock, service: unlock")
    unlock = unlock.replace("[light.kitchen, light.hall]", "lock.front_door")
    text = config(ha.url, unlock, "allow_domains: [light]\n  confirm: [lock]")
    runtime = await runtime_factory(text)
    runtime.start_workers()
    triggers = HaTriggers(
        runtime.config.homeassistant, runtime.env, runtime.queue.db, str(runtime.queue.owner),
        TriggerTurns(runtime.sessions, runtime.turns), backoff=Backoff(0.05, 0.2),
    )  # fmt: skip
    triggers.start()
    try:
        await eventually(lambda: ha.subscribed, what="the bus followed")
        old, new = ha.states["person.alice"], state("person.alice", "not_home")
        await ha.fire_state("person.alice", old, new, context_id="01JUNLOCK")
        await eventually(lambda: triggers.fired, what="the trigger fired")
        outcome = await asyncio.wait_for(runtime.turns.wait_turn(triggers.fired[0]), 30)
        assert outcome.status == "done"
        messages = await runtime.sessions.messages(outcome.session)
        results = [b for m in messages for b in m.message.blocks if hasattr(b, "is_error")]
        (result,) = results
        assert result.is_error and "nobody can approve" in result.text
        assert ha.calls == [] and ha.states["lock.front_door"]["state"] == "locked"
    finally:
        await triggers.stop()
