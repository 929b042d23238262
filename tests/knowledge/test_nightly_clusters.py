"""The nightly pass's clustering compares only likely pairs and finds what comparing
every pair finds."""

from __future__ import annotations

import random

from habakkuk.knowledge.memory_types import NoteSummary
from habakkuk.knowledge.nightly import CLUSTER_MAX, KEEP_TAGS, clusters, titles_alike


def every_pair_clusters(notes: list[NoteSummary], limit: int = 5) -> list[list[str]]:
    """The rule as written: greedy from the newest note over every later note."""
    ordered = [
        n
        for n in sorted(notes, key=lambda n: n.updated, reverse=True)
        if not KEEP_TAGS & set(n.tags)
    ]
    used: set[str] = set()
    groups: list[list[str]] = []
    for index, first in enumerate(ordered):
        if first.slug in used:
            continue
        group = [first]
        for other in ordered[index + 1 :]:
            if len(group) >= CLUSTER_MAX:
                break
            if other.slug not in used and titles_alike(first.title, other.title):
                group.append(other)
        if len(group) >= 2:
            used.update(n.slug for n in group)
            groups.append([n.slug for n in group])
            if len(groups) >= limit:
                break
    return groups


def test_clusters_match_the_every_pair_rule_on_random_titles() -> None:
    rng = random.Random(7)
    vocabulary = ["note", "on", "coffee", "tea", "trip", "paris", "plan", "budget", "cat", "cats"]
    for trial in range(40):
        notes = [
            NoteSummary(
                slug=f"n{trial}-{i}",
                title=" ".join(rng.sample(vocabulary, rng.randint(1, 5))),
                tags=("keep",) if rng.random() < 0.05 else (),
                created="2026-01-01T00:00:00Z",
                updated=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
            )
            for i in range(rng.randint(5, 80))
        ]
        found = [[n.slug for n in group] for group in clusters(notes, limit=50)]
        assert found == every_pair_clusters(notes, limit=50), trial


def test_ten_thousand_titles_sharing_common_words_cluster_only_the_alike() -> None:
    notes = [
        NoteSummary(
            slug=f"note-{i}",
            title=f"Note {i} on coffee",
            tags=(),
            created="2026-01-01T00:00:00Z",
            updated=f"2026-01-01T00:00:{i % 60:02d}Z",
        )
        for i in range(10_000)
    ]
    notes.append(
        NoteSummary("dup", "Note 17 on coffee", (), "2026-01-01T00:00:00Z", "2026-01-01T00:00:59Z")
    )
    groups = clusters(notes)
    assert [sorted(n.slug for n in group) for group in groups] == [["dup", "note-17"]]
