"""The schedules' HTTP API (spec 001 "Schedules") on the real server, runtime and
schedules service (control.db), its clock fixed at Tue 2026-12-01 07:00 UTC."""

from __future__ import annotations

import json
from typing import Any

import pytest

from habakkuk.work.service import Schedules
from tests.conftest import mock_config
from tests.fakes.schedules import NOW
from tests.server.conftest import Served, ServeFactory

TWO_AGENTS = "  ops:\n    model: mock/scripted\n    mode: full\ntimezone: UTC\n"
MORNING = {"agent": "main", "name": "inbox", "when": "0 8 * * 1-5", "prompt": "Summarise"}


async def call(served: Served, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    kwargs: dict[str, Any] = {"headers": served.auth()}
    if body is not None:
        kwargs["json"] = body
    async with served.client.request(method, served.url + path, **kwargs) as response:
        text = await response.text()
        return response.status, json.loads(text) if text else None


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    served = await serve(mock_config("- text: hi", extra=TWO_AGENTS), workers=False)
    service(served).clock = lambda: NOW
    return served


def service(served: Served) -> Schedules:
    return served.runtime.schedules


async def test_a_prompt_schedule_is_added_with_its_next_fire_times(served: Served) -> None:
    status, added = await call(served, "POST", "/api/schedules", MORNING)
    assert status == 201, added
    assert added["spec"] == "0 8 * * 1-5" and added["agent"] == "main" and added["enabled"]
    assert added["next_run"] == "2026-12-01T08:00:00Z"
    assert added["next_runs"] == [
        "2026-12-01T08:00:00Z", "2026-12-02T08:00:00Z", "2026-12-03T08:00:00Z"
    ]  # fmt: skip
    status, listed = await call(served, "GET", "/api/schedules")
    assert status == 200 and [s["id"] for s in listed["schedules"]] == [added["id"]]


async def test_a_schedule_without_an_agent_is_the_default_agents_as_in_the_cli(
    served: Served,
) -> None:
    without = {k: v for k, v in MORNING.items() if k != "agent"}
    status, added = await call(served, "POST", "/api/schedules", without)
    assert status == 201, added
    assert added["agent"] == served.runtime.config.agent(None).name == "main"
    empty = {**without, "agent": "", "name": "inbox, again"}  # names are unique per agent
    status, added = await call(served, "POST", "/api/schedules", empty)
    assert status == 201 and added["agent"] == "main"
    status, added = await call(served, "POST", "/api/schedules", {**without, "agent": "ops"})
    assert status == 201 and added["agent"] == "ops"


async def test_a_body_with_a_command_is_refused_as_an_unknown_field(served: Served) -> None:
    status, body = await call(served, "POST", "/api/schedules", {**MORNING, "command": "rm -rf"})
    assert status == 400 and "unknown field 'command'" in body["error"]
    assert await service(served).list_schedules() == []


async def test_bad_input_gets_400_with_the_reason_and_an_unknown_agent_404(
    served: Served,
) -> None:
    status, body = await call(served, "POST", "/api/schedules", {**MORNING, "when": "30m"})
    assert status == 400 and "did you mean '@every 30m'" in body["error"]
    status, body = await call(served, "POST", "/api/schedules", {**MORNING, "prompt": " "})
    assert status == 400 and body["error"] == "prompt must not be empty"
    status, body = await call(served, "POST", "/api/schedules", {**MORNING, "name": 3})
    assert status == 400 and body["error"] == "name must be a string"
    status, body = await call(served, "POST", "/api/schedules", {**MORNING, "agent": "ghost"})
    assert status == 404 and "ghost" in body["error"]
    status, body = await call(served, "GET", "/api/schedules?agent=ghost")
    assert status == 404
    status, body = await call(served, "POST", "/api/schedules/sch_nope/pause", {})
    assert status == 404 and "sch_nope" in body["error"]
    status, body = await call(served, "DELETE", "/api/schedules/sch_nope")
    assert status == 404


async def test_a_name_the_agent_already_uses_is_400_and_every_5m_is_read(served: Served) -> None:
    status, added = await call(served, "POST", "/api/schedules", MORNING)
    assert status == 201, added
    status, body = await call(served, "POST", "/api/schedules", {**MORNING, "name": "Inbox"})
    assert status == 400
    assert f"already has a schedule named 'Inbox' ({added['id']})" in body["error"]
    ops = {**MORNING, "agent": "ops", "when": "every 5m"}  # another agent may use the name
    status, theirs = await call(served, "POST", "/api/schedules", ops)
    assert status == 201 and theirs["spec"] == "@every 5m"


async def test_pause_resume_run_runs_and_delete(served: Served) -> None:
    _, added = await call(served, "POST", "/api/schedules", MORNING)
    path = f"/api/schedules/{added['id']}"
    status, paused = await call(served, "POST", path + "/pause", {})
    assert status == 200 and paused["enabled"] is False and "next_runs" not in paused
    service(served).clock = lambda: NOW + 2 * 86400  # paused over two weekday mornings
    status, resumed = await call(served, "POST", path + "/resume", {})
    assert status == 200 and resumed["enabled"] is True
    assert resumed["next_run"] == "2026-12-03T08:00:00Z"
    status, body = await call(served, "POST", path + "/pause", {"why": 1})
    assert status == 400 and "unknown field 'why'" in body["error"]
    status, ran = await call(served, "POST", path + "/run", {})
    assert status == 200 and ran["job"].startswith(added["id"])
    assert ran["schedule"]["id"] == added["id"]
    status, runs = await call(served, "GET", path + "/runs")
    assert status == 200
    assert [(r["slot"], r["status"], r["extra"], r["outcome"]) for r in runs["runs"]] == [
        ("2026-12-03T07:00:00Z", "queued", True, "queued"),
        ("2026-12-02T08:00:00Z", "skipped", False, "skipped: paused"),
        ("2026-12-01T08:00:00Z", "skipped", False, "skipped: paused"),
    ]
    status, body = await call(served, "GET", path + "/runs?limit=0")
    assert status == 400 and "limit" in body["error"]
    status, _ = await call(served, "DELETE", path)
    assert status == 204 and await service(served).list_schedules() == []


async def test_the_list_of_one_agent_and_the_overview_counts(served: Served) -> None:
    await call(served, "POST", "/api/schedules", MORNING)
    _, ops = await call(served, "POST", "/api/schedules", {**MORNING, "agent": "ops"})
    await call(served, "POST", f"/api/schedules/{ops['id']}/pause", {})
    _, listed = await call(served, "GET", "/api/schedules?agent=ops")
    assert [s["id"] for s in listed["schedules"]] == [ops["id"]]
    _, overview = await call(served, "GET", "/api/overview")
    assert overview["schedules"] == {"total": 2, "enabled": 1}


async def test_without_the_service_it_is_501(served: Served) -> None:
    served.runtime.schedules = None  # type: ignore[assignment]  # a runtime without the service
    status, body = await call(served, "GET", "/api/schedules")
    assert status == 501 and "schedules" in body["error"]
