"""A note file's frontmatter: read leniently, written in the spec's small format.

A note is `---`, a YAML mapping (title, tags, created, updated, source, session,
trust), `---`, then the Markdown body. A file without frontmatter, or whose frontmatter
is not a YAML mapping, is still a note: the whole text is its body, its title comes from
the file name and its dates from the file's mtime.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

import yaml

from .memory_types import Trust


def rfc3339(when: dt.datetime | float) -> str:
    """A time as the spec writes it: "2026-11-06T09:12:00Z" (UTC, whole seconds)."""
    if not isinstance(when, dt.datetime):
        when = dt.datetime.fromtimestamp(when, dt.UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now() -> str:
    """The current time, RFC 3339 UTC."""
    return rfc3339(dt.datetime.now(dt.UTC))


@dataclass(frozen=True)
class Parsed:
    """What a note file says; `framed` is False when it had no (valid) frontmatter."""

    title: str
    tags: tuple[str, ...]
    created: str
    updated: str
    source: str
    session: str
    trust: Trust
    body: str
    framed: bool


def title_from_slug(slug: str) -> str:
    """The title of a note without one: its file name, words capitalised like a sentence."""
    words = slug.replace("-", " ").replace("_", " ").strip()
    return (words[:1].upper() + words[1:]) if words else slug


def parse(text: str, slug: str, mtime: float) -> Parsed:
    """Read a note file's text; never raises (a broken header makes it all body)."""
    found = split(text)
    meta, body, framed = (found[0], found[1], True) if found else ({}, text, False)
    stamp = rfc3339(mtime)
    title = _text(meta.get("title")).strip() or title_from_slug(slug)
    trust: Trust = "untrusted" if _text(meta.get("trust")).strip() == "untrusted" else "trusted"
    return Parsed(
        title=" ".join(title.split()),
        tags=normalise_tags(meta.get("tags")),
        created=_stamp(meta.get("created")) or stamp,
        updated=_stamp(meta.get("updated")) or _stamp(meta.get("created")) or stamp,
        source=_text(meta.get("source")).strip(),
        session=_text(meta.get("session")).strip(),
        trust=trust,
        body=body.strip("\n"),
        framed=framed,
    )


def split(text: str) -> tuple[dict[str, object], str] | None:
    """The frontmatter mapping (read with yaml.safe_load) and the text after it; None when
    `text` has no frontmatter or it is not a YAML mapping. Notes and SKILL.md share it."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return None
    rest = text.split("\n", 1)[1]
    end = _closing(rest)
    if end is None:
        return None
    head, body_start = end
    try:
        loaded = yaml.safe_load(rest[:head])
    except yaml.YAMLError:
        return None
    if not isinstance(loaded, dict):
        return None
    return {str(k): v for k, v in loaded.items()}, rest[body_start:]


def _closing(rest: str) -> tuple[int, int] | None:
    """Where the frontmatter ends in `rest` (the text after the opening line)."""
    if rest.startswith("---"):
        line_end = rest.find("\n")
        return 0, (len(rest) if line_end < 0 else line_end + 1)
    index = rest.find("\n---")
    while index >= 0:
        after = index + 4
        line_end = rest.find("\n", after)
        tail = rest[after : len(rest) if line_end < 0 else line_end]
        if tail.strip() == "":
            return index + 1, (len(rest) if line_end < 0 else line_end + 1)
        index = rest.find("\n---", after)
    return None


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return str(value)


def _stamp(value: object) -> str:
    """A frontmatter date as RFC 3339 ("" when missing or unreadable)."""
    if isinstance(value, dt.datetime):
        return rfc3339(value)
    if isinstance(value, dt.date):
        return f"{value.isoformat()}T00:00:00Z"
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return ""
        return rfc3339(parsed)
    return ""


def normalise_tags(value: object) -> tuple[str, ...]:
    """Tags as a tuple of distinct, stripped, lower-case words (a list or "a, b")."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        items = [items]
    tags: list[str] = []
    for item in items:
        tag = " ".join(_text(item).split()).lower()
        if tag and tag not in tags:
            tags.append(tag)
    return tuple(tags)


def render(
    *,
    title: str,
    tags: tuple[str, ...],
    created: str,
    updated: str,
    source: str,
    session: str,
    trust: Trust,
    body: str,
) -> str:
    """The file text of a note. JSON strings are YAML, so any title round-trips."""
    lines = [
        "---",
        f"title: {json.dumps(title, ensure_ascii=False)}",
        f"tags: [{', '.join(json.dumps(t, ensure_ascii=False) for t in tags)}]",
        f'created: "{created}"',
        f'updated: "{updated}"',
    ]
    if source:
        lines.append(f"source: {json.dumps(source)}")
    if session:
        lines.append(f"session: {json.dumps(session)}")
    lines.append(f"trust: {trust}")
    lines.append("---")
    text = body.strip("\n")
    return "\n".join(lines) + "\n\n" + text + "\n"
