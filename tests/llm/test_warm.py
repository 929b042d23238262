"""A model client made ahead of its first call (ProviderHub.warm) is the one that call uses."""

from __future__ import annotations

import pytest

from habakkuk.engine.config import ModelRef, parse_config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.llm.adapters.streaming import ClientStreamingProvider
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.llm.provider import ProviderError
from habakkuk.engine.llm.router import Router
from habakkuk.engine.llm.types import Message, ModelRequest
from tests.fakes.model_server import FakeModelServer, Reply


def hub_on(home: Home, providers: str, **env: str) -> ProviderHub:
    text = f"providers:\n{providers}agents:\n  main: {{model: remote/gpt-fake}}\n"
    config = parse_config(text, home.config_path, home)
    return ProviderHub(config, Environment(overrides=env), home.root)


def hi() -> ModelRequest:
    return ModelRequest(model="", system="", messages=[Message.user_text("hi")])


def clients_of(hub: ProviderHub) -> int:
    provider = hub.provider(ModelRef("remote", "gpt-fake"))
    assert isinstance(provider, ClientStreamingProvider)
    return len(provider.clients)


async def test_the_client_warmed_for_an_agent_is_the_one_its_first_call_uses(
    home: Home, model_server: FakeModelServer
) -> None:
    line = f"  remote: {{type: openai, base_url: '{model_server.base_url}/v1', key_env: K}}\n"
    hub = hub_on(home, line, K="sk-warm")
    try:
        hub.warm_first(None)  # the default agent's model
        await hub.warmed()
        assert clients_of(hub) == 1
        model_server.script(Reply(text="warm hello"))
        result = await Router(hub).complete([ModelRef("remote", "gpt-fake")], hi())
        assert result.message.text == "warm hello"
        assert [r.api_key for r in model_server.requests] == ["sk-warm"]
        assert clients_of(hub) == 1  # the call made none of its own
    finally:
        await hub.aclose()


async def test_warming_without_a_key_makes_nothing_and_the_call_still_says_why(
    home: Home,
) -> None:
    # OpenAI itself (no base_url) needs a key, and none is set: the call fails before
    # sending anything, as it did without the warming.
    hub = hub_on(home, "  remote: {type: openai, key_env: K}\n")
    try:
        hub.warm_first("main")
        await hub.warmed()
        assert clients_of(hub) == 0
        with pytest.raises(ProviderError) as caught:
            await Router(hub, max_retries=0).complete([ModelRef("remote", "gpt-fake")], hi())
        assert caught.value.error_class == "auth"
    finally:
        await hub.aclose()


async def test_warming_an_agent_that_is_not_configured_leaves_the_error_to_its_session(
    home: Home,
) -> None:
    hub = hub_on(home, "  remote: {type: openai, key_env: K}\n", K="sk-x")
    try:
        hub.warm_first("ghost")
        await hub.warmed()
        assert clients_of(hub) == 0
    finally:
        await hub.aclose()


async def test_a_sessions_model_choice_is_warmed_and_one_whose_provider_is_gone_is_not(
    home: Home, model_server: FakeModelServer
) -> None:
    url = f"{model_server.base_url}/v1"
    lines = (
        f"  remote: {{type: openai, base_url: '{url}', key_env: K}}\n"
        f"  other: {{type: openai, base_url: '{url}', key_env: K}}\n"
    )
    hub = hub_on(home, lines, K="sk-choice")
    try:
        hub.warm_first("main", ModelRef("other", "gpt-other"))
        await hub.warmed()
        other = hub.provider(ModelRef("other", "gpt-other"))
        assert isinstance(other, ClientStreamingProvider)
        assert (len(other.clients), clients_of(hub)) == (1, 0)
        # A choice whose provider left the config: the turn falls back to the agent's model.
        hub.warm_first("main", ModelRef("gone", "gpt-gone"))
        await hub.warmed()
        assert clients_of(hub) == 1
    finally:
        await hub.aclose()
