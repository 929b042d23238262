"""GET /api/budget?agent=: spend today and this month against the spending limits
(spec 001 "Budget"), read from the runtime's budget service (services/budget.py)."""

from __future__ import annotations

from aiohttp import web

from .served import json_response, server_of


async def budget(request: web.Request) -> web.Response:
    """GET /api/budget?agent=: the install's and each agent's spend against the limits;
    `agent` keeps that one (an unknown agent is a 404)."""
    runtime = server_of(request).runtime
    agent = request.query.get("agent") or None
    if agent is not None:
        agent = runtime.config.agent(agent).name  # unknown -> 404
    status = await runtime.budget.status(agent)
    return json_response(status.to_json())


def setup(app: web.Application) -> None:
    """Register the budget route."""
    app.router.add_get("/api/budget", budget)
