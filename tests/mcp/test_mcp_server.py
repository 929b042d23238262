"""Habakkuk as an MCP server, driven by the official MCP client."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.home import Home
from habakkuk.work.schedule_types import NewSchedule
from tests.fakes.loopback import serve_on_loopback
from tests.fakes.schedules import NOW

REPO = Path(__file__).resolve().parents[2]
BOUND = 120.0

CONFIG = """\
providers:
  mock:
    type: mock
    script:
      - text: "answer: {input}"
agents:
  main:
    model: mock/scripted
    mode: read-only
"""


def first_text(result: Any) -> str:
    return str(result.content[0].text)


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(first_text(result)))


async def test_official_client_asks_habakkuk_over_stdio(home: Home, runtime_factory: Any) -> None:
    from mcp import Client, StdioServerParameters

    home.config_path.write_text(CONFIG, encoding="utf-8")
    writer = await runtime_factory(CONFIG)  # the schedule, as any process of the home adds it
    added = await writer.schedules.add(
        NewSchedule("main", "inbox", "0 8 * * 1-5", "Sum up"), by="owner"
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "habakkuk.cli", "mcp", "serve"],
        env={"HABAKKUK_HOME": str(home.root)},
        cwd=REPO,
    )

    async def scenario() -> None:
        async with Client(params, cache=None) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            assert names == [
                "habakkuk_ask", "habakkuk_board_create", "habakkuk_board_list",
                "habakkuk_schedules_list", "habakkuk_session_read", "habakkuk_sessions_list",
            ]  # fmt: skip

            first = structured(await client.call_tool("habakkuk_ask", {"message": "hello"}))
            assert first["reply"] == "answer: hello"
            session = first["session"]
            again = structured(
                await client.call_tool("habakkuk_ask", {"message": "more", "session": session})
            )
            assert again["session"] == session and again["reply"] == "answer: more"

            listed = structured(await client.call_tool("habakkuk_sessions_list", {}))
            assert [(s["id"], s["origin"]) for s in listed["sessions"]] == [(session, "mcp")]

            read = structured(await client.call_tool("habakkuk_session_read", {"session": session}))
            roles = [m["role"] for m in read["messages"]]
            assert roles == ["user", "assistant", "user", "assistant"]
            assert "answer: more" in read["messages"][-1]["text"]

            bad = await client.call_tool("habakkuk_ask", {"message": "x", "agent": "nobody"})
            assert bad.is_error and "nobody" in first_text(bad)

            schedules = structured(await client.call_tool("habakkuk_schedules_list", {}))
            assert [(s["id"], s["name"]) for s in schedules["schedules"]] == [(added.id, "inbox")]
            assert len(schedules["schedules"][0]["next_runs"]) == 3

    await asyncio.wait_for(scenario(), BOUND)


@pytest.mark.parametrize("allow_send", [False, True])
async def test_http_endpoint_behind_the_token(
    home: Home, runtime_factory: Any, allow_send: bool
) -> None:
    import httpx2
    from aiohttp import web
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from habakkuk.protocols.mcp.server import McpHttpEndpoint

    extra = f"mcp_server:\n  http: true\n  allow_send: {str(allow_send).lower()}\n"
    runtime = await runtime_factory(CONFIG + extra)
    runtime.start_workers()
    app = web.Application()
    McpHttpEndpoint(runtime, token="sesame").install(app)
    runner, port = await serve_on_loopback(app)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx2.AsyncClient() as plain:
            refused = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert refused.status_code == 401
            # stateless: no stream to GET, so it is refused rather than left hanging
            stream = await plain.get(url, headers={"Authorization": "Bearer sesame"})
            assert stream.status_code == 405

        async def scenario() -> None:
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer sesame"})
            async with (
                http,
                Client(streamable_http_client(url, http_client=http), cache=None) as client,
            ):
                names = {t.name for t in (await client.list_tools()).tools}
                assert ("habakkuk_send" in names) is allow_send
                answer = structured(
                    await client.call_tool("habakkuk_ask", {"message": "over http"})
                )
                assert answer["reply"] == "answer: over http"
                if allow_send:
                    sent = await client.call_tool(
                        "habakkuk_send", {"account": "tg", "conversation": "1", "text": "hi"}
                    )
                    assert sent.is_error and "not configured" in first_text(sent)

        await asyncio.wait_for(scenario(), BOUND)
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("enabled", [False, True])
async def test_mcp_is_mounted_on_the_http_server_behind_the_api_token(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    monkeypatch.setenv("HABAKKUK_MCP_TOKEN", "api-token-0123456789")
    extra = "http:\n  token_env: HABAKKUK_MCP_TOKEN\n"
    if enabled:
        extra += "mcp_server:\n  http: true\n"
    runtime = await runtime_factory(CONFIG + extra)
    runtime.start_workers()
    runtime.schedules.clock = lambda: NOW
    added = await runtime.schedules.add(
        NewSchedule("main", "inbox", "0 8 * * 1-5", "Sum up"), by="owner"
    )
    server = await runtime.http.start("127.0.0.1:0")
    url = f"{server.url}/mcp"
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx2.AsyncClient() as plain:
        refused = await plain.post(url, json=ping)
        assert refused.status_code == 401
        wrong = await plain.post(url, json=ping, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        if not enabled:
            authed = await plain.post(
                url, json=ping, headers={"Authorization": "Bearer api-token-0123456789"}
            )
            assert authed.status_code == 404  # off unless mcp_server.http: true
            return

    async def scenario() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer api-token-0123456789"})
        async with (
            http,
            Client(streamable_http_client(url, http_client=http), cache=None) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"habakkuk_ask", "habakkuk_sessions_list"} <= names
            answer = structured(await client.call_tool("habakkuk_ask", {"message": "mounted"}))
            assert answer["reply"] == "answer: mounted"
            listed = structured(await client.call_tool("habakkuk_schedules_list", {}))
            assert [(s["id"], s["spec"], s["enabled"]) for s in listed["schedules"]] == [
                (added.id, "0 8 * * 1-5", True)
            ]
            assert listed["schedules"][0]["next_runs"][0] == "2026-12-01T08:00:00Z"
            mine = structured(await client.call_tool("habakkuk_schedules_list", {"agent": "main"}))
            assert len(mine["schedules"]) == 1
            bad = await client.call_tool("habakkuk_schedules_list", {"agent": "nobody"})
            assert bad.is_error and "nobody" in first_text(bad)

    await asyncio.wait_for(scenario(), BOUND)
