"""Shared pieces of the review tests: a small in-memory MemoryAccess and the review tables.

The fake keeps the service's contract where the review depends on it: saves replace by
title and answer `unchanged` for the same text, a secret-looking text raises
SecretRefused, a tainted profile change raises TaintRefused, and a forget by the review
becomes a proposal (the service's guard). Each agent's notes are separate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from habakkuk.engine.errors import NotFound
from habakkuk.engine.store import Migration, SqliteDatabase
from habakkuk.knowledge.memory_types import (
    MemoryHit,
    Note,
    NoteSummary,
    Provenance,
    SaveResult,
    SecretRefused,
    TaintRefused,
)

# The exact schema of memory.db's review tables (the service's migration creates them).
REVIEW_TABLES = [
    Migration(
        1,
        """
        CREATE TABLE reviews(session TEXT PRIMARY KEY, position INTEGER NOT NULL,
            at TEXT NOT NULL);
        CREATE TABLE review_runs(id TEXT PRIMARY KEY, kind TEXT NOT NULL,
            session TEXT NOT NULL DEFAULT '', plan TEXT NOT NULL,
            applied INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0, created TEXT NOT NULL, finished TEXT);
        """,
    )
]

_SECRET = re.compile(r"sk-[A-Za-z0-9]{20,}")


def slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


@dataclass
class FakeMemory:
    """Notes per agent in dicts; every write is recorded in `writes` as (agent, op, name)."""

    notes: dict[str, dict[str, Note]] = field(default_factory=dict)
    profiles: dict[str, str] = field(default_factory=dict)
    proposals_made: list[tuple[str, str]] = field(default_factory=list)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    fail_after_saves: int | None = None  # raise after this many saves (a crash mid-plan)

    async def list_notes(
        self, agent: str, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[NoteSummary], int]:
        items = sorted(self.notes.get(agent, {}).values(), key=lambda n: n.updated, reverse=True)
        return list(items[offset : offset + limit]), len(items)

    async def search(
        self, agent: str, query: str, *, tags: tuple[str, ...] = (), limit: int = 10
    ) -> list[MemoryHit]:
        words = set(query.lower().split())
        hits = [
            MemoryHit(n, n.body[:40], 1.0)
            for n in self.notes.get(agent, {}).values()
            if words & set(n.title.lower().split())
        ]
        return hits[:limit]

    async def read(self, agent: str, slug: str, *, mark_read: bool = True) -> Note:
        try:
            return self.notes[agent][slug]
        except KeyError:
            raise NotFound(f"no note {slug!r}") from None

    async def save(
        self,
        agent: str,
        title: str,
        content: str,
        *,
        tags: list[str] | None = None,
        provenance: Provenance,
        replace: bool = True,
    ) -> SaveResult:
        if _SECRET.search(content):
            raise SecretRefused("content: an OpenAI key")
        if self.fail_after_saves is not None and self.fail_after_saves <= 0:
            raise RuntimeError("crashed")
        slug = slugify(title)
        old = self.notes.setdefault(agent, {}).get(slug)
        if old is not None and old.body == content:
            return SaveResult(old, created=False, unchanged=True)
        note = Note(
            slug=slug,
            title=title,
            tags=tuple(tags or (old.tags if old else ())),
            created="2026-11-01T00:00:00Z",
            updated=f"2026-11-02T00:00:{len(self.writes):02d}Z",
            source=provenance.by,
            session=provenance.session,
            trust="untrusted" if provenance.tainted else "trusted",
            body=content,
        )
        self.notes[agent][slug] = note
        self.writes.append((agent, "save", slug))
        if self.fail_after_saves is not None:
            self.fail_after_saves -= 1
        return SaveResult(note, created=old is None)

    async def forget(self, agent: str, slug: str, *, provenance: Provenance) -> NoteSummary:
        note = await self.read(agent, slug)
        if provenance.by == "review":
            self.proposals_made.append((agent, slug))
            return note
        del self.notes[agent][slug]
        self.writes.append((agent, "forget", slug))
        return note

    async def profile(self, agent: str) -> str:
        return self.profiles.get(agent, "")

    async def update_profile(
        self,
        agent: str,
        section: str,
        content: str,
        *,
        mode: str = "append",
        provenance: Provenance,
    ) -> str:
        if provenance.tainted:
            raise TaintRefused("a tainted turn cannot change USER.md")
        text = self.profiles.get(agent, "") + f"## {section}\n{content}\n"
        self.profiles[agent] = text
        self.writes.append((agent, "profile", section))
        return text

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


async def review_tables(path: Path) -> SqliteDatabase:
    return await SqliteDatabase.open(path, REVIEW_TABLES)
