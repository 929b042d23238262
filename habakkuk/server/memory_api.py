"""The memory's JSON API (spec 001 "Memory" and "Memory history"), plus its proposals.

Every handler is a thin adapter over the host's `memory` (MemoryAccess): it checks the
agent (unknown: 404), reads and type-checks the input, calls one method and answers
with the shapes of habakkuk.knowledge.memory_views, which `habakkuk memory --json`
prints too. Writes here are the user's (provenance "user"). The service's errors become
JSON errors in the conventions middleware: NotFound 404, anything else it refused
(a secret, a bad slug or `since`) 400 with its one-line reason.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from habakkuk.knowledge import memory_views as views
from habakkuk.knowledge.memory_types import MemoryAccess, Provenance

from .errors import ApiError
from .inputs import query_int, read_json
from .served import field, json_response, only_fields, server_of

BODY_LIMIT = 1024 * 1024  # a note is a page of Markdown, not a file upload
QUERY_CHARS = 1000
USER = Provenance(by="user", tool="api")


def _memory(request: web.Request) -> tuple[MemoryAccess, str]:
    """The host's memory and the path's agent (ConfigError, so 404, when unknown)."""
    runtime = server_of(request).runtime
    memory: MemoryAccess | None = getattr(runtime, "memory", None)
    if memory is None:
        raise ApiError(501, "this process has no memory")
    agent = runtime.config.agent(request.match_info["agent"]).name
    return memory, agent


def _query_text(request: web.Request, name: str) -> str:
    text = request.query.get(name, "")
    if len(text) > QUERY_CHARS:
        raise ApiError(400, f"{name} is longer than {QUERY_CHARS} characters")
    if any(c < " " and c not in "\t" for c in text):
        raise ApiError(400, f"{name} contains control characters")
    return text.strip()


def _tags_field(body: dict[str, Any]) -> list[str] | None:
    """`tags`: a list of strings, or omitted (None: keep the note's tags)."""
    tags = field(body, "tags", list)
    if tags is None:
        return None
    if not all(isinstance(t, str) for t in tags):
        raise ApiError(400, "tags must be a list of strings")
    return list(views.parse_tags(tags))


async def _note_body(request: web.Request) -> tuple[str, str, list[str] | None]:
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"title", "content", "tags"})
    title = field(body, "title", str, required=True)
    content = field(body, "content", str, required=True)
    if not title.strip():
        raise ApiError(400, "title must not be empty")
    return title, content, _tags_field(body)


# -- notes -------------------------------------------------------------------------------------


async def memory_list(request: web.Request) -> web.Response:
    """GET /api/memory/{agent}?q=&tags=a,b&limit=&offset=: the notes or ranked matches."""
    memory, agent = _memory(request)
    query = _query_text(request, "q")
    tags = views.parse_tags(_query_text(request, "tags"))
    limit = query_int(request, "limit", 50, 1, 500)
    if query or tags:
        hits = await memory.search(agent, query, tags=tags, limit=limit)
        return json_response(views.hits_json(hits))
    offset = query_int(request, "offset", 0, 0, 10_000_000)
    notes, total = await memory.list_notes(agent, limit=limit, offset=offset)
    return json_response(views.notes_json(notes, total))


async def memory_read(request: web.Request) -> web.Response:
    """GET /api/memory/{agent}/{slug}: one note with its body."""
    memory, agent = _memory(request)
    return json_response(views.note_json(await memory.read(agent, request.match_info["slug"])))


async def memory_create(request: web.Request) -> web.Response:
    """POST /api/memory/{agent} {"title", "content", "tags"?}: 201 created, 200 replaced."""
    memory, agent = _memory(request)
    title, content, tags = await _note_body(request)
    saved = await memory.save(agent, title, content, tags=tags, provenance=USER)
    return json_response(views.note_json(saved.note), status=201 if saved.created else 200)


async def memory_replace(request: web.Request) -> web.Response:
    """PUT /api/memory/{agent}/{slug} {"title", "content", "tags"?}: a new title, a new slug."""
    memory, agent = _memory(request)
    title, content, tags = await _note_body(request)
    slug = request.match_info["slug"]
    saved = await memory.replace(agent, slug, title, content, tags=tags, provenance=USER)
    return json_response(views.note_json(saved.note))


async def memory_delete(request: web.Request) -> web.Response:
    """DELETE /api/memory/{agent}/{slug}: the note moves to memory/.trash/ (204)."""
    memory, agent = _memory(request)
    await memory.forget(agent, request.match_info["slug"], provenance=USER)
    return web.Response(status=204)


async def memory_trust(request: web.Request) -> web.Response:
    """POST /api/memory/{agent}/{slug}/trust {}: the user vouches for the note."""
    memory, agent = _memory(request)
    only_fields(await read_json(request, limit=BODY_LIMIT), set())
    note = await memory.trust(agent, request.match_info["slug"], provenance=USER)
    return json_response(views.note_json(note))


# -- history -----------------------------------------------------------------------------------


async def history_list(request: web.Request) -> web.Response:
    """GET /api/memory-history/{agent}?file=&kind=&since=&limit=: changes and pins."""
    memory, agent = _memory(request)
    name = _query_text(request, "file") or None
    kind = views.change_kind(_query_text(request, "kind"))  # unknown: HabakkukError, 400
    since = _query_text(request, "since") or None
    limit = query_int(request, "limit", 50, 1, 1000)
    changes = await memory.history(
        agent,
        name=name,
        kind=kind,
        since=since,
        limit=limit,
    )
    return json_response(views.history_json(changes, await views.pins(memory, agent)))


async def history_one(request: web.Request) -> web.Response:
    """GET /api/memory-history/{agent}/{id}: one change with its unified diff."""
    memory, agent = _memory(request)
    detail = await memory.change(agent, request.match_info["id"])
    return json_response(views.change_detail_json(detail))


async def history_restore(request: web.Request) -> web.Response:
    """POST /api/memory-history/{agent}/{id}/restore {"version"?}: undo (before) or redo."""
    memory, agent = _memory(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"version"})
    version = field(body, "version", str, default="before")
    if version not in ("before", "after"):
        raise ApiError(400, 'version must be "before" or "after"')
    result = await memory.restore(agent, request.match_info["id"], version=version, provenance=USER)
    return json_response(views.restore_json(result))


# -- proposals ---------------------------------------------------------------------------------


async def proposals_list(request: web.Request) -> web.Response:
    """GET /api/memory-proposals/{agent}: what the review proposed, oldest first."""
    memory, agent = _memory(request)
    return json_response(views.proposals_json(await memory.proposals(agent)))


async def proposal_resolve(request: web.Request) -> web.Response:
    """POST /api/memory-proposals/{agent}/{id} {"apply": bool}: apply or dismiss."""
    memory, agent = _memory(request)
    body = await read_json(request, limit=BODY_LIMIT)
    only_fields(body, {"apply"})
    apply = field(body, "apply", bool, required=True)
    proposal = await memory.resolve_proposal(
        agent, request.match_info["id"], apply=apply, provenance=USER
    )
    return json_response({"proposal": views.proposal_json(proposal), "applied": apply})


def setup(app: web.Application) -> None:
    """Register the memory routes."""
    app.router.add_get("/api/memory/{agent}", memory_list)
    app.router.add_post("/api/memory/{agent}", memory_create)
    app.router.add_get("/api/memory/{agent}/{slug}", memory_read)
    app.router.add_put("/api/memory/{agent}/{slug}", memory_replace)
    app.router.add_delete("/api/memory/{agent}/{slug}", memory_delete)
    app.router.add_post("/api/memory/{agent}/{slug}/trust", memory_trust)
    app.router.add_get("/api/memory-history/{agent}", history_list)
    app.router.add_get("/api/memory-history/{agent}/{id}", history_one)
    app.router.add_post("/api/memory-history/{agent}/{id}/restore", history_restore)
    app.router.add_get("/api/memory-proposals/{agent}", proposals_list)
    app.router.add_post("/api/memory-proposals/{agent}/{id}", proposal_resolve)
