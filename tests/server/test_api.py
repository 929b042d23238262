"""The JSON API: app, overview, sessions (list, search, one, export), usage, config, metrics."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from habakkuk.engine.events import JobFinished
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.server.api import redact
from tests.conftest import mock_config

SCRIPT = """
- match: "tool"
  steps:
    - text: "Listing."
      tool_calls: [{name: list_dir, arguments: {path: "."}}]
    - text: "Listed."
- steps:
    - text: "Echo: {input}"
"""


async def chat_and_wait(served: Any, conversation: str, text: str) -> dict[str, Any]:
    """Send a message and wait until its job.finished event has been published."""
    with served.runtime.bus.subscribe(lambda e: e.kind == "job.finished") as finished:
        sent = await served.post_json("/api/chat", {"conversation": conversation, "text": text})
        while (await asyncio.wait_for(finished.get(), 30)).data["job"] != sent["turn"]:
            pass
    outcome = await served.runtime.turns.turn_outcome(sent["turn"])
    assert outcome is not None and outcome.status == "done"
    return dict(sent)


async def test_app_describes_agents_and_features(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT, extra="timezone: Europe/Paris\n"))
    assert await served.get_json("/api/app") == {
        "account": "web",
        "agents": ["main"],
        "default": "main",
        "transcription": False,
        "speech": False,
        "realtime": False,
        "nodes": False,
        "timezone": "Europe/Paris",
        "token_required": True,
    }


async def test_sessions_list_search_one_and_export(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT))
    sent = await chat_and_wait(served, "a1", "the purple elephant question")
    await chat_and_wait(served, "a2", "something else entirely")
    listed = await served.get_json("/api/sessions")
    assert {s["id"] for s in listed["sessions"]} >= {sent["session"]}
    assert set(listed["sessions"][0]) == {"id", "agent", "title", "created_at", "updated_at"}
    assert listed["sessions"][0]["updated_at"].endswith("Z")
    hits = (await served.get_json("/api/sessions?q=elephant"))["hits"]
    assert hits and hits[0]["session"] == sent["session"]
    assert "[elephant]" in hits[0]["snippet"]
    assert (await served.get_json("/api/sessions?q=elephant&agent=main"))["hits"]
    one = await served.get_json(f"/api/sessions/{sent['session']}")
    assert one["session"]["id"] == sent["session"]
    assert [m["role"] for m in one["messages"]] == ["user", "assistant"]
    assert one["messages"][1]["blocks"] == [
        {"type": "text", "text": "Echo: the purple elephant question"}
    ]
    async with served.client.get(
        f"{served.url}/api/sessions/{sent['session']}/export", headers=served.auth()
    ) as response:
        assert response.status == 200
        assert response.content_type == "text/markdown"
        assert "attachment" in response.headers["Content-Disposition"]
        assert "purple elephant" in await response.text()
    bad = await served.get_json("/api/sessions?limit=0", status=400)
    assert "limit" in bad["error"]


async def test_sessions_list_leaves_out_board_and_sub_agent_sessions_unless_all(
    serve: Any,
) -> None:
    from habakkuk.engine.sessions import BOARD_ORIGIN, DELEGATE_ORIGIN

    served = await serve(mock_config(SCRIPT))
    sent = await chat_and_wait(served, "a1", "hello")
    # As a card's run and a delegated task record theirs.
    sessions = served.runtime.sessions
    await sessions.new_session(None, origin=BOARD_ORIGIN, session_id="ses_card")
    await sessions.new_session(None, origin=DELEGATE_ORIGIN, session_id="ses_child")
    listed = await served.get_json("/api/sessions")
    assert [s["id"] for s in listed["sessions"]] == [sent["session"]]
    everything = await served.get_json("/api/sessions?all=1")
    assert {s["id"] for s in everything["sessions"]} == {sent["session"], "ses_card", "ses_child"}
    assert set(everything["sessions"][0]) == {"id", "agent", "title", "created_at", "updated_at"}
    assert len((await served.get_json("/api/sessions?all=true&limit=2"))["sessions"]) == 2
    assert (await served.get_json("/api/sessions?all=0"))["sessions"] == listed["sessions"]
    bad = await served.get_json("/api/sessions?all=maybe", status=400)
    assert bad["error"] == "all must be 1 or 0"


async def test_overview_reports_queue_and_failures(serve: Any) -> None:
    served = await serve(mock_config("- error: auth"))
    with served.runtime.bus.subscribe(lambda e: e.kind == "job.finished") as finished:
        sent = await served.post_json("/api/chat", {"conversation": "o1", "text": "fail please"})
        # The failure's notice is the turn's reply delivery: once it went, nothing is queued.
        while (await asyncio.wait_for(finished.get(), 30)).data["job"] != f"reply:{sent['turn']}":
            pass
    outcome = await served.runtime.turns.turn_outcome(sent["turn"])
    assert outcome is not None and outcome.status == "failed"
    overview = await served.get_json("/api/overview")
    assert overview["queue"] == {"pending": 0, "running": 0}
    assert overview["channels"] == []
    assert overview["approvals"] == 0
    [error] = overview["errors"]
    assert error["id"] == sent["turn"]
    assert error["agent"] == "main"
    assert error["status"] == "failed"


async def test_overview_lists_every_node_of_the_home(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT))
    other = NodeRegistry(served.runtime.queue.db, agents=["main"], host="beta", pid=31337)
    await other.join()
    overview = await served.get_json("/api/overview")
    beta = next(node for node in overview["nodes"] if node["host"] == "beta")
    assert beta["pid"] == 31337 and beta["agents"] == ["main"] and beta["leases"] == []
    assert beta["stale"] is False and beta["here"] is False
    assert beta["id"] == other.id and beta["last_heartbeat"].endswith("Z")
    assert abs(beta["clock_skew_seconds"]) < 1


async def test_overview_lists_the_config_sections_edited_since_the_start(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT), workers=False)
    runtime = served.runtime
    runtime.start_workers(maintenance=True)  # as `serve` does: the hot reload runs
    assert (await served.get_json("/api/overview"))["config"] == {
        "needs_restart": [],
        "invalid": "",
    }
    path = runtime.home.config_path
    head, rest = path.read_text(encoding="utf-8").split("agents:", 1)
    with runtime.bus.subscribe(lambda e: e.kind == "config.reload") as reloads:
        path.write_text(head + "  spare:\n    type: mock\nagents:" + rest, encoding="utf-8")
        await asyncio.wait_for(reloads.get(), 30)
    overview = await served.get_json("/api/overview")
    assert overview["config"] == {"needs_restart": ["providers"], "invalid": ""}


async def test_usage_reports_calls_per_day_model_and_agent(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = await serve(mock_config(SCRIPT, extra="timezone: America/Toronto\n"))
    await chat_and_wait(served, "u1", "use a tool")  # two model calls
    report = await served.get_json("/api/usage?days=3")
    assert report["timezone"] == "America/Toronto"
    assert [d["key"] for d in report["days"]][-1] == report["days"][-1]["key"]
    assert len(report["days"]) == 3
    assert report["since"] == report["days"][0]["key"]
    assert report["total"]["calls"] == 2
    assert report["total"]["output_tokens"] > 0
    assert [d["calls"] for d in report["days"]] == [0, 0, 2]
    assert [(r["key"], r["calls"]) for r in report["by_model"]] == [("mock/scripted", 2)]
    assert [(r["key"], r["calls"]) for r in report["by_agent"]] == [("main", 2)]
    assert set(report["total"]) == {
        "key",
        "calls",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost",
        "unpriced",
    }
    await served.get_json("/api/usage?agent=ghost", status=404)
    await served.get_json("/api/usage?days=0", status=400)
    monkeypatch.setattr(served.runtime, "usage", None)
    body = await served.get_json("/api/usage", status=501)
    assert "usage" in body["error"]


async def test_config_view_redacts_every_secret(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOCK_KEY", "sk-supersecretvalue123456")
    extra = "http:\n  hooks:\n    gh: {secret_env: MOCK_KEY}\n"
    text = mock_config(extra=extra).replace(
        "    type: mock\n",
        "    type: mock\n    key_env: MOCK_KEY\n"
        "    base_url: https://user:pa55word@models.example/v1?api_key=abc123&x=1\n",
    )
    text = text.replace(
        "    mode: full\n",
        "    mode: full\n    instructions: 'Our key is sk-supersecretvalue123456, keep it.'\n",
    )
    served = await serve(text)
    body = await served.get_json("/api/config")
    rendered = str(body)
    assert "supersecretvalue" not in rendered
    assert "pa55word" not in rendered
    assert "abc123" not in rendered
    provider = body["config"]["providers"]["mock"]
    assert provider["key_env"] == "MOCK_KEY"  # variable names stay visible
    assert provider["base_url"] == (
        "https://user:[redacted]@models.example/v1?api_key=[redacted]&x=1"
    )
    assert "[redacted]" in body["config"]["agents"]["main"]["instructions"]
    assert body["home"] == str(served.runtime.home.root)
    assert any(check["name"] == "config" for check in body["doctor"])


def test_redaction_catches_secret_names_and_known_key_shapes() -> None:
    data = {
        "token": "plain-value",
        "password": "hunter2",
        "note": "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk here",
        "gh": "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "headers": {"X-Api-Key": "literal-secret", "X-Ref": "${HEADER_VAR}"},
        "auth_env": "SOME_VAR",
    }
    out = redact(data, ["known-secret"])
    assert out["token"] == "[redacted]"
    assert out["password"] == "[redacted]"
    assert "eyJ" not in out["note"]
    assert out["gh"] == "[redacted]"
    assert out["headers"] == {"X-Api-Key": "[redacted]", "X-Ref": "${HEADER_VAR}"}
    assert out["auth_env"] == "SOME_VAR"


async def test_metrics_count_turns_tools_jobs_and_queue(serve: Any) -> None:
    served = await serve(mock_config(SCRIPT))
    await chat_and_wait(served, "m1", "use a tool")
    async with served.client.get(served.url + "/metrics", headers=served.auth()) as response:
        assert response.status == 200
        assert response.content_type == "text/plain"
        text = await response.text()
    assert 'habakkuk_jobs_total{kind="turn",outcome="done"} 1.0' in text
    assert 'habakkuk_turns_started_total{agent="main"} 1.0' in text
    assert 'habakkuk_turns_finished_total{agent="main"} 1.0' in text
    assert 'habakkuk_tool_calls_total{outcome="ok",tool="list_dir"} 1.0' in text
    assert 'habakkuk_model_calls_total{model="scripted",outcome="ok",provider="mock"} 2.0' in text
    assert 'habakkuk_model_tokens_total{kind="output",model="scripted",provider="mock"}' in text
    assert "habakkuk_turn_duration_seconds_count 1.0" in text
    assert 'habakkuk_build_info{version="' in text
    assert "habakkuk_start_time_seconds " in text
    assert "# TYPE habakkuk_queue_depth gauge" in text


async def test_configured_channels_that_never_ran_are_reported(serve: Any) -> None:
    extra = "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n"
    served = await serve(mock_config(extra=extra), workers=False)
    async with served.client.get(served.url + "/healthz") as response:
        health = await response.json()
    assert health["channels"] == [{"account": "tg", "type": "telegram", "state": "never started"}]
    overview = await served.get_json("/api/overview")
    [channel] = overview["channels"]
    assert channel["account"] == "tg"
    assert channel["state"] == "never started"
    assert channel["since"] is None


async def test_metrics_cost_channels_retries_and_deliveries(serve: Any) -> None:
    extra = (
        "pricing:\n  scripted: {input: 1000000, output: 1000000}\n"
        "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n"
    )
    served = await serve(mock_config(SCRIPT, extra=extra))
    await chat_and_wait(served, "m1", "use a tool")
    runtime = served.runtime
    # A delivery that was retried once and then sent, as the channel pools report them.
    runtime.bus.publish(JobFinished(job="d1", job_kind="delivery:tg", status="queued", attempts=1))
    runtime.bus.publish(JobFinished(job="d1", job_kind="delivery:tg", status="done", attempts=2))
    async with served.client.get(served.url + "/metrics", headers=served.auth()) as response:
        text = await response.text()
    cost = [line for line in text.splitlines() if line.startswith("habakkuk_model_cost_usd_total")]
    assert cost and float(cost[0].split()[-1]) > 0  # $1 a token: any priced call shows
    assert 'habakkuk_channel_connected{channel="tg"} 0.0' in text  # no token: never connects
    assert 'habakkuk_channel_reconnects_total{channel="tg"} ' in text
    assert 'habakkuk_job_retries_total{kind="delivery:tg"} 1.0' in text
    assert 'habakkuk_deliveries_total{channel="tg",outcome="retry"} 1.0' in text
    assert 'habakkuk_storage_info{backend="sqlite"} 1.0' in text
    assert 'habakkuk_deliveries_total{channel="tg",outcome="sent"} 1.0' in text
