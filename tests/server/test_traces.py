"""Traces: a real turn's spans exported as OTLP/HTTP to a fake collector on 127.0.0.1
(protobuf decoded), the bounded queue, the once-a-minute failure log; and the model
call duration metric in /metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.config import ModelRef, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.events import DelegateStarted, EventBus, TurnEnded, TurnStarted
from habakkuk.engine.home import Home
from habakkuk.engine.llm.provider import Provider, ProviderError
from habakkuk.engine.llm.router import Router
from habakkuk.engine.telemetry_config import TelemetryConfig, resolve_telemetry
from habakkuk.engine.tracing import Tracing
from habakkuk.services.doctor import run_checks
from tests.conftest import mock_config
from tests.fakes.otlp_collector import FakeCollector, ReceivedSpan

SCRIPT = """
- match: "tool"
  steps:
    - text: "Listing."
      tool_calls: [{name: list_dir, arguments: {path: "."}}]
    - text: "Listed the folder."
- steps:
    - text: "Echo: {input}"
"""
GITHUB_TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2


@pytest.fixture
async def collector() -> AsyncIterator[FakeCollector]:
    fake = FakeCollector()
    await fake.start()
    yield fake
    await fake.close()


async def chat_and_wait(served: Any, conversation: str, text: str) -> dict[str, Any]:
    """Send a message and wait until its job.finished event has been published."""
    with served.runtime.bus.subscribe(lambda e: e.kind == "job.finished") as finished:
        sent = await served.post_json("/api/chat", {"conversation": conversation, "text": text})
        while (await asyncio.wait_for(finished.get(), 30)).data["job"] != sent["turn"]:
            pass
    return dict(sent)


def telemetry(url: str, *, content: bool = False) -> str:
    return (
        f"telemetry:\n  otlp_endpoint: {url}\n  service_name: hab-test\n"
        f"  include_content: {'true' if content else 'false'}\n"
    )


async def exported_turn(serve: Any, collector: FakeCollector, *, content: bool) -> Any:
    served = await serve(mock_config(SCRIPT, extra=telemetry(collector.url, content=content)))
    await chat_and_wait(served, "t1", f"use a tool, my token is {GITHUB_TOKEN}")
    assert served.runtime.tracing is not None
    assert await asyncio.to_thread(served.runtime.tracing.flush)
    return served


def tree(spans: list[ReceivedSpan]) -> tuple[ReceivedSpan, list[ReceivedSpan], list[ReceivedSpan]]:
    (root,) = [s for s in spans if s.name == "invoke_agent main"]
    models = [s for s in spans if s.name.startswith("chat ")]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    return root, models, tools


async def test_a_turn_with_a_tool_call_is_a_root_span_with_model_and_tool_children(
    serve: Any, collector: FakeCollector
) -> None:
    await exported_turn(serve, collector, content=False)
    root, models, tools = tree(collector.spans)
    assert root.parent_id == "" and root.service == "hab-test"
    assert root.attributes["habakkuk.turn.status"] == "done"
    assert len(models) == 2 and len(tools) == 1
    for child in [*models, *tools]:
        assert child.parent_id == root.span_id and child.trace_id == root.trace_id
    for model in models:
        assert model.kind == SPAN_KIND_CLIENT
        assert model.attributes["gen_ai.system"] == "mock"
        assert model.attributes["gen_ai.request.model"] == "scripted"
        assert model.attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.usage.output_tokens" in model.attributes
    (tool,) = tools
    assert tool.attributes["gen_ai.tool.name"] == "list_dir"
    assert tool.attributes["habakkuk.tool.outcome"] == "ok"
    assert tool.attributes["habakkuk.tool.seconds"] >= 0
    # No content by default: neither the user's words nor the reply nor tool data.
    every_value = [str(v) for s in collector.spans for v in s.attributes.values()]
    assert not any("use a tool" in v or "Listed the folder" in v for v in every_value)
    assert not any(k in s.attributes for s in collector.spans for k in ("gen_ai.prompt",))


async def test_content_is_exported_only_when_asked_and_redacted(
    serve: Any, collector: FakeCollector
) -> None:
    await exported_turn(serve, collector, content=True)
    root, models, tools = tree(collector.spans)
    assert "use a tool, my token is [REDACTED]" in root.attributes["habakkuk.user_message"]
    assert root.attributes["habakkuk.reply"] == "Listed the folder."
    assert models[-1].attributes["gen_ai.completion"] == "Listed the folder."
    assert '"path": "."' in tools[0].attributes["gen_ai.tool.call.arguments"]
    assert "gen_ai.tool.call.result" in tools[0].attributes
    every_value = [str(v) for s in collector.spans for v in s.attributes.values()]
    assert not any(GITHUB_TOKEN in v for v in every_value)


async def test_headers_come_from_the_variable_telemetry_headers_env_names(
    serve: Any, collector: FakeCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTLP_HEADERS", "x-api-key=abc%20def,x-team=ops")
    extra = telemetry(collector.url) + "  headers_env: OTLP_HEADERS\n"
    served = await serve(mock_config(SCRIPT, extra=extra))
    await chat_and_wait(served, "h1", "hello")
    assert await asyncio.to_thread(served.runtime.tracing.flush)
    assert collector.headers[0]["x-api-key"] == "abc def"
    assert collector.headers[0]["x-team"] == "ops"


async def test_metrics_time_every_model_call_with_its_outcome(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT))
    await chat_and_wait(served, "m1", "use a tool")
    async with served.client.get(served.url + "/metrics", headers=served.auth()) as response:
        text = await response.text()
    labels = 'model="scripted",outcome="ok",provider="mock"'
    assert f"habakkuk_model_call_duration_seconds_count{{{labels}}} 2.0" in text
    assert "# TYPE habakkuk_model_call_duration_seconds histogram" in text


async def test_a_runtime_without_telemetry_times_nothing(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT), workers=True)
    assert served.runtime.tracing is None
    # Only /metrics watches the router; no span is made anywhere.
    assert len(served.runtime.router.observers) == 1


# -- the exporter's bounds, on a Tracing of its own -----------------------------------------


class _NoModels:
    def provider(self, ref: ModelRef) -> Provider:
        raise ProviderError("bad_request", "none")

    def key(self, ref: ModelRef) -> str | None:
        return None

    def report(self, ref: ModelRef, key: str | None, error: ProviderError | None) -> None:
        return None


def own_tracing(url: str, **options: Any) -> Tracing:
    config = TelemetryConfig(otlp_endpoint=url)
    resolve_telemetry(config, Path("config.yaml"))
    tracing = Tracing(config, EventBus(), Router(_NoModels()), **options)
    return tracing


def emit_turns(tracing: Tracing, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        tracing.observe(TurnStarted(session=f"s{n}", turn=f"t{n}", agent="main"))
        tracing.observe(TurnEnded(session=f"s{n}", turn=f"t{n}", status="done"))


async def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_a_delegated_childs_turn_is_a_child_of_the_turn_that_delegated_it(
    collector: FakeCollector,
) -> None:
    tracing = own_tracing(collector.url, schedule_seconds=0.01)
    tracing.observe(TurnStarted(session="parent", turn="t1", agent="main"))
    tracing.observe(
        DelegateStarted(
            session="parent",
            turn="t1",
            call_id="c1",
            job="sub_1",
            child_session="child",
            agent="helper",
            task="look it up",
            background=True,
        )
    )
    tracing.observe(TurnEnded(session="parent", turn="t1", status="done"))  # background
    tracing.observe(TurnStarted(session="child", turn="sub_1", agent="helper"))
    tracing.observe(TurnEnded(session="child", turn="sub_1", status="done"))
    tracing.observe(TurnStarted(session="other", turn="t2", agent="main"))
    tracing.observe(TurnEnded(session="other", turn="t2", status="done"))
    assert await asyncio.to_thread(tracing.flush)
    spans = {span.attributes["habakkuk.session"]: span for span in collector.spans}
    parent, child, other = spans["parent"], spans["child"], spans["other"]
    assert child.trace_id == parent.trace_id and child.parent_id == parent.span_id
    assert child.attributes["habakkuk.parent_session"] == "parent"
    assert other.parent_id == "" and other.trace_id != parent.trace_id
    await tracing.stop()


async def test_a_stalled_collector_makes_the_queue_drop_spans_rather_than_grow(
    collector: FakeCollector,
) -> None:
    collector.hold = asyncio.Event()
    tracing = own_tracing(collector.url, max_queue=8, schedule_seconds=0.01)
    emit_turns(tracing, 1)
    await wait_for(lambda: collector.waiting == 1)  # the first batch hangs in the export
    emit_turns(tracing, 500, start=1)  # meanwhile: 500 spans for a queue of 8
    collector.hold.set()
    assert await asyncio.to_thread(tracing.flush)
    assert 1 + 1 <= len(collector.spans) <= 1 + 8
    await tracing.stop()


async def test_a_failing_collector_is_logged_once_a_minute(
    collector: FakeCollector, caplog: pytest.LogCaptureFixture
) -> None:
    collector.status = 400  # refused, not retried
    now = [1000.0]
    tracing = own_tracing(collector.url, clock=lambda: now[0], schedule_seconds=0.01)
    caplog.set_level(logging.WARNING, logger="habakkuk.engine.tracing")

    def reports() -> list[str]:
        return [r.getMessage() for r in caplog.records if "collector" in r.getMessage()]

    for batch in range(5):  # five failed batches within the minute
        emit_turns(tracing, 1, start=batch)
        await asyncio.to_thread(tracing.flush)
        now[0] += 5
    await wait_for(lambda: collector.requests >= 5)
    assert len(reports()) == 1 and collector.url in reports()[0]
    now[0] += 60
    emit_turns(tracing, 1, start=10)
    await asyncio.to_thread(tracing.flush)
    await wait_for(lambda: len(reports()) == 2)
    assert "4 more failures" in reports()[1]
    await tracing.stop()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("otlp_endpoint: collector:4318", "telemetry.otlp_endpoint: must be an http://"),
        ("otlp_endpoint: http://c:4318\n  headers_env: 'not a name'", "telemetry.headers_env"),
        ("otlp_endpoint: http://c:4318\n  include_content: maybe", "telemetry.include_content"),
        ("otlp_endpoint: http://c:4318\n  sampler: all", "sampler"),
    ],
)
def test_the_telemetry_section_is_checked(home: Home, section: str, message: str) -> None:
    text = mock_config(extra=f"telemetry:\n  {section}\n")
    with pytest.raises(ConfigError) as raised:
        parse_config(text, home.config_path, home)
    assert message in str(raised.value) and "config.yaml:" in str(raised.value)


async def test_doctor_says_where_traces_go(home: Home) -> None:
    text = mock_config(extra="telemetry:\n  otlp_endpoint: http://127.0.0.1:4318/\n")
    home.config_path.write_text(text, encoding="utf-8")
    lines = [check.line() for check in await run_checks(home)]
    assert "ok    telemetry: traces go to http://127.0.0.1:4318/v1/traces" in lines
