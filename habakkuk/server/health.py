"""GET /healthz: no token, and nothing but channel states and queue depth."""

from __future__ import annotations

from aiohttp import web

from .app import json_response, server_of


def queue_summary(depth: dict[tuple[str, str], int]) -> dict[str, int]:
    """{"pending", "running"} totals from depth by (kind, status)."""
    pending = sum(n for (_, status), n in depth.items() if status == "queued")
    running = sum(n for (_, status), n in depth.items() if status == "running")
    return {"pending": pending, "running": running}


async def healthz(request: web.Request) -> web.Response:
    """{"status": "ok", "channels": [...], "queue": {"pending", "running"}}."""
    runtime = server_of(request).runtime
    depth = await runtime.queue_depth()
    # No channel adapters run in this process yet, so there are no states to report.
    return json_response({"status": "ok", "channels": [], "queue": queue_summary(depth)})


def setup(app: web.Application) -> None:
    """Register /healthz."""
    app.router.add_get("/healthz", healthz)
