"""habakkuk_board_create and habakkuk_board_list on Habakkuk's MCP server, driven by the
official MCP client over /mcp on the real HTTP server and board service."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from habakkuk.work.board_types import NewCard
from tests.mcp.test_mcp_server import BOUND, CONFIG, first_text, structured

TOKEN = "api-token-0123456789"


async def test_a_client_adds_and_lists_cards_and_bad_input_is_a_tool_error(
    runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    monkeypatch.setenv("HABAKKUK_MCP_TOKEN", TOKEN)
    runtime = await runtime_factory(
        CONFIG + "http:\n  token_env: HABAKKUK_MCP_TOKEN\nmcp_server:\n  http: true\n"
    )
    board = runtime.board
    earlier = await board.create(NewCard("Gather figures", assignee="main"))
    server = await runtime.http.start("127.0.0.1:0")

    async def scenario() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
        async with (
            http,
            Client(
                streamable_http_client(f"{server.url}/mcp", http_client=http), cache=None
            ) as client,
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"habakkuk_board_create", "habakkuk_board_list"} <= names
            arguments = {
                "title": "Write the report",
                "body": "two pages",
                "assignee": "main",
                "priority": 4,
                "depends_on": [earlier.id],
            }
            added = structured(await client.call_tool("habakkuk_board_create", arguments))
            assert (added["title"], added["created_by"], added["status"]) == (
                "Write the report", "user", "todo"
            )  # fmt: skip
            assert added["depends_on"] == [earlier.id] and added["priority"] == 4
            stored = await board.get(added["id"])
            assert (stored.body, stored.assignee) == ("two pages", "main")

            listed = structured(await client.call_tool("habakkuk_board_list", {}))
            assert [c["id"] for c in listed["cards"]] == [added["id"], earlier.id]
            assert "events" not in listed["cards"][0]
            await board.cancel(earlier.id)
            mine = structured(
                await client.call_tool(
                    "habakkuk_board_list", {"status": "cancelled", "assignee": "main"}
                )
            )
            assert [c["id"] for c in mine["cards"]] == [earlier.id]

            cases: list[tuple[str, dict[str, object], str]] = [
                ("habakkuk_board_create", {"title": " "}, "title is empty"),
                ("habakkuk_board_create", {"title": "x", "assignee": "nobody"}, "nobody"),
                ("habakkuk_board_create", {"title": "x", "depends_on": ["card_0000000000"]},
                 "card_0000000000"),
                ("habakkuk_board_create", {"title": "x", "priority": 1000}, "priority"),
                ("habakkuk_board_list", {"status": "finished"}, "finished"),
            ]  # fmt: skip
            for tool, arguments, word in cases:
                bad = await client.call_tool(tool, arguments)
                assert bad.is_error, (tool, arguments)
                text = first_text(bad)
                assert word in text and "\n" not in text and "Traceback" not in text, text
            assert len(await board.list_cards(status="all")) == 2

    await asyncio.wait_for(scenario(), BOUND)
