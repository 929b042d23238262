"""Semantic search over one agent's memory.db: embedding notes and the hybrid ranking.

`embed_pending` embeds the notes whose `text_hash` has no vector for the configured
model (a changed note has a new hash; an unchanged one is never sent again) and stores
the vectors. `schedule` runs that in the background after a write, coalescing writes
that come while a pass runs, so a tool's result never waits for the embedding server.
`search` fuses the FTS ranking (three times deeper than the limit) with the nearest
vectors; while embedding is paused, or when the query cannot be embedded, it returns
the FTS results alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable, Mapping

from habakkuk.engine.store import SqliteDatabase, transaction

from .embeddings import Embedder, Vector
from .index import embedded_text, summary
from .memory_types import MemoryHit, NoteSummary
from .vectors import (
    FTS_DEPTH,
    VectorCache,
    hybrid_hits,
    nearest,
    store_vectors,
)

log = logging.getLogger(__name__)

FtsSearch = Callable[[int], Awaitable[list[MemoryHit]]]


class SemanticIndex:
    """The vectors of one agent's notes for one embedding model."""

    def __init__(self, db: SqliteDatabase, embedder: Embedder):
        self.db = db
        self.embedder = embedder
        self._cache = VectorCache()
        self._task: asyncio.Task[None] | None = None
        self._again = False

    # -- embedding ---------------------------------------------------------------------

    async def embed_pending(self) -> int:
        """Embed every note without a vector for this model; how many were stored
        (0 when embedding is paused or fails: the next pass tries again)."""
        if self.embedder.paused:
            return 0
        model = self.embedder.model
        pending = await self.db.run(lambda conn: _pending(conn, model))
        if not pending:
            return 0
        hashes = list(pending)
        vectors = await self.embedder.embed([pending[h] for h in hashes])
        if vectors is None:
            return 0
        found: dict[str, Vector] = dict(zip(hashes, vectors, strict=True))

        def _store(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                return store_vectors(conn, model, found)

        return await self.db.run(_store)

    def schedule(self) -> None:
        """Embed pending notes soon, in the background (after a write)."""
        if self._task is not None and not self._task.done():
            self._again = True  # the running pass looks again when it ends
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="memory-embed")

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                await self.embed_pending()
            except Exception:
                log.exception("memory embeddings: a background pass failed")
            if not self._again:
                return

    async def settle(self) -> None:
        """Wait for the background pass (if any) to finish."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Stop the background pass and close the embedder's clients."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.embedder.aclose()

    # -- searching ---------------------------------------------------------------------

    async def search(
        self, query: str, tags: tuple[str, ...], limit: int, fts: FtsSearch
    ) -> list[MemoryHit]:
        """The hybrid ranking, or `fts(limit)` alone when semantic ranking is not possible
        (no words in the query, embedding paused, the query's embedding failed)."""
        if limit <= 0:
            return []
        if not re.search(r"\w", query) or self.embedder.paused:
            return await fts(limit)
        deep = await fts(limit * FTS_DEPTH)
        embedded = await self.embedder.embed([query], query=True)
        if not embedded:
            return deep[:limit]
        vector = embedded[0]
        model = self.embedder.model
        wanted = tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip()))

        def _rank(conn: sqlite3.Connection) -> list[MemoryHit]:
            # What the matrix is built from: the notes (count, newest id), the model's
            # vectors (count) and other processes' commits (data_version). Not the
            # connection's change count: marking a note read would reload every vector.
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            notes = tuple(conn.execute("SELECT count(*), max(id) FROM notes").fetchone())
            stored = conn.execute(
                "SELECT count(*) FROM embeddings WHERE model = ?", (model,)
            ).fetchone()[0]
            key = (model, version, notes, stored)
            vectors = self._cache.get(key, lambda: _vector_rows(conn, model))
            allowed = _tagged(conn, wanted) if wanted else None
            semantic = nearest(vector, vectors, limit=limit * FTS_DEPTH, allowed=allowed)
            return hybrid_hits(deep, semantic, lambda slugs: _describe(conn, slugs), limit=limit)

        return await self.db.run(_rank)


def _pending(conn: sqlite3.Connection, model: str) -> dict[str, str]:
    """text_hash -> embedded text, for notes with no vector for `model`."""
    rows = conn.execute(
        "SELECT n.title, n.tags, n.text_hash, f.body FROM notes n"
        " JOIN notes_fts f ON f.rowid = n.id"
        " WHERE NOT EXISTS (SELECT 1 FROM embeddings e"
        "  WHERE e.model = ? AND e.hash = n.text_hash)"
        " ORDER BY n.updated DESC",
        (model,),
    ).fetchall()
    out: dict[str, str] = {}
    for row in rows:
        tags = tuple(json.loads(row["tags"]))
        out.setdefault(row["text_hash"], embedded_text(row["title"], tags, str(row["body"])))
    return out


def _vector_rows(conn: sqlite3.Connection, model: str) -> list[tuple[str, bytes]]:
    return [
        (row[0], row[1])
        for row in conn.execute(
            "SELECT n.slug, e.vector FROM notes n"
            " JOIN embeddings e ON e.model = ? AND e.hash = n.text_hash",
            (model,),
        )
    ]


def _tagged(conn: sqlite3.Connection, tags: tuple[str, ...]) -> set[str]:
    marks = ", ".join("?" for _ in tags)
    rows = conn.execute(
        "SELECT n.slug FROM notes n WHERE n.id IN (SELECT note_id FROM note_tags"
        f" WHERE tag IN ({marks}) GROUP BY note_id HAVING count(*) = ?)",
        (*tags, len(tags)),
    )
    return {row[0] for row in rows}


def _describe(conn: sqlite3.Connection, slugs: list[str]) -> Mapping[str, tuple[NoteSummary, str]]:
    if not slugs:
        return {}
    marks = ", ".join("?" for _ in slugs)
    rows = conn.execute(
        # The body's start is all a snippet shows (a note may be 128 KB).
        "SELECT n.*, substr(f.body, 1, 4096) AS body FROM notes n"
        f" JOIN notes_fts f ON f.rowid = n.id WHERE n.slug IN ({marks})",
        slugs,
    ).fetchall()
    return {row["slug"]: (summary(row), str(row["body"])) for row in rows}
