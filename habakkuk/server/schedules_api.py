"""The schedules' JSON API (spec 001 "Schedules").

Every handler is a thin adapter over the host's `schedules` (SchedulesAccess): it checks
the input, calls one method and answers with the shapes of habakkuk.work.schedule_views,
which `habakkuk schedules ... --json` prints too.

- GET /api/schedules?agent=: {"schedules": [...]}, next run first (an unknown agent: 404).
- POST /api/schedules {"agent", "name", "when", "prompt", "deliver_to"?}: 201 with the
  schedule. Prompt schedules only: script schedules run shell commands unattended, so a
  body with `command` is refused as an unknown field (`habakkuk schedules add --run`).
- POST /api/schedules/{id}/pause {}, .../resume {} (from now; missed slots are recorded,
  not replayed): the schedule.
- POST /api/schedules/{id}/run {}: one extra run now, {"job", "schedule"}.
- DELETE /api/schedules/{id}: 204.
- GET /api/schedules/{id}/runs?limit=: its slots, newest first (ran, failed, skipped and
  why, delivered or not): {"runs": [...]}.

The service's errors become JSON errors in the conventions middleware: NotFound 404,
WhenError and other refusals 400 with their one-line reason. 501 without the service.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp import web

from habakkuk.work import schedule_views as views
from habakkuk.work.schedule_types import NewSchedule, Schedule, SchedulesAccess

from .errors import ApiError
from .inputs import query_int, read_json
from .served import field, json_response, only_fields, server_of

BODY_LIMIT = 64 * 1024  # a prompt is a paragraph, not a document
ADD_FIELDS = {"agent", "name", "when", "prompt", "deliver_to"}
NAME_CHARS = 200


def _schedules(request: web.Request) -> SchedulesAccess:
    runtime = server_of(request).runtime
    schedules: SchedulesAccess | None = getattr(runtime, "schedules", None)
    if schedules is None:
        raise ApiError(501, "this process has no schedules service")
    return schedules


def next_runs(schedules: SchedulesAccess, schedule: Schedule) -> list[dt.datetime] | None:
    """The next three fire times of an enabled schedule (None: paused or spent)."""
    return schedules.upcoming(schedule) or None


def _json(schedules: SchedulesAccess, schedule: Schedule) -> dict[str, Any]:
    return views.schedule_json(schedule, next_runs=next_runs(schedules, schedule))


async def _empty_body(request: web.Request) -> None:
    only_fields(await read_json(request, limit=BODY_LIMIT), set())


async def schedules_list(request: web.Request) -> web.Response:
    """GET /api/schedules?agent=: every schedule (of the agent), next run first."""
    schedules = _schedules(request)
    agent = request.query.get("agent") or None
    if agent is not None:
        agent = server_of(request).runtime.config.agent(agent).name  # unknown: 404
    found = await schedules.list_schedules(agent)
    return json_response({"schedules": [_json(schedules, s) for s in found]})


def _text(body: dict[str, Any], name: str) -> str:
    value: str = field(body, name, str, required=True).strip()
    if not value:
        raise ApiError(400, f"{name} must not be empty")
    return value


async def schedule_add(request: web.Request) -> web.Response:
    """POST /api/schedules {"agent"?, "name", "when", "prompt", "deliver_to"?}: 201; no
    agent is the default agent (the schedules service's rule, as for the CLI)."""
    schedules = _schedules(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, ADD_FIELDS)  # `command` included: scripts come from the CLI only
    named = (field(body, "agent", str) or "").strip()
    agent = server_of(request).runtime.config.agent(named).name if named else ""  # 404
    name = _text(body, "name")
    if len(name) > NAME_CHARS:
        raise ApiError(400, f"name is longer than {NAME_CHARS} characters")
    deliver_to = field(body, "deliver_to", str)
    new = NewSchedule(
        agent=agent,
        name=name,
        when=_text(body, "when"),
        prompt=_text(body, "prompt"),
        deliver_to=(deliver_to or "").strip() or None,
        origin="api",
    )
    added = await schedules.add(new, by="api")  # WhenError: 400 with the reading(s)
    return json_response(_json(schedules, added), status=201)


async def schedule_pause(request: web.Request) -> web.Response:
    """POST /api/schedules/{id}/pause {}: the schedule, paused."""
    schedules = _schedules(request)
    await _empty_body(request)
    return json_response(_json(schedules, await schedules.pause(request.match_info["id"])))


async def schedule_resume(request: web.Request) -> web.Response:
    """POST /api/schedules/{id}/resume {}: enabled again from now."""
    schedules = _schedules(request)
    await _empty_body(request)
    return json_response(_json(schedules, await schedules.resume(request.match_info["id"])))


async def schedule_run(request: web.Request) -> web.Response:
    """POST /api/schedules/{id}/run {}: one extra run now, {"job", "schedule"}."""
    schedules = _schedules(request)
    await _empty_body(request)
    schedule_id = request.match_info["id"]
    job = await schedules.run_now(schedule_id)
    schedule = await schedules.get(schedule_id)
    return json_response({"job": job, "schedule": _json(schedules, schedule)})


async def schedule_delete(request: web.Request) -> web.Response:
    """DELETE /api/schedules/{id}: 204."""
    schedules = _schedules(request)
    await schedules.delete(request.match_info["id"])
    return web.Response(status=204)


async def schedule_runs(request: web.Request) -> web.Response:
    """GET /api/schedules/{id}/runs?limit=50: the slots, newest first."""
    schedules = _schedules(request)
    limit = query_int(request, "limit", 50, 1, 1000)
    runs = await schedules.runs(request.match_info["id"], limit=limit)
    return json_response(views.runs_json(runs))


def setup(app: web.Application) -> None:
    """Register the schedules routes."""
    app.router.add_get("/api/schedules", schedules_list)
    app.router.add_post("/api/schedules", schedule_add)
    app.router.add_delete("/api/schedules/{id}", schedule_delete)
    app.router.add_get("/api/schedules/{id}/runs", schedule_runs)
    app.router.add_post("/api/schedules/{id}/pause", schedule_pause)
    app.router.add_post("/api/schedules/{id}/resume", schedule_resume)
    app.router.add_post("/api/schedules/{id}/run", schedule_run)
