"""`habakkuk run` and `habakkuk usage` end to end, through each adapter type.

The CLI runs its own event loop (asyncio.run), so the fake model server runs
on a loop in a background thread here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from habakkuk.cli import main
from tests.conftest import REMOTE_PROVIDERS, remote_config
from tests.fakes.loopback import Threaded
from tests.fakes.model_server import Fail, FakeModelServer, Reply, ToolCall, WebSearch


class ThreadedServer(Threaded[FakeModelServer]):
    """A FakeModelServer on its own loop in a daemon thread."""

    def __init__(self) -> None:
        super().__init__(FakeModelServer())


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with ThreadedServer() as srv:
        yield srv


# (input, output) list prices per million tokens of the models of REMOTE_PROVIDERS
PRICES = {
    "anthropic": (1.0, 5.0),
    "openai": (0.25, 2.0),
    "responses": (1.25, 10.0),
    "litellm": (2.0, 8.0),
    "gemini": (0.50, 3.0),
}


def config_for(kind: str, url: str) -> str:
    return remote_config(kind, url, extra="pricing:\n  gpt-fake: {input: 2, output: 8}\n")


@pytest.mark.parametrize("kind", list(REMOTE_PROVIDERS))
def test_run_answers_through_each_adapter_and_usage_shows_the_cost(
    kind: str,
    server: FakeModelServer,
    write_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fake_litellm: list[dict[str, Any]],
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "sk-e2e")
    write_config(config_for(kind, server.base_url))
    server.script(
        Reply(
            text="Looking.",
            tool_calls=[ToolCall("list_dir", {"path": "."})],
            input_tokens=1000,
            output_tokens=100,
        ),
        Reply(text=f"Hello from {kind}.", input_tokens=2000, output_tokens=400),
    )
    assert main(["run", "--json", "list the workspace"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["status"] == "done"
    assert body["reply"] == f"Hello from {kind}."
    assert [r.api_key for r in server.requests] == ["sk-e2e", "sk-e2e"]
    if kind == "litellm":
        assert [c["num_retries"] for c in fake_litellm] == [0, 0]

    assert main(["usage", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["agent"] == "main"
    assert row["calls"] == 2
    assert (row["input_tokens"], row["output_tokens"]) == (3000, 500)
    price_in, price_out = PRICES[kind]
    assert row["cost"] == pytest.approx((3000 * price_in + 500 * price_out) / 1e6)

    assert main(["usage", "--days", "1", "--agent", "main"]) == 0
    table = capsys.readouterr().out
    assert f"remote/{REMOTE_PROVIDERS[kind][1]}" in table
    assert f"${row['cost']:,.4f}" in table


def test_usage_shows_a_runs_hosted_web_searches_priced_in_the_cost(
    server: FakeModelServer,
    write_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    write_config(config_for("anthropic", server.base_url))
    server.script(Reply(text="Found.", web=[WebSearch("news"), WebSearch("more news")]))
    assert main(["run", "--json", "what's new?"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "done"
    assert main(["usage", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["web_searches"], row["web_fetches"]) == (2, 0)
    assert row["cost"] == pytest.approx((10 * 1.0 + 5 * 5.0) / 1e6 + 0.02)
    assert main(["usage"]) == 0
    assert "hosted web tools: 2 search(es), 0 fetch(es)" in capsys.readouterr().out


def test_run_streams_text_to_stdout_as_it_arrives(
    server: FakeModelServer,
    write_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    write_config(config_for("anthropic", server.base_url))
    server.script(Reply(text="streamed words here", chunk_size=4))
    assert main(["run", "hi"]) == 0
    assert "streamed words here" in capsys.readouterr().out


def test_run_reports_a_failed_model_call_in_one_line(
    server: FakeModelServer,
    write_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    write_config(config_for("openai", server.base_url))
    server.script(Fail(400))
    assert main(["run", "hi"]) == 1
    err = capsys.readouterr().err
    assert "bad_request" in err
    assert "Traceback" not in err


def test_usage_with_no_calls_says_so(write_config: Any, capsys: pytest.CaptureFixture[str]) -> None:
    write_config("providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n")
    assert main(["usage", "--days", "7"]) == 0
    assert "no model calls recorded in the last 7 days" in capsys.readouterr().out


def test_usage_rejects_an_unknown_agent(
    write_config: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config("providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n")
    assert main(["usage", "--agent", "nobody"]) == 2
    assert "agent 'nobody' is not configured" in capsys.readouterr().err


# -- injected failures inside a real turn (the runtime's own router, sleeps skipped) ------------


async def _no_wait(seconds: float) -> None:
    return None


async def test_a_turn_survives_a_dropped_stream_with_one_reset_and_one_reply(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.model_server import Drop

    monkeypatch.setenv("REMOTE_KEY", "k")
    async with FakeModelServer() as srv:
        runtime = await runtime_factory(config_for("anthropic", srv.base_url))
        runtime.router.sleep = _no_wait
        srv.script(
            Drop(Reply(text="one two three four", chunk_size=4), after_chunks=2),
            Reply(text="one two three four", chunk_size=4),
        )
        session = await runtime.sessions.new_session("main")
        with runtime.bus.subscribe(
            lambda e: e.session == session.id and e.kind in ("turn.text", "turn.reset")
        ) as events:
            runtime.start_workers()
            outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "count"))
            seen = []
            while (event := events.get_nowait()) is not None:
                seen.append(event)
    assert outcome.reply == "one two three four"
    kinds = [e.kind for e in seen]
    assert kinds.count("turn.reset") == 1
    after_reset = kinds.index("turn.reset")
    text_after = "".join(e.data["text"] for e in seen[after_reset + 1 :])
    assert text_after == "one two three four"  # the retry streams the reply once
    messages = await runtime.sessions.messages(session.id)
    assert [m.role for m in messages] == ["user", "assistant"]


async def test_an_overloaded_model_falls_back_to_the_next_in_a_real_turn(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", "k")
    async with FakeModelServer() as srv:
        config = (
            config_for("anthropic", srv.base_url)
            .replace(
                "    mode: full\n",
                "    mode: full\n    fallbacks: [backup/gpt-5-mini]\n",
            )
            .replace(
                "agents:",
                f"  backup:\n    type: openai\n    base_url: {srv.base_url}/v1\n"
                "    key_env: REMOTE_KEY\nagents:",
            )
        )
        runtime = await runtime_factory(config)
        runtime.router.sleep = _no_wait
        srv.script(Fail(529), Fail(529), Fail(529), api="anthropic")
        srv.script(Reply(text="backup answered"), api="chat")
        session = await runtime.sessions.new_session("main")
        runtime.start_workers()
        outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hi"))
        apis = [r.api for r in srv.requests]
    assert outcome.reply == "backup answered"
    assert apis == ["anthropic", "anthropic", "anthropic", "chat"]
    totals = {t.model: t.calls for t in await runtime.ledger.usage_totals()}
    assert totals == {"backup/gpt-5-mini": 1}  # only successful calls are recorded
