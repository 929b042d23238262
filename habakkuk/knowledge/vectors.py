"""Note vectors: what is embedded, how vectors are stored, and hybrid ranking.

The embedded text is the title, the tags and the body's first 8,000 bytes; its SHA-256
is the note's `text_hash` on the index row. Vectors live in memory.db's
`embeddings(model, hash, vector)` as unit-length little-endian float32, so reindexing
never re-embeds unchanged text and another model never sees this one's vectors.

A search fuses two rankings with reciprocal rank fusion (k = 60): FTS, asked for three
times the limit, and cosine similarity over the agent's vectors, where a floor of 0.25
keeps unrelated notes out. A note FTS found keeps its highlighted snippet; one found by
meaning alone shows the start of its body.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .memory_types import MemoryHit, NoteSummary

MAX_BODY_BYTES = 8000
COSINE_FLOOR = 0.25
RRF_K = 60
FTS_DEPTH = 3  # FTS is asked for this many times the limit
SNIPPET_CHARS = 160

Vector = np.ndarray[Any, np.dtype[np.float32]]
Matrix = np.ndarray[Any, np.dtype[np.float32]]
_LE_F32 = np.dtype("<f4")

EMBEDDINGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, hash)
) WITHOUT ROWID;
"""


def to_blob(vector: Sequence[float] | np.ndarray[Any, Any]) -> bytes:
    """A vector as unit-length little-endian float32 bytes."""
    array = np.asarray(vector, dtype=np.float64).ravel()
    norm = float(np.linalg.norm(array))
    if not array.size or norm == 0.0 or not np.isfinite(norm):
        raise ValueError("cannot store a zero or non-finite vector")
    return (array / norm).astype(_LE_F32).tobytes()


def from_blob(blob: bytes) -> Vector:
    """The float32 vector stored by `to_blob` (native byte order, ready for numpy)."""
    return np.frombuffer(blob, dtype=_LE_F32).astype(np.float32)


# -- the cache table ---------------------------------------------------------------------


def missing_hashes(conn: sqlite3.Connection, model: str, hashes: Iterable[str]) -> list[str]:
    """The hashes (deduplicated, in first-seen order) with no vector for `model` yet."""
    wanted = list(dict.fromkeys(h for h in hashes if h))
    if not wanted:
        return []
    have: set[str] = set()
    for start in range(0, len(wanted), 500):  # stay under SQLite's variable limit
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT hash FROM embeddings WHERE model = ? AND hash IN ({marks})",
            (model, *chunk),
        )
        have.update(row[0] for row in rows)
    return [h for h in wanted if h not in have]


def store_vectors(
    conn: sqlite3.Connection, model: str, vectors: Mapping[str, Sequence[float] | Vector]
) -> int:
    """Insert vectors by hash (existing ones are kept); how many rows were written."""
    rows = [(model, h, to_blob(v)) for h, v in vectors.items()]
    if not rows:
        return 0
    before = conn.total_changes
    conn.executemany(
        "INSERT OR IGNORE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)", rows
    )
    return conn.total_changes - before


@dataclass(frozen=True)
class NoteVectors:
    """One agent's note vectors for one model: slugs and the matching rows."""

    slugs: tuple[str, ...]
    matrix: Matrix  # shape (len(slugs), dims), unit rows

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, bytes]]) -> NoteVectors:
        """Build from (slug, blob) pairs; rows of another width than the first are
        skipped (a model that changed its dimensions cannot mix into one matrix)."""
        slugs: list[str] = []
        vectors: list[Vector] = []
        width = 0
        for slug, blob in rows:
            vector = from_blob(blob)
            if not width:
                width = vector.size
            if vector.size == width:
                slugs.append(slug)
                vectors.append(vector)
        matrix = np.vstack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)
        return cls(tuple(slugs), matrix)


class VectorCache:
    """An agent's matrix, kept until the caller's version key changes.

    Loading 10,000 blobs costs more than the whole search, so the matrix is rebuilt
    only when the key (the model and the index's change counter) differs.
    """

    def __init__(self) -> None:
        self._key: object = None
        self._vectors = NoteVectors((), np.zeros((0, 0), dtype=np.float32))

    def get(self, key: object, load: Callable[[], Iterable[tuple[str, bytes]]]) -> NoteVectors:
        """The vectors for `key`, loaded with `load` when the key changed."""
        if key != self._key:
            self._vectors = NoteVectors.from_rows(load())
            self._key = key
        return self._vectors

    def clear(self) -> None:
        """Forget the matrix (the next `get` loads)."""
        self._key = None


def nearest(
    query: Vector,
    vectors: NoteVectors,
    *,
    limit: int,
    allowed: set[str] | None = None,
    floor: float = COSINE_FLOOR,
) -> list[tuple[str, float]]:
    """The `limit` most similar notes at or above `floor`, best first.

    `allowed` (the slugs a tag filter leaves) restricts the candidates.
    """
    if limit <= 0 or not vectors.slugs or vectors.matrix.shape[1] != query.size:
        return []
    scores = vectors.matrix @ query.astype(np.float32)
    if allowed is not None:
        mask = np.fromiter((s in allowed for s in vectors.slugs), dtype=bool, count=scores.size)
        scores = np.where(mask, scores, -np.inf)
    count = min(limit, scores.size)
    top = np.argpartition(-scores, count - 1)[:count]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(vectors.slugs[i], float(scores[i])) for i in top if scores[i] >= floor]


def fuse(rankings: Sequence[Sequence[str]], *, k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: each list adds 1 / (k + rank) to its items (rank from 1).

    Ties keep the order in which items were first seen (FTS first).
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, slug in enumerate(ranking, start=1):
            scores[slug] = scores.get(slug, 0.0) + 1.0 / (k + rank)
    order = {slug: i for i, slug in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


def body_start(body: str, chars: int = SNIPPET_CHARS) -> str:
    """The snippet of a note found by meaning alone: its body's start, on one line."""
    text = " ".join(body[: chars * 8].split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def hybrid_hits(
    fts: Sequence[MemoryHit],
    semantic: Sequence[tuple[str, float]],
    describe: Callable[[list[str]], Mapping[str, tuple[NoteSummary, str]]],
    *,
    limit: int,
) -> list[MemoryHit]:
    """Fuse FTS hits (asked three times deeper) with semantic (slug, cosine) candidates.

    `describe` gives (summary, body) for the notes only the semantic side found; a slug
    it does not know (forgotten meanwhile) is dropped. Scores are the fused ranks.
    """
    by_slug = {hit.note.slug: hit for hit in fts}
    fused = fuse([[hit.note.slug for hit in fts], [slug for slug, _ in semantic]])
    # Describe a few spare candidates, so a note gone since the vector was stored
    # does not leave the page short.
    head = fused[: limit + 8]
    extra = describe([slug for slug, _ in head if slug not in by_slug])
    hits: list[MemoryHit] = []
    for slug, score in head:
        found = by_slug.get(slug)
        if found is not None:
            hits.append(MemoryHit(found.note, found.snippet, score))
        elif slug in extra:
            summary, body = extra[slug]
            hits.append(MemoryHit(summary, body_start(body), score))
        if len(hits) == limit:
            break
    return hits
