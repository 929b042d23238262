"""The curator's decisions, on values only: which own skills are near-duplicates, which
one keeps its place, and which are stale (spec 000 "Skills" -> "Curator").

Nothing here touches a file; knowledge/skills/curator.py applies what these decide.

Near-duplicates (two skills of one agent, neither pinned) are, in this order:
- "same body": the instructions are equal once runs of whitespace are one space
  (and the body is not empty);
- "plural name": the names are equal but for a plural, word by word on the hyphens
  (report / reports, fix / fixes, policy / policies, weekly-report / weekly-reports);
- "similar description": the descriptions share at least 70 % of their words. Our reading
  of "sharing 70 % of their words" is the Jaccard index of the two word sets: words are
  runs of letters and digits, lower-cased, a plural ending folded (the same folding as the
  names), common English stop words ("the", "a", "of", ...) left out, and
  |shared| / |either| >= 0.7. Each description must have at least two such words, so
  "Deploy." and "Deploy it." are not twins by accident of brevity.

The keeper of a pair is the more recently used: the later `last_used` wins (a skill ever
loaded beats one never loaded), then the later `updated` (SKILL.md's mtime), then the
name, so the choice is stable.

A skill is stale when it has not been loaded for `archive_after_days`, counting from its
last change (`updated`) when it was never loaded.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .types import Skill, SkillSummary

DESCRIPTION_SHARE = 0.7
MIN_DESCRIPTION_WORDS = 2
# The shortest singular the plural-name rule folds ("fix"); shorter words are left alone
# so "go" and "gos" or "a" and "as" never pair.
MIN_STEM = 3

_STOP = """a an and are as at be by for from in into is it its of on or so that the then this
to with when which who what how your you use using used can will do does any all each via
about over per"""
STOP_WORDS = frozenset(_STOP.split())

_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Duplicate:
    """One merge the curator plans: `merged` goes into `keeper`, and why."""

    keeper: Skill
    merged: Skill
    rule: str  # "same body", "plural name" or "similar description"


def normalise_body(body: str) -> str:
    """The body with every run of whitespace one space, trimmed."""
    return " ".join(body.split())


def singular(word: str) -> str:
    """A word with a plural ending folded: policies -> policy, fixes -> fix, reports ->
    report. Words too short to be a plural of a MIN_STEM-letter word stay as they are."""
    if len(word) >= MIN_STEM + 2 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) >= MIN_STEM + 2 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) >= MIN_STEM + 2 and word.endswith(("ches", "shes")):
        return word[:-2]
    if len(word) >= MIN_STEM + 1 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _is_plural_of(plural: str, single: str) -> bool:
    if len(single) < MIN_STEM or not single.isalpha():
        return False
    if plural == single + "s" and not single.endswith("s"):
        return True
    if plural == single + "es" and single.endswith(("s", "x", "z", "ch", "sh")):
        return True
    return single.endswith("y") and plural == single[:-1] + "ies"


def plural_names(a: str, b: str) -> bool:
    """Whether two skill names are equal but for a plural, word by word on the hyphens."""
    if a == b:
        return False
    left, right = a.split("-"), b.split("-")
    if len(left) != len(right):
        return False
    return all(
        x == y or _is_plural_of(x, y) or _is_plural_of(y, x)
        for x, y in zip(left, right, strict=True)
    )


def description_words(text: str) -> frozenset[str]:
    """The words the description rule compares (see the module docstring)."""
    words = (singular(w) for w in _WORD.findall(text.lower()))
    return frozenset(w for w in words if w not in STOP_WORDS)


def description_share(a: str, b: str) -> float:
    """The Jaccard index of two descriptions' words; 0 when either has fewer than two."""
    left, right = description_words(a), description_words(b)
    if len(left) < MIN_DESCRIPTION_WORDS or len(right) < MIN_DESCRIPTION_WORDS:
        return 0.0
    return len(left & right) / len(left | right)


def duplicate_rule(a: Skill, b: Skill) -> str | None:
    """Which near-duplicate rule two skills meet, or None when they are distinct."""
    body = normalise_body(a.body)
    if body and body == normalise_body(b.body):
        return "same body"
    if plural_names(a.name, b.name):
        return "plural name"
    if description_share(a.summary.description, b.summary.description) >= DESCRIPTION_SHARE:
        return "similar description"
    return None


def parse_time(stamp: str | None) -> dt.datetime | None:
    """An RFC 3339 stamp as an aware datetime; None when missing or unreadable."""
    if not stamp:
        return None
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


_NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)


def recency(summary: SkillSummary) -> tuple[dt.datetime, dt.datetime, str]:
    """The sort key of "more recently used": last use, then last change, then name."""
    return (
        parse_time(summary.last_used) or _NEVER,
        parse_time(summary.updated) or _NEVER,
        summary.name,
    )


def plan_merges(skills: Iterable[Skill]) -> list[Duplicate]:
    """The merges among one agent's own skills. Pinned skills take no part. Each skill is
    compared with the keepers before it, most recently used first, so every merge goes
    into the more recently used of the pair and no skill is merged twice or both kept
    and merged away."""
    ordered = sorted((s for s in skills if not s.summary.pinned), key=lambda s: recency(s.summary))
    ordered.reverse()
    keepers: list[Skill] = []
    merges: list[Duplicate] = []
    for skill in ordered:
        for keeper in keepers:
            rule = duplicate_rule(keeper, skill)
            if rule is not None:
                merges.append(Duplicate(keeper, skill, rule))
                break
        else:
            keepers.append(skill)
    return merges


def stale(
    skills: Sequence[SkillSummary], now: dt.datetime, archive_after_days: float
) -> list[SkillSummary]:
    """Skills not loaded for `archive_after_days` (from the last change when never
    loaded), pinned ones never; sorted by name."""
    limit = now - dt.timedelta(days=archive_after_days)
    found = []
    for summary in skills:
        if summary.pinned:
            continue
        since = parse_time(summary.last_used) or parse_time(summary.updated)
        if since is not None and since < limit:
            found.append(summary)
    return sorted(found, key=lambda s: s.name)
