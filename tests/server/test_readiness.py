"""GET /readyz tells the truth: ready only when every channel, MCP server and worker pool
is actually up, each part with its state, since when and why not."""

from __future__ import annotations

import asyncio
import os
import textwrap
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from habakkuk.engine.overview import ChannelHealth
from habakkuk.server.readiness_parts import channel_part, holder_words
from tests.channels.fake_telegram import FakeTelegram
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import eventually
from tests.server.conftest import Served


async def readyz(served: Served) -> tuple[int, Any]:
    """GET /readyz without the token: its status and JSON."""
    async with asyncio.timeout(10), served.client.get(served.url + "/readyz") as response:
        return response.status, await response.json()


def part(body: Any, kind: str, name: str) -> Any:
    [found] = [p for p in body["parts"] if (p["kind"], p["name"]) == (kind, name)]
    return found


def telegram(tg: FakeTelegram) -> str:
    return textwrap.dedent(
        f"""
        channels:
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            allow_from: ["42"]
            poll_timeout: 1
        """
    )


async def test_not_ready_while_the_telegram_server_refuses_connections_then_ready(
    serve: Any, tg: FakeTelegram
) -> None:
    await tg.stop()  # its port now refuses connections
    served = await serve(mock_config(extra=telegram(tg)))

    async def refused() -> bool:
        status, body = await readyz(served)
        channel = part(body, "channel", "tg")
        return status == 503 and channel["state"] == "backoff"

    await eventually(refused, what="/readyz to name the channel reconnecting")
    status, body = await readyz(served)
    channel = part(body, "channel", "tg")
    assert status == 503 and body["status"] == "not ready"
    assert channel["ok"] is False and channel["served_by"] == "here"
    assert channel["reason"].startswith("reconnecting after a failure")
    assert channel["since"] is not None
    # Every other part is up: the channel alone keeps it from being ready.
    assert [p["name"] for p in body["parts"] if not p["ok"]] == ["tg"]
    # The error's text (the refused address) is the log's, not /readyz's.
    assert str(tg.port) not in str(body)

    await tg.start()

    async def ready() -> bool:
        return (await readyz(served))[0] == 200

    await eventually(ready, what="/readyz to be ready once Telegram answers", timeout=30)
    status, body = await readyz(served)
    assert body["status"] == "ready"
    assert part(body, "channel", "tg")["state"] == "connected"


async def test_a_connecting_channel_is_not_ready(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Bot API address that takes the connection and never answers (getMe hangs): the
    # adapter is still connecting, so nothing is ready, however long it takes.
    gate = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await gate.wait()
        return web.json_response({"ok": False, "error_code": 502, "description": "gone"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    monkeypatch.setenv("TG_TOKEN", "1:HANGING")
    channel = "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n"
    channel += f"    base_url: http://127.0.0.1:{port}\n"
    try:
        served = await serve(mock_config(extra=channel))

        async def starting() -> bool:
            status, body = await readyz(served)
            return status == 503 and part(body, "channel", "tg")["state"] == "starting"

        await eventually(starting, what="/readyz to say the channel is still connecting")
        tg = part((await readyz(served))[1], "channel", "tg")
        assert tg["reason"] == "connecting: the platform has not answered yet"
    finally:
        gate.set()
        await runner.cleanup()


def health(state: str, holder: str) -> ChannelHealth:
    return ChannelHealth(
        "tg", "telegram", state, 1_700_000_000.0, None, None, None, "", None, 0, holder, ""
    )


def test_a_channel_held_by_another_process_is_served_there_not_failed() -> None:
    here = "laptop:100:aaaa"
    elsewhere = channel_part(health("connected", "server-2:4242:bbbb"), here)
    assert elsewhere.ok and elsewhere.served_by == "pid 4242 on server-2"
    assert elsewhere.since == "2023-11-14T22:13:20Z"
    assert channel_part(health("connected", here), here).served_by == "here"
    # Held elsewhere but down there: not ready here either, and it says who holds it.
    down = channel_part(health("backoff", "server-2:4242:bbbb"), here)
    assert not down.ok and down.served_by == "pid 4242 on server-2"


async def test_an_mcp_server_that_fails_to_start_is_not_ready(serve: Any) -> None:
    config = mock_config(extra="mcp_servers:\n  files:\n    command: no-such-mcp-program-xyz\n")
    served = await serve(config)
    await served.runtime.start_mcp(wait=10)

    async def down() -> bool:
        status, body = await readyz(served)
        return status == 503 and part(body, "mcp", "files")["state"] == "down"

    await eventually(down, what="/readyz to name the MCP server down")
    mcp = part((await readyz(served))[1], "mcp", "files")
    assert mcp["ok"] is False
    assert mcp["reason"] == "down: it failed to start or its connection broke (retrying)"
    assert "no-such-mcp-program-xyz" not in mcp["reason"]


async def test_a_draining_pool_is_not_ready(serve: Any) -> None:
    served = await serve(mock_config())
    status, body = await readyz(served)
    pools = [p for p in body["parts"] if p["kind"] == "pool"]
    assert status == 200 and pools and all(p["state"] == "up" for p in pools)
    assert any(p["name"] == "turn" for p in pools)
    served.runtime.turns.drain()
    status, body = await readyz(served)
    turn = part(body, "pool", "turn")
    assert status == 503 and turn["state"] == "draining"
    assert turn["reason"].startswith("draining")


async def test_a_standby_process_says_the_channel_is_served_by_its_lease_holder(
    runtime_factory: OpenRuntime, tg: FakeTelegram
) -> None:
    config = mock_config(extra=telegram(tg))
    holder = await runtime_factory(config)
    holder.start_workers()
    assert holder.channels is not None
    await holder.channels.started()
    standby = await runtime_factory(config)
    standby.start_workers()  # the channel's lease is the holder's: this one stands by
    server = await standby.http.start("127.0.0.1:0")
    async with aiohttp.ClientSession() as client:

        async def ready() -> Any:
            async with client.get(f"{server.url}/readyz") as response:
                body = await response.json()
                return body if response.status == 200 else None

        await eventually(ready, what="the standby's /readyz to count the held channel")
        body = await ready()
    channel = part(body, "channel", "tg")
    assert channel["ok"] is True and channel["state"] == "connected"
    assert channel["served_by"] == holder_words(str(holder.queue.owner))
    assert channel["served_by"].startswith(f"pid {os.getpid()} on ")
