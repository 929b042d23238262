"""The board's HTTP API (spec 001 "Board") on the real server, runtime and board service
(control.db): every action answers with the card as stored after it."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from habakkuk.work.board_types import NewCard
from tests.conftest import mock_config
from tests.server.conftest import Served, ServeFactory

TWO_AGENTS = "  ops:\n    model: mock/scripted\n    mode: full\ntimezone: UTC\n"


async def call(
    served: Served, method: str, path: str, body: Any = None, *, raw: bytes | None = None
) -> tuple[int, Any]:
    kwargs: dict[str, Any] = {"headers": served.auth()}
    if body is not None:
        kwargs["json"] = body
    if raw is not None:
        kwargs["data"] = raw
        kwargs["headers"] = served.auth(**{"Content-Type": "application/json"})
    async with served.client.request(method, served.url + path, **kwargs) as response:
        text = await response.text()
        return response.status, json.loads(text) if text else None


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    # No workers: nothing dispatches, so cards stay where the API puts them.
    return await serve(mock_config("- text: hi", extra=TWO_AGENTS), workers=False)


async def test_a_card_is_added_as_the_user_and_shown_with_its_history(served: Served) -> None:
    status, added = await call(
        served, "POST", "/api/board", {"title": "Write the report", "body": "two pages"}
    )
    assert status == 201, added
    shown = (added["title"], added["body"], added["status"])
    assert shown == ("Write the report", "two pages", "todo")
    assert added["created_by"] == "user" and added["assignee"] == "" and added["priority"] == 0
    assert [e["kind"] for e in added["events"]] == ["created"]
    stored = await served.runtime.board.get(added["id"])
    assert stored.title == "Write the report" and stored.created_by == "user"

    status, shown = await call(served, "GET", f"/api/board/{added['id']}")
    assert status == 200 and shown["id"] == added["id"] and shown["comments"] == []
    status, listed = await call(served, "GET", "/api/board")
    assert status == 200 and [c["id"] for c in listed["cards"]] == [added["id"]]
    assert "comments" not in listed["cards"][0] and "events" not in listed["cards"][0]


async def test_a_card_with_dependencies_and_a_parent_waits_on_them(served: Served) -> None:
    _, first = await call(served, "POST", "/api/board", {"title": "Gather", "assignee": "ops"})
    status, second = await call(
        served,
        "POST",
        "/api/board",
        {"title": "Write", "assignee": "main", "priority": 7, "parent": first["id"],
         "depends_on": [first["id"]]},
    )  # fmt: skip
    assert status == 201, second
    assert second["depends_on"] == [first["id"]] and second["parent"] == first["id"]
    assert second["waiting_on"] == [{"id": first["id"], "status": "todo"}]
    assert second["priority"] == 7 and first["assignee"] == "ops"
    status, missing = await call(
        served, "POST", "/api/board", {"title": "x", "depends_on": ["card_0000000000"]}
    )
    assert status == 404 and "card_0000000000" in missing["error"]


async def test_the_list_filters_by_status_and_assignee(served: Served) -> None:
    board = served.runtime.board
    mine = await board.create(NewCard("mine", assignee="main", priority=1))
    theirs = await board.create(NewCard("theirs", assignee="ops"))
    gone = await board.create(NewCard("gone"))
    await board.cancel(gone.id)

    async def ids(query: str) -> list[str]:
        status, body = await call(served, "GET", "/api/board" + query)
        assert status == 200, body
        return [c["id"] for c in body["cards"]]

    assert await ids("") == [mine.id, theirs.id]  # open, highest priority first
    assert await ids("?status=all") == [mine.id, theirs.id, gone.id]
    assert await ids("?status=cancelled") == [gone.id]
    assert await ids("?assignee=ops") == [theirs.id]
    assert await ids("?status=all&assignee=&limit=1") == [mine.id]
    for query, word in [
        ("?status=finished", "status must be one of open, all, todo"),
        ("?limit=0", "limit must be between 1 and 1000"),
        ("?limit=100000", "limit must be between 1 and 1000"),
        ("?limit=ten", "limit must be an integer"),
    ]:
        status, body = await call(served, "GET", "/api/board" + query)
        assert status == 400 and word in body["error"], (query, body)


async def test_every_action_answers_with_the_card_read_back(served: Served) -> None:
    board = served.runtime.board
    card = await board.create(NewCard("Ship it"))
    path = f"/api/board/{card.id}"

    status, assigned = await call(served, "POST", path + "/assign", {"assignee": "ops"})
    assert status == 200 and assigned["assignee"] == "ops", assigned
    status, ranked = await call(served, "POST", path + "/priority", {"priority": -5})
    assert status == 200 and ranked["priority"] == -5
    status, said = await call(served, "POST", path + "/comment", {"text": "  by Friday  "})
    assert status == 200 and [(c["author"], c["text"]) for c in said["comments"]] == [
        ("user", "by Friday")
    ]
    status, cancelled = await call(served, "POST", path + "/cancel", {})
    assert status == 200 and cancelled["status"] == "cancelled"
    status, reopened = await call(served, "POST", path + "/reopen", {})
    assert status == 200 and reopened["status"] == "todo"
    status, unassigned = await call(served, "POST", path + "/assign", {"assignee": ""})
    assert status == 200 and unassigned["assignee"] == ""

    stored = await board.get(card.id)
    assert (stored.status, stored.assignee, stored.priority) == ("todo", "", -5)
    kinds = [e["kind"] for e in unassigned["events"]]
    assert kinds[:1] == ["created"] and {"assigned", "priority", "cancelled", "reopened"} <= set(
        kinds
    )
    assert all(e["author"] == "user" for e in unassigned["events"])
    # A unique prefix of the id, with or without "card_", names the card.
    status, shown = await call(served, "GET", f"/api/board/{card.id[:9]}")
    assert status == 200 and shown["id"] == card.id


async def test_a_change_the_rules_refuse_is_409_and_changes_nothing(served: Served) -> None:
    board = served.runtime.board
    card = await board.create(NewCard("Once"))
    await board.cancel(card.id)
    before = await board.get(card.id)
    status, body = await call(served, "POST", f"/api/board/{card.id}/cancel", {})
    assert status == 409 and body["error"], body
    assert (await board.get(card.id)).revision == before.revision


async def test_bad_input_gets_a_4xx_with_the_reason_never_a_500(served: Served) -> None:
    board = served.runtime.board
    card = await board.create(NewCard("Target"))
    path = f"/api/board/{card.id}"
    cases: list[tuple[str, str, Any, int, str]] = [
        ("POST", "/api/board", {"title": "x", "owner": "me"}, 400, "unknown field 'owner'"),
        ("POST", "/api/board", {"title": "  "}, 400, "title must not be empty"),
        ("POST", "/api/board", {"title": 3}, 400, "title must be a string"),
        ("POST", "/api/board", {}, 400, "title is required"),
        ("POST", "/api/board", {"title": "x" * 201}, 400, "title is longer than 200"),
        ("POST", "/api/board", {"title": "x", "priority": "5"}, 400, "must be an integer"),
        ("POST", "/api/board", {"title": "x", "priority": True}, 400, "must be an integer"),
        ("POST", "/api/board", {"title": "x", "priority": 101}, 400, "between -100 and 100"),
        ("POST", "/api/board", {"title": "x", "depends_on": "a"}, 400, "depends_on must be a list"),
        ("POST", "/api/board", {"title": "x", "depends_on": [1]}, 400, "list of card ids"),
        ("POST", "/api/board", {"title": "x", "depends_on": ["../etc"]}, 400, "not a card id"),
        ("POST", "/api/board", {"title": "x", "parent": "a/b"}, 400, "not a card id"),
        ("POST", "/api/board", {"title": "x", "assignee": "ghost"}, 404, "ghost"),
        ("POST", path + "/assign", {}, 400, "assignee is required"),
        ("POST", path + "/assign", {"assignee": ["ops"]}, 400, "assignee must be a string"),
        ("POST", path + "/priority", {"priority": 1.5}, 400, "priority must be an integer"),
        ("POST", path + "/comment", {"text": ""}, 400, "text must not be empty"),
        ("POST", path + "/cancel", {"now": True}, 400, "unknown field 'now'"),
        ("POST", "/api/board/card_ffffffffff/cancel", {}, 404, "card_ffffffffff"),
        ("GET", "/api/board/card_ffffffffff", None, 404, "card_ffffffffff"),
        ("GET", "/api/board/..%2F..%2Fetc", None, 400, "not a card id"),
        ("GET", "/api/board/card%00x", None, 400, "not a card id"),
    ]
    for method, where, body, expected, word in cases:
        status, answer = await call(served, method, where, body)
        assert status == expected and word in answer["error"], (where, body, answer)
    status, answer = await call(served, "POST", "/api/board", raw=b"{not json")
    assert status == 400 and "not valid JSON" in answer["error"]
    status, answer = await call(served, "POST", path + "/comment", raw=b"[1]")
    assert status == 400 and "JSON object" in answer["error"]
    huge = json.dumps({"title": "x", "body": "y" * 200_000}).encode()
    status, answer = await call(served, "POST", "/api/board", raw=huge)
    assert status == 413 and "over" in answer["error"]
    # None of it reached the board.
    assert [c.id for c in await board.list_cards(status="all")] == [card.id]
    assert (await board.get(card.id)).comments == ()


async def test_the_board_needs_the_token(served: Served) -> None:
    async with aiohttp.ClientSession() as plain:
        async with plain.get(served.url + "/api/board") as response:
            assert response.status == 401
        async with plain.post(served.url + "/api/board", json={"title": "x"}) as response:
            assert response.status == 401
    assert await served.runtime.board.list_cards(status="all") == []


async def test_the_overview_counts_open_cards(served: Served) -> None:
    board = served.runtime.board
    for title in ("a", "b", "c"):
        await board.create(NewCard(title))
    done_with = await board.create(NewCard("d"))
    await board.cancel(done_with.id)
    status, overview = await call(served, "GET", "/api/overview")
    assert status == 200 and overview["open_cards"] == 3
    assert (await served.runtime.control.overview()).open_cards == 3
