"""The skills' JSON API (spec 001 "Skills"), plus approve, remove and restore.

Every handler is a thin adapter over the host's `skills` (SkillsAccess): it checks the
agent (unknown: 404) and the skill name (not `^[a-z0-9][a-z0-9-]{0,63}$`: 400, before
anything looks for a folder), calls one method and answers with the shapes of
habakkuk.knowledge.skills.views, which `habakkuk skills ... --json` prints too.

- GET /api/skills/{agent}: {"skills": [...]}, the agent's own and the shared ones.
- GET /api/skills/{agent}/{name}: one skill with "body", "files" and "caution". Reading
  it here is not a use (only the agent's skill_view, /skill and `run --skill` are).
- POST /api/skills/{agent}/{name}/approve {"acknowledge"?}: trust an installed shared
  skill; one whose scan said dangerous needs {"acknowledge": true} (the user read its
  findings), else 409 {"error", "skill"} with every finding and nothing changed.
- DELETE /api/skills/{agent}/{name}: remove it (backed up first): {"name", "backup"}.
- POST /api/skills/{agent}/{name}/restore {}: put back its newest backup.

The service's errors become JSON errors in the conventions middleware: NotFound 404,
anything else it refused (a plugin's skill, nothing to restore) 400 with its reason.
"""

from __future__ import annotations

from aiohttp import web

from habakkuk.knowledge.skills import views
from habakkuk.knowledge.skills.types import SKILL_NAME, NeedsAcknowledgement, SkillsAccess

from .errors import ApiError
from .inputs import read_json
from .served import json_response, only_fields, server_of

BODY_LIMIT = 16 * 1024  # the bodies here are `{}`


def _skills(request: web.Request) -> tuple[SkillsAccess, str]:
    """The host's skills and the path's agent (ConfigError, so 404, when unknown)."""
    runtime = server_of(request).runtime
    skills: SkillsAccess | None = getattr(runtime, "skills", None)
    if skills is None:
        raise ApiError(501, "this process has no skills service")
    agent = runtime.config.agent(request.match_info["agent"]).name
    return skills, agent


def _name(request: web.Request) -> str:
    """The path's skill name; 400 when it is not one (fullmatch: `$` alone would let a
    trailing newline through)."""
    name = request.match_info["name"]
    if not SKILL_NAME.fullmatch(name):
        shown = name if len(name) <= 70 else name[:67] + "..."
        raise ApiError(
            400,
            f"{shown!r} is not a skill name: lowercase letters, digits and '-', "
            "at most 64 characters, starting with a letter or digit",
        )
    return name


async def _empty_body(request: web.Request) -> None:
    only_fields(await read_json(request, limit=BODY_LIMIT), set())


async def skills_list(request: web.Request) -> web.Response:
    """GET /api/skills/{agent}: the agent's own skills and the shared ones, by name."""
    skills, agent = _skills(request)
    return json_response(views.skills_json(await skills.list_skills(agent)))


async def skill_show(request: web.Request) -> web.Response:
    """GET /api/skills/{agent}/{name}: the instructions and the supporting files' paths."""
    skills, agent = _skills(request)
    name = _name(request)
    return json_response(views.skill_json(await skills.skill(agent, name)))


async def skill_approve(request: web.Request) -> web.Response:
    """POST /api/skills/{agent}/{name}/approve {"acknowledge"?}: trust the installed skill.
    One whose scan said dangerous needs {"acknowledge": true}; without it, 409 with the
    skill and every finding, and nothing changes."""
    skills, agent = _skills(request)
    name = _name(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"acknowledge"})
    acknowledge = body.get("acknowledge", False)
    if not isinstance(acknowledge, bool):
        raise ApiError(400, "acknowledge must be true or false", param="acknowledge")
    await skills.skill(agent, name)  # the agent must see it: NotFound (404) otherwise
    try:
        approved = await skills.approve(name, acknowledged=acknowledge)
    except NeedsAcknowledgement as exc:
        refusal = {
            "error": f'{exc}: read the reasons, then send {{"acknowledge": true}}',
            "skill": views.summary_json(exc.skill),
        }
        return json_response(refusal, 409)
    return json_response(views.summary_json(approved))


async def skill_remove(request: web.Request) -> web.Response:
    """DELETE /api/skills/{agent}/{name}: back the skill up, then remove it."""
    skills, agent = _skills(request)
    name = _name(request)
    return json_response(views.removed_json(await skills.remove(agent, name)))


async def skill_restore(request: web.Request) -> web.Response:
    """POST /api/skills/{agent}/{name}/restore {}: the newest backup put back."""
    skills, agent = _skills(request)
    name = _name(request)
    await _empty_body(request)
    return json_response(views.summary_json(await skills.restore(agent, name)))


def setup(app: web.Application) -> None:
    """Register the skills routes."""
    app.router.add_get("/api/skills/{agent}", skills_list)
    app.router.add_get("/api/skills/{agent}/{name}", skill_show)
    app.router.add_delete("/api/skills/{agent}/{name}", skill_remove)
    app.router.add_post("/api/skills/{agent}/{name}/approve", skill_approve)
    app.router.add_post("/api/skills/{agent}/{name}/restore", skill_restore)
