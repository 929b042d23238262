"""The nightly pass's choices: which notes look alike, which are stale.

Pure functions over note summaries (and vectors when there are embeddings), so the
job in review.py only has to gather, ask and apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .memory_types import NoteSummary

COSINE_ALIKE = 0.92
TITLE_SHARE = 0.8
CLUSTER_MAX = 4
MERGES_PER_NIGHT = 5
KEEP_TAGS = frozenset({"pinned", "keep"})

_WORD = re.compile(r"\w+", re.UNICODE)


def title_words(title: str) -> frozenset[str]:
    """The title's words, lower case, a plural "s" dropped ("Notes" and "note" match)."""
    words = set()
    for word in _WORD.findall(title.lower()):
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    return frozenset(words)


def titles_alike(a: str, b: str) -> bool:
    """Both titles have two words or more and share 80% of the longer one's words."""
    wa, wb = title_words(a), title_words(b)
    if len(wa) < 2 or len(wb) < 2:
        return False
    return len(wa & wb) / max(len(wa), len(wb)) >= TITLE_SHARE


def clusters(
    notes: Sequence[NoteSummary],
    vectors: Mapping[str, Any] | None = None,
    *,
    limit: int = MERGES_PER_NIGHT,
) -> list[list[NoteSummary]]:
    """Groups of 2 to 4 notes that look alike, newest first, at most `limit` groups.

    Two notes are alike when their unit vectors have cosine >= 0.92 or their titles
    share 80% of their words. Grouping is greedy from the newest note, so every note
    is in one group at most and a group never exceeds four.
    """
    used: set[str] = set()
    groups: list[list[NoteSummary]] = []
    ordered = sorted(notes, key=lambda n: n.updated, reverse=True)
    for index, first in enumerate(ordered):
        if first.slug in used or KEEP_TAGS & set(first.tags):
            continue
        group = [first]
        for other in ordered[index + 1 :]:
            if len(group) >= CLUSTER_MAX:
                break
            if other.slug in used or KEEP_TAGS & set(other.tags):
                continue
            if _alike(first, other, vectors):
                group.append(other)
        if len(group) >= 2:
            used.update(n.slug for n in group)
            groups.append(group)
            if len(groups) >= limit:
                break
    return groups


def _alike(a: NoteSummary, b: NoteSummary, vectors: Mapping[str, Any] | None) -> bool:
    if (
        vectors
        and a.slug in vectors
        and b.slug in vectors
        and float(vectors[a.slug] @ vectors[b.slug]) >= COSINE_ALIKE
    ):
        return True
    return titles_alike(a.title, b.title)


def stale(
    notes: Sequence[NoteSummary],
    read_at: Mapping[str, str | None],
    *,
    now: datetime,
    stale_days: int,
) -> list[NoteSummary]:
    """Notes neither updated nor read for `stale_days`, never those tagged pinned or keep."""
    cutoff = (now - timedelta(days=stale_days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    found = []
    for note in notes:
        if KEEP_TAGS & set(note.tags):
            continue
        last = max(note.updated, read_at.get(note.slug) or "")
        if last < cutoff:
            found.append(note)
    return found
