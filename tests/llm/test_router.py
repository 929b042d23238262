"""Router policy: retries, key rotation with cooldowns, fallback order, mid-stream failures."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import ModelRef, parse_config
from habakkuk.engine.home import Environment, Home
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.llm.provider import ErrorClass, ProviderError
from habakkuk.engine.llm.router import Caller, Router
from habakkuk.engine.llm.types import (
    Message,
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    Usage,
)
from tests.fakes.model_server import Drop, Fail, FakeModelServer, Reply

A = ModelRef("a", "model-a")
B = ModelRef("b", "model-b")
C = ModelRef("c", "model-c")
REQUEST = ModelRequest(model="", system="", messages=[Message.user_text("hi")])


class Scripted:
    """A provider that plays one script item per call: an error, or text to stream."""

    def __init__(self, name: str, script: list[Any]):
        self.name = name
        self.script = list(script)
        self.calls: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls.append(request)
        item = self.script.pop(0)
        if isinstance(item, ProviderError):
            raise item
        if isinstance(item, tuple):  # (text streamed, then the error)
            text, error = item
            yield TextDelta(text)
            raise error
        yield TextDelta(item)
        yield StreamDone(Message("assistant", [TextBlock(item)]), Usage(3, 2), "end_turn")


class Source:
    """A ProviderSource over Scripted providers with fixed keys."""

    def __init__(self, providers: dict[str, Scripted], keys: dict[str, str | None] | None = None):
        self.providers = providers
        self.keys = keys or {}
        self.reports: list[tuple[str, str | None, str | None]] = []

    def provider(self, ref: ModelRef) -> Scripted:
        return self.providers[ref.provider]

    def key(self, ref: ModelRef) -> str | None:
        return self.keys.get(ref.provider)

    def report(self, ref: ModelRef, key: str | None, error: ProviderError | None) -> None:
        self.reports.append((ref.provider, key, error.error_class if error else None))


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def err(error_class: ErrorClass, retry_after: float | None = None) -> ProviderError:
    return ProviderError(error_class, f"{error_class} happened", retry_after=retry_after)


def router(source: Any, sleeps: Sleeps, **kwargs: Any) -> Router:
    return Router(source, sleep=sleeps, rng=random.Random(7), **kwargs)


async def test_transient_errors_are_retried_then_succeed() -> None:
    a = Scripted("a", [err("server"), err("overloaded"), "fine"])
    sleeps = Sleeps()
    result = await router(Source({"a": a}), sleeps, max_retries=2).complete([A], REQUEST)
    assert result.message.text == "fine"
    assert len(a.calls) == 3
    assert len(sleeps.waits) == 2
    # Jittered exponential backoff: attempt n waits in [base*2^(n-1)/2, base*2^(n-1)].
    assert 0.5 <= sleeps.waits[0] <= 1.0
    assert 1.0 <= sleeps.waits[1] <= 2.0


async def test_retry_after_is_honoured() -> None:
    a = Scripted("a", [err("rate_limit", retry_after=7.5), "ok"])
    sleeps = Sleeps()
    await router(Source({"a": a}), sleeps).complete([A], REQUEST)
    assert sleeps.waits == [7.5]


async def test_retries_stop_after_max_then_fall_back_down_the_chain_in_order() -> None:
    a = Scripted("a", [err("network")] * 3)
    b = Scripted("b", [err("server")] * 3)
    c = Scripted("c", ["from c"])
    sleeps = Sleeps()
    result = await router(Source({"a": a, "b": b, "c": c}), sleeps, max_retries=2).complete(
        [A, B, C], REQUEST
    )
    assert result.model == C
    assert result.message.model == "c/model-c"
    assert (len(a.calls), len(b.calls), len(c.calls)) == (3, 3, 1)
    assert [call.model for call in a.calls + b.calls + c.calls] == ["model-a"] * 3 + [
        "model-b"
    ] * 3 + ["model-c"]


async def test_bad_request_is_not_retried_and_does_not_fall_back() -> None:
    a = Scripted("a", [err("bad_request")])
    b = Scripted("b", ["never"])
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as caught:
        await router(Source({"a": a, "b": b}), sleeps).complete([A, B], REQUEST)
    assert caught.value.error_class == "bad_request"
    assert len(a.calls) == 1
    assert b.calls == []
    assert sleeps.waits == []


@pytest.mark.parametrize("error_class", ["context_overflow", "auth", "billing"])
async def test_errors_another_model_can_fix_fall_back_without_retrying(
    error_class: ErrorClass,
) -> None:
    a = Scripted("a", [err(error_class)])
    b = Scripted("b", ["b answers"])
    sleeps = Sleeps()
    result = await router(Source({"a": a, "b": b}), sleeps).complete([A, B], REQUEST)
    assert result.model == B
    assert len(a.calls) == 1
    assert sleeps.waits == []


async def test_the_last_error_is_raised_when_the_whole_chain_fails() -> None:
    a = Scripted("a", [err("auth")])
    b = Scripted("b", [err("billing")])
    with pytest.raises(ProviderError) as caught:
        await router(Source({"a": a, "b": b}), Sleeps()).complete([A, B], REQUEST)
    assert caught.value.error_class == "billing"
    assert caught.value.provider == "b"


async def test_a_long_retry_after_falls_back_instead_of_waiting() -> None:
    a = Scripted("a", [err("rate_limit", retry_after=3600)])
    b = Scripted("b", ["b"])
    sleeps = Sleeps()
    result = await router(Source({"a": a, "b": b}), sleeps).complete([A, B], REQUEST)
    assert result.model == B
    assert sleeps.waits == []


async def test_mid_stream_failure_resets_once_and_the_retry_streams_cleanly() -> None:
    a = Scripted("a", [("partial te", err("network")), "full text"])
    seen: list[str] = []
    resets: list[int] = []

    def on_event(event: StreamEvent, ref: ModelRef) -> None:
        if isinstance(event, TextDelta):
            seen.append(event.text)

    def on_reset() -> None:
        resets.append(len(seen))
        seen.clear()  # a client voids what it showed

    result = await router(Source({"a": a}), Sleeps()).complete(
        [A], REQUEST, on_event=on_event, on_reset=on_reset
    )
    assert resets == [1]
    assert seen == ["full text"]  # no duplicated text after the reset
    assert result.message.text == "full text"


async def test_failure_before_any_delta_does_not_reset() -> None:
    a = Scripted("a", [err("server"), "ok"])
    resets: list[str] = []
    await router(Source({"a": a}), Sleeps()).complete(
        [A], REQUEST, on_reset=lambda: resets.append("x")
    )
    assert resets == []


async def test_usage_hook_gets_the_successful_call_with_its_caller() -> None:
    a = Scripted("a", [err("server"), "ok"])
    recorded: list[tuple[ModelRef, Caller, Usage]] = []

    async def on_usage(ref: ModelRef, caller: Caller, usage: Usage) -> None:
        recorded.append((ref, caller, usage))

    await router(Source({"a": a}), Sleeps(), on_usage=on_usage).complete(
        [A], REQUEST, caller=Caller("main", "ses_1")
    )
    assert recorded == [(A, Caller("main", "ses_1"), Usage(3, 2))]


async def test_a_failing_usage_hook_does_not_fail_the_call() -> None:
    async def broken(ref: ModelRef, caller: Caller, usage: Usage) -> None:
        raise RuntimeError("disk full")

    a = Scripted("a", ["ok"])
    result = await router(Source({"a": a}), Sleeps(), on_usage=broken).complete([A], REQUEST)
    assert result.message.text == "ok"


# -- keys: the real ProviderHub and adapters against the fake server ---------------------------


def hub_for(server: FakeModelServer, tmp_path: Path, env: dict[str, str], extra: str = "") -> Any:
    text = f"""
providers:
  fake:
    type: openai
    base_url: {server.base_url}/v1
    key_env: [KEY_ONE, KEY_TWO]
  other:
    type: anthropic
    base_url: {server.base_url}
    key_env: OTHER_KEY
agents:
  main:
    model: fake/gpt-fake
    fallbacks: [other/claude-fake]
{extra}"""
    home = Home(tmp_path)
    config = parse_config(text, tmp_path / "config.yaml", home)
    hub = ProviderHub(config, Environment(None, overrides=env), tmp_path)
    hub._keyring = {}  # never consult the machine's keyring in tests
    return hub, config


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


async def test_rate_limited_key_rotates_to_the_next_at_once_and_cools_down(
    server: FakeModelServer, tmp_path: Path
) -> None:
    hub, config = hub_for(server, tmp_path, {"KEY_ONE": "k-one", "KEY_TWO": "k-two"})
    clock = [1000.0]
    hub.rotation.clock = lambda: clock[0]
    sleeps = Sleeps()
    r = router(hub, sleeps)
    server.script(Fail(429, retry_after=20), Reply(text="via two"), Reply(text="still two"))
    try:
        first = await r.complete(config.agents["main"].chain, REQUEST)
        second = await r.complete(config.agents["main"].chain, REQUEST)
        assert first.message.text == "via two"
        assert second.message.text == "still two"
        assert [req.api_key for req in server.requests] == ["k-one", "k-two", "k-two"]
        assert sleeps.waits == []  # another key was ready: no waiting
        assert hub.rotation.cooldown("fake", "k-one") == pytest.approx(20)
        # Once the cooldown has passed, key one is usable again (the cursor stays on two).
        clock[0] += 21
        assert hub.rotation.cooldown("fake", "k-one") == 0
    finally:
        await hub.aclose()


async def test_auth_failure_on_one_key_uses_the_other_and_keeps_the_bad_one_out(
    server: FakeModelServer, tmp_path: Path
) -> None:
    hub, config = hub_for(server, tmp_path, {"KEY_ONE": "bad", "KEY_TWO": "good"})
    r = router(hub, Sleeps())
    server.script(Fail(401), Reply(text="ok"), Reply(text="ok again"))
    try:
        await r.complete(config.agents["main"].chain, REQUEST)
        await r.complete(config.agents["main"].chain, REQUEST)
        assert [req.api_key for req in server.requests] == ["bad", "good", "good"]
        assert hub.rotation.cooldown("fake", "bad") > 600
    finally:
        await hub.aclose()


async def test_all_keys_rate_limited_waits_then_falls_back_to_the_next_model(
    server: FakeModelServer, tmp_path: Path
) -> None:
    hub, config = hub_for(
        server, tmp_path, {"KEY_ONE": "k1", "KEY_TWO": "k2", "OTHER_KEY": "other"}
    )
    sleeps = Sleeps()
    r = router(hub, sleeps, max_retries=1)
    server.script(Fail(429, retry_after=2), Fail(429, retry_after=2), api="chat")
    server.script(Fail(429, retry_after=2), Fail(429, retry_after=2), api="chat")
    server.script(Reply(text="from claude"), api="anthropic")
    try:
        result = await r.complete(config.agents["main"].chain, REQUEST)
    finally:
        await hub.aclose()
    assert result.message.text == "from claude"
    assert [(q.api, q.api_key) for q in server.requests] == [
        ("chat", "k1"),
        ("chat", "k2"),  # rotated at once
        ("chat", "k1"),  # after one wait, the key that recovers first
        ("chat", "k2"),
        ("anthropic", "other"),  # retries spent: next model of the chain
    ]
    assert sleeps.waits == [2.0]


async def test_unreachable_provider_falls_back_after_its_retries(
    server: FakeModelServer, tmp_path: Path
) -> None:
    async with FakeModelServer() as gone:
        dead_url = gone.base_url
    hub, config = hub_for(server, tmp_path, {"KEY_ONE": "k", "OTHER_KEY": "o"})
    config.providers["fake"].base_url = f"{dead_url}/v1"
    sleeps = Sleeps()
    server.script(Reply(text="reachable"), api="anthropic")
    try:
        result = await router(hub, sleeps, max_retries=2).complete(
            config.agents["main"].chain, REQUEST
        )
    finally:
        await hub.aclose()
    assert result.message.text == "reachable"
    assert len(sleeps.waits) == 2


async def test_dropped_stream_through_the_real_adapter_resets_once(
    server: FakeModelServer, tmp_path: Path
) -> None:
    hub, config = hub_for(server, tmp_path, {"KEY_ONE": "k"})
    server.script(
        Drop(Reply(text="abcdefghijkl", chunk_size=4), after_chunks=2),
        Reply(text="abcdefghijkl", chunk_size=4),
    )
    shown: list[str] = []
    resets = 0

    def on_reset() -> None:
        nonlocal resets
        resets += 1
        shown.clear()

    try:
        result = await router(hub, Sleeps()).complete(
            config.agents["main"].chain,
            REQUEST,
            on_event=lambda e, ref: shown.append(e.text) if isinstance(e, TextDelta) else None,
            on_reset=on_reset,
        )
    finally:
        await hub.aclose()
    assert resets == 1
    assert "".join(shown) == "abcdefghijkl" == result.message.text
    assert len(server.requests) == 2


async def test_key_from_the_keyring_is_used_only_when_env_has_none(tmp_path: Path) -> None:
    text = """
providers:
  p: {type: openai, key_env: [FIRST, SECOND]}
agents:
  main: {model: p/m}
"""
    config = parse_config(text, tmp_path / "c.yaml", Home(tmp_path))
    hub = ProviderHub(config, Environment(None, overrides={"SECOND": "env-second"}), tmp_path)
    hub._keyring = {"FIRST": "ring-first", "SECOND": "ring-second"}
    assert hub.keys(ModelRef("p", "m")) == ["ring-first", "env-second"]
