"""The memory as every surface shows it: JSON shapes and the few rules the surfaces share.

The HTTP API (spec 001 "Memory", "Memory history") and `habakkuk memory ... --json`
print the same shapes, so both call these functions; the chat's /remember and /forget,
the CLI and the API parse tags and pick the note to forget with the same rules.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, cast, get_args

from habakkuk.engine.errors import HabakkukError, NotFound

from .memory_types import (
    Change,
    ChangeDetail,
    ChangeKind,
    MemoryAccess,
    MemoryHit,
    Note,
    NoteSummary,
    Proposal,
    ReindexStats,
    RestoreResult,
)
from .notes import READ_MAX_BYTES, size_text

# Notes carrying one of these tags are never archived by the nightly pass (spec 000):
# the history lists them as its "pins".
PIN_TAGS = ("pinned", "keep")
CHANGE_KINDS: tuple[str, ...] = get_args(ChangeKind)  # note, profile, identity, skill
# How the list marks a note over the size a note is read up to, and what it says of it.
PARTIAL_MARK = f"(partial: first {size_text(READ_MAX_BYTES)})"
PARTIAL_WORDS = (
    f"this note is over {size_text(READ_MAX_BYTES)}: only its beginning is indexed and shown, "
    "and Habakkuk does not rewrite it; split it into smaller notes"
)
TITLE_WORDS = 8
TITLE_CHARS = 60
_MAX_TAGS = 32
_PIN_SCAN = 500


# -- JSON shapes -----------------------------------------------------------------------------


def note_json(note: NoteSummary, *, snippet: str = "") -> dict[str, Any]:
    """A note as the API shows it: {"slug", "title", "tags", "created_at", "updated_at",
    "source", "session", "trust", "partial", "snippet"} and, for a read note, "body".
    "partial" is true for a file over the size a note is read up to: only its beginning
    is indexed, and "body" is that beginning."""
    body: dict[str, Any] = {
        "slug": note.slug,
        "title": note.title,
        "tags": list(note.tags),
        "created_at": note.created,
        "updated_at": note.updated,
        "source": note.source,
        "session": note.session,
        "trust": note.trust,
        "partial": note.partial,
        "snippet": snippet,
    }
    if isinstance(note, Note):
        body["body"] = note.body
    return body


def hit_json(hit: MemoryHit) -> dict[str, Any]:
    """A search match: the note with its snippet and score."""
    return {**note_json(hit.note, snippet=hit.snippet), "score": hit.score}


def notes_json(notes: list[NoteSummary], total: int) -> dict[str, Any]:
    """GET /api/memory/{agent} without a query: {"memories": [...], "total": N}."""
    return {"memories": [note_json(n) for n in notes], "total": total}


def hits_json(hits: list[MemoryHit]) -> dict[str, Any]:
    """GET /api/memory/{agent}?q=: ranked matches, {"memories": [...], "total": N}."""
    return {"memories": [hit_json(h) for h in hits], "total": len(hits)}


def change_json(change: Change) -> dict[str, Any]:
    """A change (spec 001): {"id", "agent", "kind", "name", "path", "op", "old_hash",
    "new_hash", "by", "tool", "session", "tainted", "note", "restores", "at"}."""
    return dataclasses.asdict(change)


def change_detail_json(detail: ChangeDetail) -> dict[str, Any]:
    """One change with both versions and its unified diff."""
    return {
        **change_json(detail.change),
        "before": detail.before,
        "after": detail.after,
        "diff": detail.diff,
    }


def history_json(changes: list[Change], pins: list[dict[str, str]]) -> dict[str, Any]:
    """GET /api/memory-history/{agent}: {"changes": [...], "pins": [{"kind", "name"}]}."""
    return {"changes": [change_json(c) for c in changes], "pins": pins}


def restore_json(result: RestoreResult) -> dict[str, Any]:
    """A restore: {"restored": {change} | null, "unchanged": bool}."""
    restored = change_json(result.restored) if result.restored is not None else None
    return {"restored": restored, "unchanged": result.unchanged}


def proposal_json(proposal: Proposal) -> dict[str, Any]:
    """A proposal of the review or nightly pass the user applies or dismisses."""
    return dataclasses.asdict(proposal)


def proposals_json(proposals: list[Proposal]) -> dict[str, Any]:
    """The open proposals: {"proposals": [...]}, oldest first."""
    return {"proposals": [proposal_json(p) for p in proposals]}


def reindex_json(stats: ReindexStats) -> dict[str, Any]:
    """What a reindex did: {"scanned", "updated", "removed", "seconds"}."""
    return dataclasses.asdict(stats)


# -- shared rules ------------------------------------------------------------------------------


def parse_tags(given: str | Iterable[str]) -> tuple[str, ...]:
    """`a, b,c` (or a list of tags) as ("a", "b", "c"): trimmed, empties dropped,
    duplicates once, in order."""
    parts = given.split(",") if isinstance(given, str) else given
    tags: list[str] = []
    for part in parts:
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    if len(tags) > _MAX_TAGS:
        raise HabakkukError(f"tags: at most {_MAX_TAGS} tags, not {len(tags)}")
    return tuple(tags)


def title_from_text(text: str) -> str:
    """The title /remember gives a note: its first words (up to 8, or 60 characters)."""
    words = " ".join(text.split()).split(" ")
    title = ""
    for word in words[:TITLE_WORDS]:
        longer = f"{title} {word}".strip()
        if len(longer) > TITLE_CHARS:
            break
        title = longer
    # One very long first word: cut it rather than give the note no title.
    title = title or words[0][:TITLE_CHARS]
    return re.sub(r"[\s.,;:!?-]+$", "", title) or title


def change_kind(text: str | None) -> ChangeKind | None:
    """A history filter's kind (None: every kind); HabakkukError for an unknown one."""
    if not text:
        return None
    if text not in CHANGE_KINDS:
        raise HabakkukError(f"kind {text[:40]!r}: use one of {', '.join(CHANGE_KINDS)}")
    return cast(ChangeKind, text)


async def pins(memory: MemoryAccess, agent: str) -> list[dict[str, str]]:
    """What the history pins: the notes tagged pinned or keep, {"kind": "note", "name"}."""
    found: dict[str, None] = {}
    for tag in PIN_TAGS:
        for hit in await memory.search(agent, "", tags=(tag,), limit=_PIN_SCAN):
            found.setdefault(hit.note.slug, None)
    return [{"kind": "note", "name": slug} for slug in sorted(found)]


async def note_to_forget(
    memory: MemoryAccess, agent: str, query: str
) -> NoteSummary | list[MemoryHit]:
    """The note `query` names for /forget: the note with that slug, else the one whose
    title is exactly the query, else the single note a search finds; otherwise the
    matches (none or several), for the user to repeat with a slug."""
    query = query.strip()
    if not query:
        raise HabakkukError("say which note: a slug, a title or words from it")
    try:
        return await memory.read(agent, query)
    except NotFound:
        pass
    except HabakkukError:
        pass  # not a valid slug (spaces, slashes): it is words to search for
    hits = await memory.search(agent, query, limit=10)
    wanted = query.casefold()
    exact = [h for h in hits if h.note.title.casefold() == wanted]
    if len(exact) == 1:
        return exact[0].note
    if len(hits) == 1:
        return hits[0].note
    return hits
