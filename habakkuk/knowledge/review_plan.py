"""The review's plan: typed changes parsed from the model's JSON answer.

A plan is stored (as JSON) before any of it is applied, so a resumed job applies the
very same changes; each change round-trips through `to_json` / `change_from_json`.
The parser is strict about shape and lenient about wrapping (code fences, prose
around the object): a malformed change is dropped and counted, never fatal.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from habakkuk.engine.errors import HabakkukError

MAX_CHANGES = 20  # a run never applies more than this many changes


@dataclass(frozen=True)
class SaveChange:
    """Create or replace the note with this title."""

    title: str
    content: str
    tags: tuple[str, ...] | None = None
    trusted: bool = True
    op: str = "save"

    def target(self) -> str:
        return f"note:{self.title.strip().lower()}"

    def content_hash(self) -> str:
        return _hash(self.content)


@dataclass(frozen=True)
class MergeChange:
    """Fold notes that were shown in full into one note (the others are forgotten,
    which the service turns into proposals for the user)."""

    slugs: tuple[str, ...]
    title: str
    content: str
    tags: tuple[str, ...] | None = None
    trusted: bool = True
    op: str = "merge"

    def target(self) -> str:
        return f"note:{self.title.strip().lower()}"

    def content_hash(self) -> str:
        return _hash(self.content)


@dataclass(frozen=True)
class ProfileChange:
    """Append a fact the user stated to a section of USER.md."""

    section: str
    content: str
    op: str = "profile"

    def target(self) -> str:
        return f"profile:{self.section.strip().lower()}"

    def content_hash(self) -> str:
        return _hash(self.content)


@dataclass(frozen=True)
class ForgetChange:
    """Move a note to the trash (nightly: stale notes; proposals under review provenance)."""

    slug: str
    reason: str = ""
    op: str = "forget"

    def target(self) -> str:
        return f"slug:{self.slug}"

    def content_hash(self) -> str:
        return ""


PlanChange = SaveChange | MergeChange | ProfileChange | ForgetChange


def _hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def fingerprint(change: PlanChange) -> str:
    """What a change does, to spot the same change proposed again on a later run."""
    return f"{change.op}|{change.target()}|{change.content_hash()}"


def to_json(change: PlanChange) -> dict[str, Any]:
    """A change as stored in review_runs.plan."""
    data: dict[str, Any] = {"op": change.op}
    if isinstance(change, SaveChange | MergeChange):
        data.update(title=change.title, content=change.content, trusted=change.trusted)
        data["tags"] = list(change.tags) if change.tags is not None else None
        if isinstance(change, MergeChange):
            data["slugs"] = list(change.slugs)
    elif isinstance(change, ProfileChange):
        data.update(section=change.section, content=change.content)
    else:
        data.update(slug=change.slug, reason=change.reason)
    return data


def change_from_json(data: dict[str, Any]) -> PlanChange:
    """The inverse of `to_json` (a stored plan is trusted to be well formed)."""
    op = data.get("op")
    tags = tuple(data["tags"]) if data.get("tags") is not None else None
    if op == "save":
        return SaveChange(data["title"], data["content"], tags, bool(data["trusted"]))
    if op == "merge":
        return MergeChange(
            tuple(data["slugs"]), data["title"], data["content"], tags, bool(data["trusted"])
        )
    if op == "profile":
        return ProfileChange(data["section"], data["content"])
    if op == "forget":
        return ForgetChange(data["slug"], data.get("reason", ""))
    raise HabakkukError(f"review plan: unknown change {op!r}")


@dataclass
class ParsedPlan:
    """The changes worth applying and why the others were dropped (reason -> count)."""

    changes: list[PlanChange] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def answer_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's answer (fences and prose around it allowed)."""
    text = _FENCE.sub("", text.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _tags(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    tags = tuple(t.strip() for t in value if isinstance(t, str) and t.strip())
    return tags or None


def parse_review(
    text: str, *, shown: set[str], tool_output: bool, untrusted_session: bool
) -> ParsedPlan:
    """The review's answer as typed changes.

    A change is trusted only when it says it came from the user ("from": "user", or
    no "from" in a conversation without tool output) and the session is not an
    untrusted one (an email inbox); untrusted changes never reach the profile.
    Merges may only name notes in `shown` (those the review saw in full).
    """
    plan = ParsedPlan()
    answer = answer_object(text)
    raw = answer.get("changes") if answer is not None else None
    if not isinstance(raw, list):
        plan.dropped["unreadable answer"] += 1
        return plan
    for item in raw:
        if not isinstance(item, dict):
            plan.dropped["malformed"] += 1
            continue
        origin = item.get("from")
        from_user = origin == "user" or (origin is None and not tool_output)
        trusted = from_user and not untrusted_session
        change = _one_change(item, trusted, shown, plan)
        if change is None:
            continue
        if len(plan.changes) >= MAX_CHANGES:
            plan.dropped["over the per-run limit"] += 1
            continue
        plan.changes.append(change)
    return plan


def _one_change(
    item: dict[str, Any], trusted: bool, shown: set[str], plan: ParsedPlan
) -> PlanChange | None:
    op = item.get("op")
    title, content = _text(item.get("title")), _text(item.get("content"))
    if op == "save":
        if not title or not content:
            plan.dropped["malformed"] += 1
            return None
        return SaveChange(title, content, _tags(item.get("tags")), trusted)
    if op == "merge":
        slugs = item.get("slugs")
        if not isinstance(slugs, list) or not title or not content:
            plan.dropped["malformed"] += 1
            return None
        names = tuple(dict.fromkeys(s for s in slugs if isinstance(s, str)))
        if len(names) < 2 or not set(names) <= shown:
            plan.dropped["merge of notes not shown in full"] += 1
            return None
        return MergeChange(names, title, content, _tags(item.get("tags")), trusted)
    if op == "profile":
        section = _text(item.get("section"))
        if not section or not content:
            plan.dropped["malformed"] += 1
            return None
        if not trusted:
            plan.dropped["profile change not stated by the user"] += 1
            return None
        return ProfileChange(section, content)
    plan.dropped["malformed"] += 1
    return None


@dataclass(frozen=True)
class NightlyMerge:
    """The model's decision on one cluster."""

    cluster: int
    merge: bool
    title: str = ""
    content: str = ""
    tags: tuple[str, ...] | None = None


def parse_nightly(text: str, clusters: int) -> list[NightlyMerge]:
    """The nightly answer: one decision per cluster index in range; others ignored."""
    answer = answer_object(text)
    raw = answer.get("merges") if answer is not None else None
    decisions: dict[int, NightlyMerge] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        index = item.get("cluster")
        if not isinstance(index, int) or not 0 <= index < clusters or index in decisions:
            continue
        title, content = _text(item.get("title")), _text(item.get("content"))
        if item.get("merge") is True and title and content:
            decisions[index] = NightlyMerge(index, True, title, content, _tags(item.get("tags")))
        else:
            decisions[index] = NightlyMerge(index, False)
    return [decisions[i] for i in sorted(decisions)]
