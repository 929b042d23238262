"""GET /healthz (liveness, from memory) and GET /readyz (the live checks)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.server.conftest import Served

TELEGRAM = "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n"


async def get(served: Served, path: str, status: int) -> Any:
    """GET `path` without the token, within a bounded wait; its JSON."""
    async with asyncio.timeout(10), served.client.get(served.url + path) as response:
        assert response.status == status, (response.status, await response.text())
        return await response.json()


async def test_healthy_server_is_ready_and_tells_nothing_but_states_and_depth(
    serve: Any,
) -> None:
    served = await serve(mock_config(extra=TELEGRAM), workers=False)
    health = await get(served, "/healthz", 200)
    assert set(health) == {"status", "channels", "queue"}
    assert health["status"] == "ok"
    assert health["channels"] == [{"account": "tg", "type": "telegram", "state": "never started"}]
    assert set(health["queue"]) == {"pending", "running", "age_seconds"}
    # A channel no process has started is not up: not ready, and it says why.
    ready = await get(served, "/readyz", 503)
    assert set(ready) == {"status", "parts", "queue"}
    assert ready["status"] == "not ready"
    for part in ready["parts"]:
        assert set(part) == {"kind", "name", "ok", "state", "since", "reason", "served_by"}
    named = {(part["kind"], part["name"]): part for part in ready["parts"]}
    assert [key for key, part in named.items() if part["ok"]] == [
        ("store", "control.db"),
        ("store", "transcripts.db"),
        ("store", "web.db"),
        ("listener", "http"),
    ]
    tg = named["channel", "tg"]
    assert (tg["state"], tg["since"]) == ("never started", None)
    assert tg["reason"].startswith("not started")
    # No worker runs here (workers=False): nothing would take a queued turn.
    assert named["pool", "workers"]["reason"] == "no worker pool runs in this process"
    assert ready["queue"] == {"pending": 0, "running": 0}


async def test_a_channel_given_up_on_shows_in_health_and_fails_readiness(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TG_TOKEN", raising=False)  # the adapter cannot start: fatal
    served = await serve(mock_config(extra=TELEGRAM))

    async def fatal_in_memory() -> bool:
        health = await get(served, "/healthz", 200)
        return bool(health["channels"][0]["state"] == "fatal")

    await eventually(fatal_in_memory, what="/healthz to report the channel fatal")
    ready = await get(served, "/readyz", 503)
    assert ready["status"] == "not ready"
    [failing] = [part for part in ready["parts"] if not part["ok"]]
    assert failing["kind"] == "channel" and failing["name"] == "tg"
    assert failing["state"] == "fatal" and failing["served_by"] == "here"
    assert failing["reason"].startswith("given up")
    assert failing["since"] is not None
    # The detail recorded with the state (the missing variable) stays out of it.
    assert "TG_TOKEN" not in str(ready)


async def test_healthz_answers_while_control_db_is_locked_and_readyz_names_it(
    serve: Any,
) -> None:
    served = await serve(mock_config())
    served.server.readiness.timeout = 0.5
    await get(served, "/healthz", 200)
    locker = sqlite3.connect(served.runtime.home.db_path("control"), isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        # A write of this process waits for the lock on control.db's thread, and every
        # read of control.db queues behind it.
        blocked = asyncio.create_task(served.runtime.queue.db.write(lambda conn: None))

        async def stale() -> bool:
            health = await get(served, "/healthz", 200)
            return bool(health["status"] == "ok" and health["queue"]["age_seconds"] > 1.5)

        # /healthz keeps answering from memory, saying how old its depth is.
        await eventually(stale, what="/healthz to answer with a depth older than 1.5 s")
        ready = await get(served, "/readyz", 503)
        failing = {part["name"]: part["reason"] for part in ready["parts"] if not part["ok"]}
        assert failing == {"control.db": "control.db did not answer within 0.5s"}
        assert ready["queue"] is None
        assert not blocked.done()
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    async with asyncio.timeout(15):
        await blocked
    served.server.readiness.timeout = 15.0
    assert (await get(served, "/readyz", 200))["status"] == "ready"


async def test_readyz_names_a_store_that_fails(serve: Any) -> None:
    served = await serve(mock_config())
    await served.server.web_store().close()  # web.db's connection is gone
    ready = await get(served, "/readyz", 503)
    failing = [
        (part["kind"], part["name"], part["state"], part["reason"])
        for part in ready["parts"]
        if not part["ok"]
    ]
    assert failing == [("store", "web.db", "failing", "web.db failed (StoreError)")]
    assert ready["queue"] == {"pending": 0, "running": 0}
