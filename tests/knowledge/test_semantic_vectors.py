"""Vector storage and hybrid ranking, on their own (no server)."""

from __future__ import annotations

import sqlite3

import numpy as np

from habakkuk.knowledge.index import content_hash, embedded_text
from habakkuk.knowledge.memory_types import MemoryHit, NoteSummary
from habakkuk.knowledge.vectors import (
    EMBEDDINGS_SCHEMA,
    MAX_BODY_BYTES,
    NoteVectors,
    VectorCache,
    from_blob,
    fuse,
    hybrid_hits,
    missing_hashes,
    nearest,
    store_vectors,
    to_blob,
)


def summary(slug: str) -> NoteSummary:
    return NoteSummary(slug, slug.title(), (), "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")


def test_embedding_text_is_title_tags_and_the_first_8000_bytes_of_the_body() -> None:
    body = "é" * MAX_BODY_BYTES  # two bytes each: the cut lands inside the text
    text = embedded_text("Coffee", ("food", "prefs"), body)
    assert text.startswith("Coffee\nfood, prefs\n")
    assert len(text.split("\n", 2)[2].encode()) == MAX_BODY_BYTES
    assert content_hash(text) == content_hash(
        embedded_text("Coffee", ("food", "prefs"), body + "x")
    )
    assert content_hash(text) != content_hash(embedded_text("Coffee", ("food",), body))


def test_blobs_are_unit_length_little_endian_float32() -> None:
    blob = to_blob([3.0, 4.0])
    assert blob == np.asarray([0.6, 0.8], dtype="<f4").tobytes()
    assert np.allclose(from_blob(blob), [0.6, 0.8])


def test_vectors_are_cached_per_model_and_hash() -> None:
    conn = sqlite3.connect(":memory:")
    conn.executescript(EMBEDDINGS_SCHEMA)
    assert missing_hashes(conn, "m1", ["a", "b", "a"]) == ["a", "b"]
    assert store_vectors(conn, "m1", {"a": [1.0, 0.0]}) == 1
    assert store_vectors(conn, "m1", {"a": [0.0, 1.0]}) == 0  # kept, not replaced
    assert missing_hashes(conn, "m1", ["a", "b"]) == ["b"]
    assert missing_hashes(conn, "m2", ["a"]) == ["a"]


def test_nearest_keeps_notes_above_the_floor_best_first_and_honours_allowed() -> None:
    vectors = NoteVectors(
        ("close", "far", "mid"),
        np.asarray([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32),
    )
    query = np.asarray([1.0, 0.0], dtype=np.float32)
    assert [s for s, _ in nearest(query, vectors, limit=5)] == ["close", "mid"]
    assert [s for s, _ in nearest(query, vectors, limit=1)] == ["close"]
    assert [s for s, _ in nearest(query, vectors, limit=5, allowed={"far", "mid"})] == ["mid"]
    # A query of another width (another model) matches nothing.
    assert nearest(np.ones(3, dtype=np.float32), vectors, limit=5) == []


def test_vector_cache_reloads_only_when_the_key_changes() -> None:
    loads: list[int] = []

    def load() -> list[tuple[str, bytes]]:
        loads.append(1)
        return [("a", to_blob([1.0, 0.0]))]

    cache = VectorCache()
    assert cache.get(("m", 1), load).slugs == ("a",)
    cache.get(("m", 1), load)
    assert len(loads) == 1
    cache.get(("m", 2), load)
    assert len(loads) == 2


def test_fuse_is_reciprocal_rank_fusion_with_k_60() -> None:
    fused = dict(fuse([["a", "b"], ["b", "c"]]))
    assert fused["b"] == 1 / 62 + 1 / 61
    assert fused["a"] == 1 / 61
    assert fused["c"] == 1 / 62
    assert [slug for slug, _ in fuse([["a", "b"], ["b", "c"]])] == ["b", "a", "c"]


def test_hybrid_keeps_fts_snippets_and_gives_others_the_body_start() -> None:
    fts = [MemoryHit(summary("coffee"), "[coffee] with oat milk", 3.0)]
    semantic = [("espresso", 0.8), ("coffee", 0.5), ("gone", 0.4)]
    asked: list[list[str]] = []

    def describe(slugs: list[str]) -> dict[str, tuple[NoteSummary, str]]:
        asked.append(slugs)
        return {"espresso": (summary("espresso"), "Double shot\n\nin the   morning.")}

    hits = hybrid_hits(fts, semantic, describe, limit=5)
    assert [h.note.slug for h in hits] == ["coffee", "espresso"]
    assert hits[0].snippet == "[coffee] with oat milk"
    assert hits[1].snippet == "Double shot in the morning."
    assert asked == [["espresso", "gone"]]
    assert hits[0].score > hits[1].score
