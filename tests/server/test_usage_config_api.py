"""GET /api/usage and GET /api/config exactly as spec 001 says: every day of the period
(zero rows included), by model and by agent, unpriced calls counted and left out of the
cost; the config with every variable's value, secret-named field and URL credential
redacted, the variables' names left readable."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from habakkuk.engine.config import ModelRef
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Usage
from tests.conftest import mock_config

ZONE = "Asia/Tokyo"
MILLION = 1_000_000
K = 100_000  # below Sonnet's long-prompt tier (200k)


async def record_calls(runtime: Any) -> None:
    """Three calls today and two, two days ago (in the config timezone): Sonnet 4.5 is
    priced ($3 in, $15 out, $0.30 cache reads per million), the mock model is not."""
    zone = ZoneInfo(ZONE)
    two_days_ago = datetime.combine(
        datetime.now(zone).date() - timedelta(days=2), datetime.min.time(), zone
    ) + timedelta(hours=12)
    sonnet = ModelRef("anthropic", "claude-sonnet-4-5")
    mock = ModelRef("mock", "scripted")
    store = runtime.usage
    now = time.time()
    await store.record(sonnet, Caller("main", "s1"), Usage(input_tokens=K), at=now)
    await store.record(
        sonnet, Caller("ops", "s2"), Usage(input_tokens=K, cache_read_tokens=K), at=now
    )
    await store.record(mock, Caller("main", "s1"), Usage(input_tokens=10, output_tokens=5), at=now)
    old = two_days_ago.timestamp()
    await store.record(sonnet, Caller("main", "s3"), Usage(output_tokens=MILLION), at=old)
    await store.record(mock, Caller("main", "s3"), Usage(input_tokens=7), at=old)


async def test_usage_has_every_day_and_counts_unpriced_calls_apart(serve: Any) -> None:
    served = await serve(mock_config(extra=f"timezone: {ZONE}\n"), workers=False)
    await record_calls(served.runtime)

    report = await served.get_json("/api/usage?days=5")

    assert report["timezone"] == ZONE
    today = datetime.now(ZoneInfo(ZONE)).date()
    assert [d["key"] for d in report["days"]] == [
        (today - timedelta(days=n)).isoformat() for n in range(4, -1, -1)
    ]
    assert report["since"] == (today - timedelta(days=4)).isoformat()
    assert [d["calls"] for d in report["days"]] == [0, 0, 2, 0, 3]
    assert [d["unpriced"] for d in report["days"]] == [0, 0, 1, 0, 1]
    assert [d["cost"] for d in report["days"]] == [0.0, 0.0, 15.0, 0.0, 0.63]
    total = report["total"]
    assert (total["key"], total["calls"], total["unpriced"]) == ("total", 5, 2)
    assert total["cost"] == pytest.approx(15.63)
    assert total["cache_read_tokens"] == K
    assert total["input_tokens"] == 2 * K + 17
    models = {r["key"]: r for r in report["by_model"]}
    assert list(models) == ["anthropic/claude-sonnet-4-5", "mock/scripted"]  # most expensive first
    assert (models["mock/scripted"]["calls"], models["mock/scripted"]["unpriced"]) == (2, 2)
    assert models["mock/scripted"]["cost"] == 0.0
    agents = {r["key"]: (r["calls"], r["cost"]) for r in report["by_agent"]}
    assert agents == {"main": (4, 15.3), "ops": (1, 0.33)}


async def test_usage_for_one_agent_keeps_only_its_calls(serve: Any) -> None:
    served = await serve(
        mock_config(extra=f"  ops:\n    model: mock/scripted\ntimezone: {ZONE}\n"),
        workers=False,
    )
    await record_calls(served.runtime)
    report = await served.get_json("/api/usage?days=1&agent=ops")
    assert len(report["days"]) == 1
    assert [r["key"] for r in report["by_agent"]] == ["ops"]
    assert report["total"]["calls"] == 1
    assert report["total"]["cost"] == pytest.approx(0.33)
    await served.get_json("/api/usage?days=401", status=400)
    await served.get_json("/api/usage?days=week", status=400)


MCP = """
mcp_servers:
  github:
    command: github-mcp
    env: {GITHUB_TOKEN: GH_PAT, API_KEY: OTHER_VAR}
  remote:
    url: https://bot:s3cretpass@mcp.example/rpc?token=qwerty123&page=2
    headers: {Authorization: GH_PAT, X_API_KEY: OTHER_VAR}
"""


async def test_config_keeps_variable_names_and_hides_their_values_everywhere(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GH_PAT", "pat-value-0123456789")
    monkeypatch.setenv("OTHER_VAR", "other-secret-value")
    text = mock_config(extra=MCP).replace(
        "    mode: full\n",
        "    mode: full\n    instructions: 'Use pat-value-0123456789 and other-secret-value.'\n",
    )
    served = await serve(text, workers=False)
    body = await served.get_json("/api/config")
    rendered = str(body)
    for secret in ("pat-value-0123456789", "other-secret-value", "s3cretpass", "qwerty123"):
        assert secret not in rendered
    servers = body["config"]["mcp_servers"]
    # The maps name variables: the names stay readable, even under secret-looking keys.
    assert servers["github"]["env"] == {"GITHUB_TOKEN": "GH_PAT", "API_KEY": "OTHER_VAR"}
    assert servers["remote"]["headers"] == {"Authorization": "GH_PAT", "X_API_KEY": "OTHER_VAR"}
    assert servers["remote"]["url"] == (
        "https://bot:[redacted]@mcp.example/rpc?token=[redacted]&page=2"
    )
    assert body["config"]["agents"]["main"]["instructions"] == "Use [redacted] and [redacted]."
    assert "path" not in body["config"]
