"""Memory: hybrid search (FTS + vectors, fused) over N notes: p50/p95 (target p95 <= 20 ms).

Notes carry random unit vectors (no embedding server: the query's vector is computed
beforehand), so this measures what a search costs Habakkuk itself: the deep FTS query,
the cosine over every vector, the fusion and the snippets.

Usage: python benchmarks/memory_hybrid_bench.py [N] [--dims D] [--searches S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from habakkuk.engine.config import ProviderConfig
from habakkuk.engine.store import Database, Migration, transaction
from habakkuk.knowledge.embeddings import Embedder, Vector
from habakkuk.knowledge.memory_types import MemoryHit, NoteSummary
from habakkuk.knowledge.semantic import SemanticIndex
from habakkuk.knowledge.vectors import EMBEDDINGS_SCHEMA, embedding_text, text_hash, to_blob

# The columns of memory.db's index that a search reads (knowledge/index.py has them all).
SCHEMA = [
    Migration(
        1,
        """
        CREATE TABLE notes(
            id INTEGER PRIMARY KEY, slug TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
            tags TEXT NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT '', session TEXT NOT NULL DEFAULT '',
            trust TEXT NOT NULL DEFAULT 'trusted', text_hash TEXT NOT NULL
        );
        CREATE TABLE note_tags(note_id INTEGER NOT NULL, tag TEXT NOT NULL);
        CREATE VIRTUAL TABLE notes_fts USING fts5(title, tags, body,
            tokenize = 'porter unicode61');
        """
        + EMBEDDINGS_SCHEMA,
    )
]

WORDS = [
    "coffee",
    "tea",
    "milk",
    "sugar",
    "train",
    "bus",
    "ticket",
    "meeting",
    "project",
    "deadline",
    "garden",
    "rose",
    "tulip",
    "python",
    "rust",
    "server",
    "backup",
    "invoice",
    "doctor",
    "dentist",
    "birthday",
    "gift",
    "holiday",
    "beach",
    "mountain",
    "book",
    "film",
    "music",
    "guitar",
    "piano",
    "recipe",
    "pasta",
    "bread",
    "cheese",
    "wine",
    "friend",
    "family",
    "sister",
]


class PrecomputedEmbedder(Embedder):
    """Answers the query with a vector chosen beforehand (no server)."""

    def __init__(self, vector: Vector):
        provider = ProviderConfig(type="openai", base_url="http://127.0.0.1:9/v1")
        provider.name = "bench"
        super().__init__(provider, "bench-model", lambda: "k")
        self.vector = vector

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> list[Vector] | None:
        return [self.vector for _ in texts]


def fill(db_path: Path, count: int, dims: int, rng: random.Random) -> None:
    import sqlite3

    conn = sqlite3.connect(db_path, isolation_level=None)
    gen = np.random.default_rng(7)
    with transaction(conn):
        for i in range(count):
            title = " ".join(rng.sample(WORDS, 3)) + f" {i}"
            tags = rng.sample(WORDS, 2)
            body = " ".join(rng.choices(WORDS, k=60))
            digest = text_hash(embedding_text(title, tags, body))
            conn.execute(
                "INSERT INTO notes (id, slug, title, tags, created, updated, text_hash)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    i + 1,
                    f"note-{i}",
                    title,
                    json.dumps(tags),
                    "2026-01-01T00:00:00Z",
                    f"2026-01-01T00:00:{i % 60:02d}Z",
                    digest,
                ),
            )
            conn.execute(
                "INSERT INTO notes_fts (rowid, title, tags, body) VALUES (?, ?, ?, ?)",
                (i + 1, title, " ".join(tags), body),
            )
            vector = gen.standard_normal(dims)
            conn.execute(
                "INSERT INTO embeddings (model, hash, vector) VALUES (?, ?, ?)",
                ("bench-model", digest, to_blob(vector)),
            )
    conn.close()


async def bench(count: int, dims: int, searches: int) -> float:
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        await (await Database.open(path, SCHEMA)).close()
        fill(path, count, dims, rng)
        db = await Database.open(path, SCHEMA)
        query_vector = np.random.default_rng(3).standard_normal(dims).astype(np.float32)
        query_vector /= np.linalg.norm(query_vector)
        semantic = SemanticIndex(db, PrecomputedEmbedder(query_vector))

        async def fts(limit: int, query: str) -> list[MemoryHit]:
            match = " OR ".join(f'"{word}"' for word in query.split())
            rows = await db.fetchall(
                "SELECT n.slug, n.title, bm25(notes_fts, 10.0, 5.0, 1.0) AS rank,"
                " snippet(notes_fts, -1, '[', ']', '…', 16) AS snip"
                " FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid"
                " WHERE notes_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, limit),
            )
            return [MemoryHit(NoteSummary(r[0], r[1], (), "", ""), r[3], -r[2]) for r in rows]

        times: list[float] = []
        for n in range(searches + 5):
            query = " ".join(rng.sample(WORDS, 2))
            started = time.perf_counter()
            hits = await semantic.search(query, (), 10, lambda lim, q=query: fts(lim, q))
            elapsed = time.perf_counter() - started
            if n >= 5:  # the first searches load the matrix and warm SQLite's cache
                times.append(elapsed)
            assert hits, "a hybrid search found nothing"
        await db.close()
    times.sort()
    p50 = statistics.median(times) * 1000
    p95 = times[int(len(times) * 0.95) - 1] * 1000
    print(
        f"memory hybrid search over {count} notes ({dims} dims): "
        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms (target p95 <= 20 ms)"
    )
    return p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=768)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    p95 = asyncio.run(bench(args.count, args.dims, args.searches))
    sys.exit(0 if p95 <= 20.0 else 1)


if __name__ == "__main__":
    main()
