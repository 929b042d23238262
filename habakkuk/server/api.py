"""The JSON API of spec 001 for the subsystems that exist: app, overview, sessions,
usage, approvals and config. Later subsystems add their own modules.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from aiohttp import web

from habakkuk.channels.adapter import Address
from habakkuk.channels.health import health_json
from habakkuk.conversation.answers import answered_from
from habakkuk.engine.agent.requests import session_of
from habakkuk.engine.audit_findings import Finding, severity_counts
from habakkuk.engine.errors import NotFound
from habakkuk.engine.export import rfc3339, session_json, transcript_json
from habakkuk.engine.i18n import use_language
from habakkuk.engine.nodes import Node
from habakkuk.engine.secret_shapes import (
    KEY_SHAPES,
    SECRET_NAME,
    SECRET_QUERY,
    URL_PASSWORD,
    named_variables,
    plain,
)
from habakkuk.engine.toolkit.approvals import Answer

from .errors import ApiError
from .health import queue_summary
from .inputs import query_flag, query_int, read_json
from .served import field, json_response, only_fields, server_of

REDACTED = "[redacted]"
VARIABLE = re.compile(r"\$?\{?[A-Za-z_][A-Za-z0-9_]*\}?")


async def app_info(request: web.Request) -> web.Response:
    """GET /api/app: what the dashboard needs to start."""
    server = server_of(request)
    config = server.runtime.config
    return json_response(
        {
            "account": server.config.account,
            "agents": sorted(config.agents),
            "default": config.default_agent,
            "transcription": config.transcription is not None,
            "speech": config.tts is not None,
            "realtime": config.realtime is not None,
            "nodes": config.nodes is not None,  # device nodes: the dashboard's Nodes view
            "timezone": config.timezone,
            # The page offers "Sign out" only when there is a token to forget.
            "token_required": server.token is not None,
        }
    )


async def _job_json(runtime: Any, job: Any) -> dict[str, Any]:
    session = session_of(job)
    agent = ""
    if session:
        with contextlib.suppress(NotFound):
            agent = (await runtime.sessions.session(session)).agent
    body = {
        "id": job.id,
        "kind": job.kind,
        "agent": agent,
        "session": session,
        "status": job.status,
        "attempts": job.attempts,
        "created_at": rfc3339(job.created_at),
        "updated_at": rfc3339(job.updated_at),
    }
    if job.error:
        body["error"] = job.error
    return body


async def overview(request: web.Request) -> web.Response:
    """GET /api/overview: channels, queue, running jobs, recent errors, approvals, nodes."""
    runtime = server_of(request).runtime
    # The same read as the terminal's overview screen, so both show the same.
    view = await runtime.control.overview()
    # One record per account, as `habakkuk channels --json` prints it (channels.health).
    channels = [health_json(health) for health in view.channels]
    return json_response(
        {
            "channels": channels,
            "queue": queue_summary(view.queue),
            "running": [await _job_json(runtime, j) for j in view.running],
            "errors": [await _job_json(runtime, j) for j in view.errors],
            "approvals": view.approvals,
            "open_cards": view.open_cards,
            "schedules": {"total": view.schedules[0], "enabled": view.schedules[1]},
            # parts a chat could not receive in the last 7 days (each told in its chat)
            "unsent": view.unsent,
            "nodes": [node_json(node) for node in view.nodes],
            # config.yaml's edits this process has not applied: the sections a restart
            # applies, and the file's error while it is invalid ("" when valid)
            "config": {
                "needs_restart": list(view.config.restart),
                "invalid": view.config.invalid,
            },
            "goals": [
                {
                    "id": goal.id,
                    "session": goal.session,
                    "text": goal.text,
                    "counted": goal.counted,
                    "budget": goal.budget,
                }
                for goal in view.goals
            ],
            # the security audit (services/audit.py): a count by severity and the list
            "audit": audit_json(view.findings),
        }
    )


def audit_json(findings: list[Finding]) -> dict[str, Any]:
    """The security audit's findings as /api/overview gives them."""
    return {
        "counts": severity_counts(findings),
        "findings": [
            {
                "severity": finding.severity,
                "check": finding.check,
                "subject": finding.subject,
                "problem": finding.problem,
                "fix": finding.fix,
            }
            for finding in findings
        ],
    }


def node_json(node: Node) -> dict[str, Any]:
    """One process serving the home, as /api/overview lists it."""
    return {
        "id": node.id,
        "host": node.host,
        "pid": node.pid,
        "agents": list(node.agents),  # ["*"]: every agent
        "version": node.version,
        "started_at": rfc3339(node.started_at),
        "last_heartbeat": rfc3339(node.beat),
        "clock_skew_seconds": round(node.skew, 3),
        "leases": list(node.leases),
        "stale": node.stale,
        "here": node.here,
    }


def clean_text(text: str) -> str:
    """Text without control characters or lone surrogates (which SQLite and FTS refuse)."""
    return "".join(c for c in text if (c >= " " or c in "\n\t") and not "\ud800" <= c <= "\udfff")


# -- sessions --------------------------------------------------------------------------------


async def sessions(request: web.Request) -> web.Response:
    """GET /api/sessions?agent=&limit=50&q=&all=: recent sessions, or search hits.

    The list is the user's sessions; `all=1` adds those of board cards and sub-agents."""
    runtime = server_of(request).runtime
    agent = request.query.get("agent") or None
    limit = query_int(request, "limit", 50, 1, 500)
    include_work = query_flag(request, "all")
    query = clean_text(request.query.get("q", "")).strip()
    if query:
        hits = await runtime.sessions.search_sessions(query, agent, limit=limit)
        return json_response(
            {
                "hits": [
                    {
                        "session": h.session,
                        "agent": h.agent,
                        "title": h.title,
                        "seq": h.seq,
                        "role": h.role,
                        "at": rfc3339(h.at),
                        "snippet": h.snippet,
                    }
                    for h in hits
                ]
            }
        )
    found = await runtime.sessions.list_sessions(agent, limit=limit, include_work=include_work)
    return json_response({"sessions": [session_json(s) for s in found]})


async def session_one(request: web.Request) -> web.Response:
    """GET /api/sessions/{id}: the session and its messages."""
    runtime = server_of(request).runtime
    session = await runtime.sessions.session(request.match_info["id"])
    messages = await runtime.sessions.messages(session.id)
    compaction = await runtime.sessions.compaction(session.id)
    return json_response(transcript_json(session, messages, compaction))


async def session_export(request: web.Request) -> web.Response:
    """GET /api/sessions/{id}/export: the transcript as a Markdown attachment."""
    runtime = server_of(request).runtime
    session_id = request.match_info["id"]
    text = await runtime.sessions.export_session(session_id, "md")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)
    return web.Response(
        text=text,
        content_type="text/markdown",
        charset="utf-8",
        headers={"Content-Disposition": f'attachment; filename="{safe}.md"'},
    )


# -- usage -------------------------------------------------------------------------------------


USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _usage_row(key: str) -> dict[str, Any]:
    row: dict[str, Any] = {"key": key, "calls": 0}
    row.update(dict.fromkeys(USAGE_FIELDS, 0))
    row.update(cost=0.0, unpriced=0)
    return row


def _add(row: dict[str, Any], total: Any, sign: int = 1) -> None:
    row["calls"] += sign * total.calls
    for name in USAGE_FIELDS:
        row[name] += sign * getattr(total, name)
    row["cost"] += sign * total.cost
    row["unpriced"] += sign * total.unpriced_calls


def _sum(key: str, totals: list[Any]) -> dict[str, Any]:
    row = _usage_row(key)
    for total in totals:
        _add(row, total)
    return row


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "cost": round(row["cost"], 6)}


async def usage(request: web.Request) -> web.Response:
    """GET /api/usage?days=30&agent=: tokens and cost per day, model and agent."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    runtime = server_of(request).runtime
    if getattr(runtime, "usage", None) is None:
        raise ApiError(501, "this process does not record usage")
    days = query_int(request, "days", 30, 1, 400)
    agent = request.query.get("agent") or None
    if agent is not None:
        runtime.config.agent(agent)  # unknown -> 404
    zone = ZoneInfo(runtime.config.timezone)
    today = datetime.now(zone).date()
    first = today - timedelta(days=days - 1)
    starts = [
        datetime.combine(first + timedelta(days=n), datetime.min.time(), zone).timestamp()
        for n in range(days)
    ]
    # One query per day boundary: a day's usage is "since its start" minus "since the next".
    since = [await runtime.ledger.usage_since(start, agent=agent) for start in starts]
    day_rows = []
    for n in range(days):
        row = _sum((first + timedelta(days=n)).isoformat(), since[n])
        if n + 1 < days:
            for total in since[n + 1]:
                _add(row, total, -1)
        day_rows.append(_rounded(row))
    by_model: dict[str, dict[str, Any]] = {}
    by_agent: dict[str, dict[str, Any]] = {}
    for total in since[0]:
        _add(by_model.setdefault(total.model, _usage_row(total.model)), total)
        _add(by_agent.setdefault(total.agent, _usage_row(total.agent)), total)
    return json_response(
        {
            "since": first.isoformat(),
            "timezone": runtime.config.timezone,
            "total": _rounded(_sum("total", since[0])),
            "days": day_rows,
            "by_model": [_rounded(r) for r in sorted(by_model.values(), key=lambda r: -r["cost"])],
            "by_agent": [_rounded(r) for r in sorted(by_agent.values(), key=lambda r: -r["cost"])],
        }
    )


# -- approvals --------------------------------------------------------------------------------


async def approvals(request: web.Request) -> web.Response:
    """GET /api/approvals: calls waiting for a yes or no in any process, oldest first."""
    server = server_of(request)
    store = server.web_store()
    items = []
    for waiting in await server.runtime.approvals.waiting():
        to = _chat_address(waiting.where)
        if to is None:
            conversations = await store.conversations_of(waiting.session)
            if conversations:
                to = {
                    "account": server.config.account,
                    "conversation": conversations[0],
                    "thread": "",
                }
        items.append(
            {
                "id": waiting.id,
                "to": to,
                "agent": waiting.agent,
                "session": waiting.session,
                "turn": waiting.turn,
                "tool": waiting.tool,
                "summary": waiting.summary,
                "review": waiting.reason,
                "since": rfc3339(waiting.since),
            }
        )
    return json_response({"approvals": items})


def _chat_address(where: str) -> dict[str, str] | None:
    """A chat approval's origin `ACCOUNT:CHAT[:THREAD]` as a "to" object (None otherwise)."""
    try:
        address = Address.parse(where)
    except ValueError:
        return None
    return {"account": address.channel, "conversation": address.chat, "thread": address.thread}


async def approval_answer(request: web.Request) -> web.Response:
    """POST /api/approvals/{id} {"approve": bool, "for_session"?: bool}: answer as the
    chat would, in any process; `for_session` allows the tool for the rest of the session
    (as the terminal's `a` and a typed "always" do)."""
    server = server_of(request)
    body = await read_json(request)
    only_fields(body, {"approve", "for_session"})
    approve = field(body, "approve", bool, required=True)
    for_session = bool(field(body, "for_session", bool))
    if for_session and not approve:
        raise ApiError(400, "for_session goes with approve: true")
    answer: Answer = ("allow_session" if for_session else "allow_once") if approve else "deny"
    approval_id = request.match_info["id"]
    runtime = server.runtime
    waiting = {a.id: a for a in await runtime.approvals.waiting()}.get(approval_id)
    answered = waiting is not None and await runtime.approvals.respond(
        approval_id, answer, by="dashboard"
    )
    if not answered or waiting is None:
        raise ApiError(404, f"approval {approval_id!r} is not waiting")
    # A chat approval's chat hears of it from the runtime; web conversations here.
    with use_language(runtime.config.language_of(server.config.account)):
        note = answered_from(answer, "dashboard")
    store = server.web_store()
    for conversation in await store.conversations_of(waiting.session):
        await store.append(conversation, "notice", note, session=waiting.session)
    return json_response({"id": approval_id, "approved": approve})


# -- config ---------------------------------------------------------------------------------------


def redact(data: Any, secrets: list[str], key: str = "", parent: str = "") -> Any:
    """Secrets out of config data: variable values, secret-named fields, URL credentials."""
    if isinstance(data, dict):
        return {k: redact(v, secrets, str(k), key) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v, secrets, key, parent) for v in data]
    if not isinstance(data, str):
        return data
    if parent in ("env", "headers") and VARIABLE.fullmatch(data):
        # An MCP env or header map names the variable holding the value: the name stays
        # visible (as key_env's does) even under a secret-looking key like GITHUB_TOKEN.
        return data
    if data and SECRET_NAME.search(key) and not key.endswith("_env"):
        return REDACTED
    if parent == "headers":
        return REDACTED
    text = data
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    text = URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    text = SECRET_QUERY.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    for shape in KEY_SHAPES:
        text = shape.sub(REDACTED, text)
    return text


def redacted_config(runtime: Any) -> dict[str, Any]:
    """The effective config with every secret replaced."""
    data = plain(runtime.config)
    data.pop("path", None)
    values = [runtime.env.get(name) for name in named_variables(data)]
    # Longest first, so a secret containing another is replaced whole.
    secrets = sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True)
    redacted: dict[str, Any] = redact(data, secrets)
    return redacted


async def config_view(request: web.Request) -> web.Response:
    """GET /api/config: effective config (redacted) and the doctor's checks."""
    runtime = server_of(request).runtime
    checks = await runtime.control.doctor(runtime.home)
    secrets_data = redacted_config(runtime)
    values = [runtime.env.get(n) for n in named_variables(plain(runtime.config))]
    secrets = sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True)
    doctor = [
        redact({"name": c.name, "ok": c.status != "FAIL", "detail": c.detail}, secrets)
        for c in checks
    ]
    return json_response({"home": str(runtime.home.root), "config": secrets_data, "doctor": doctor})


def setup(app: web.Application) -> None:
    """Register the /api/ routes of this module."""
    app.router.add_get("/api/app", app_info)
    app.router.add_get("/api/overview", overview)
    app.router.add_get("/api/sessions", sessions)
    app.router.add_get("/api/sessions/{id}", session_one)
    app.router.add_get("/api/sessions/{id}/export", session_export)
    app.router.add_get("/api/usage", usage)
    app.router.add_get("/api/approvals", approvals)
    app.router.add_post("/api/approvals/{id}", approval_answer)
    app.router.add_get("/api/config", config_view)
