"""The nightly pass's choices: which notes look alike, which are stale.

Pure functions over note summaries (and vectors when there are embeddings), so the
job in review.py only has to gather, ask and apply.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .memory_types import NoteSummary

COSINE_ALIKE = 0.92
TITLE_SHARE = 0.8
CLUSTER_MAX = 4
MERGES_PER_NIGHT = 5
KEEP_TAGS = frozenset({"pinned", "keep"})
VECTOR_NOTES = 2_000  # vectors are compared among the newest notes only

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
    return _words_alike(title_words(a), title_words(b))


def _words_alike(wa: frozenset[str], wb: frozenset[str]) -> bool:
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
    is in one group at most and a group never exceeds four. Only notes that share a
    title word or are near in vector space are compared (not every pair: an agent may
    have tens of thousands of notes).
    """
    ordered = [
        n
        for n in sorted(notes, key=lambda n: n.updated, reverse=True)
        if not KEEP_TAGS & set(n.tags)
    ]
    words = [title_words(n.title) for n in ordered]
    shares = _title_candidates(words)
    near = _near_by_vector(ordered, vectors)
    used: set[int] = set()
    groups: list[list[NoteSummary]] = []
    for index in range(len(ordered)):
        if index in used:
            continue
        candidates = {i for i in shares(index) | near(index) if i > index}
        group = [index]
        for other in sorted(candidates):
            if len(group) >= CLUSTER_MAX:
                break
            if other in used:
                continue
            if _words_alike(words[index], words[other]) or other in near(index):
                group.append(other)
        if len(group) >= 2:
            used.update(group)
            groups.append([ordered[i] for i in group])
            if len(groups) >= limit:
                break
    return groups


def _title_candidates(words: Sequence[frozenset[str]]) -> Callable[[int], set[int]]:
    """index -> the notes whose titles may share 80% of their words with it.

    Prefix filtering (as in set-similarity joins): order every title's words rarest
    first; two titles sharing at least 80% of their words share a word among the first
    len - ceil(0.8 * len) + 1 of either. So only those prefix words are indexed, and a
    word as common as "note" never makes every title a candidate of every other.
    """
    frequency: Counter[str] = Counter(word for found in words for word in found)
    by_word: dict[str, list[int]] = defaultdict(list)
    prefixes: list[list[str]] = []
    for index, found in enumerate(words):
        if len(found) < 2:
            prefixes.append([])
            continue
        ranked = sorted(found, key=lambda word: (frequency[word], word))
        prefix = ranked[: len(found) - math.ceil(TITLE_SHARE * len(found)) + 1]
        prefixes.append(prefix)
        for word in prefix:
            by_word[word].append(index)
    return lambda index: {i for word in prefixes[index] for i in by_word[word]} - {index}


def _near_by_vector(
    ordered: Sequence[NoteSummary], vectors: Mapping[str, Any] | None
) -> Callable[[int], set[int]]:
    """index -> the indices of notes whose vectors have cosine >= COSINE_ALIKE with it."""
    if not vectors:
        return lambda index: set()
    import numpy as np

    # The newest notes only: comparing every vector with every other is quadratic
    # (10,000 notes of 768 dimensions: 77 billion multiplications a night).
    rows = [i for i, n in enumerate(ordered[:VECTOR_NOTES]) if n.slug in vectors]
    if not rows:
        return lambda index: set()
    matrix = np.vstack([vectors[ordered[i].slug] for i in rows])
    cache: dict[int, set[int]] = {}

    def near(index: int) -> set[int]:
        slug = ordered[index].slug
        if index >= VECTOR_NOTES or slug not in vectors:
            return set()
        if index not in cache:
            scores = matrix @ vectors[slug]
            cache[index] = {rows[j] for j in np.nonzero(scores >= COSINE_ALIKE)[0]} - {index}
        return cache[index]

    return near


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
