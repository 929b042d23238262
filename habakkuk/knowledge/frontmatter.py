"""A note file's frontmatter: read leniently, written in the spec's small format.

A note is `---`, a YAML mapping (title, tags, created, updated, source, session,
trust), `---`, then the Markdown body. A file without frontmatter, or whose frontmatter
is not a YAML mapping, is still a note: the whole text is its body, its title comes from
the file name and its dates from the file's mtime.

A SKILL.md is read with `read_frontmatter`, which is lenient where real skills are not
valid YAML: `description: Use when: the user asks` (an unquoted ": ") is refused by a
YAML parser, so each top-level `key: value` block the parser cannot read on its own is
taken as the text after `key:` to the end of the line (its indented continuation lines
folded in), and the result says so in `warning` (the YAML error and its line). What
even that cannot read raises FrontmatterError with the YAML error and its line.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass

import yaml

from habakkuk.engine.errors import HabakkukError

from .memory_types import Trust

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    `text` has no frontmatter or it is not a YAML mapping (a note's frontmatter; a
    SKILL.md's is read with `read_frontmatter`)."""
    found = _head(text)
    if found is None:
        return None
    source, body = found
    try:
        # libyaml's safe loader when built in: the same safe subset, ~10x faster (every
        # new session's prompt lists the skills, whose SKILL.md each is parsed once).
        loaded = yaml.load(source, Loader=_SAFE_LOADER)
    except yaml.YAMLError:
        return None
    if not isinstance(loaded, dict):
        return None
    return {str(k): v for k, v in loaded.items()}, body


def _head(text: str) -> tuple[str, str] | None:
    """(the frontmatter's text, the text after it), or None when there is none."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return None
    rest = text.split("\n", 1)[1]
    end = _closing(rest)
    if end is None:
        return None
    head, body_start = end
    return rest[:head], rest[body_start:]


class FrontmatterError(HabakkukError):
    """A frontmatter not even the lenient reader can read: the YAML error and its line."""


@dataclass(frozen=True)
class Frontmatter:
    """A file's frontmatter mapping and the text after it. `warning` is "" when the YAML
    was valid, else the YAML error, its line and which keys were read leniently."""

    meta: dict[str, object]
    body: str
    warning: str = ""


# A top-level `key:` line of a frontmatter (the key, then whatever follows the colon).
_KEY_LINE = re.compile(r"([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t](.*))?")
# A continuation line that has structure of its own (a list item, a nested key).
_STRUCTURED = re.compile(r"\s*(?:- |-$|[\w.-]+[ \t]*:(?:[ \t]|$))")


def read_frontmatter(text: str) -> Frontmatter | None:
    """The frontmatter of `text` (None when it has none: no opening or closing `---`).

    Valid YAML is read as YAML. Otherwise each top-level key is read on its own, and a
    key whose value YAML cannot read is the text after the colon to the end of the line;
    the Frontmatter then carries a warning. FrontmatterError when the lines are not
    `key: value` blocks at all, naming the YAML error and its line (the file's line).
    """
    found = _head(text)
    if found is None:
        return None
    source, body = found
    try:
        loaded = yaml.load(source, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        line, problem = _yaml_problem(exc)
    else:
        if isinstance(loaded, dict):
            return Frontmatter({str(k): v for k, v in loaded.items()}, body)
        if loaded is None and not source.strip():
            return Frontmatter({}, body)
        line, problem = 2, "the frontmatter is not a mapping of `key: value` lines"
    meta, lenient = _lenient(source)
    if meta is None:
        raise FrontmatterError(f"line {line}: {problem}")
    keys = ", ".join(lenient) or "its keys"
    warning = (
        f"line {line}: the frontmatter is not valid YAML ({problem}); read leniently: "
        f"{keys} taken as the text after the colon to the end of the line "
        "(quote the value to make it valid YAML)"
    )
    return Frontmatter(meta, body, warning)


def _yaml_problem(exc: yaml.YAMLError) -> tuple[int, str]:
    """(the file's line, the parser's words) of a YAML error in a frontmatter, whose
    first line is the file's second (after `---`)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 2 if mark is not None else 2
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return line, str(problem)


def _lenient(source: str) -> tuple[dict[str, object] | None, list[str]]:
    """The frontmatter read one top-level key at a time, and the keys read as raw text;
    (None, []) when a line is neither a `key:` line nor a continuation of one."""
    blocks: list[tuple[str, list[str]]] = []
    for row in source.split("\n"):
        row = row.rstrip("\r")
        if not row.strip() or (not blocks and row.lstrip().startswith("#")):
            if blocks:
                blocks[-1][1].append(row)
            continue
        if row[0] in " \t" or row.startswith("-") or row.startswith("#"):
            if not blocks:
                return None, []
            blocks[-1][1].append(row)
            continue
        found = _KEY_LINE.fullmatch(row)
        if found is None:
            return None, []
        blocks.append((found.group(1), [row]))
    meta: dict[str, object] = {}
    lenient: list[str] = []
    for key, rows in blocks:
        try:
            loaded = yaml.load("\n".join(rows), Loader=_SAFE_LOADER)
        except yaml.YAMLError:
            loaded = None
        else:
            if isinstance(loaded, dict) and len(loaded) == 1:
                meta[key] = next(iter(loaded.values()))
                continue
        more = [r.strip() for r in rows[1:] if r.strip() and not r.lstrip().startswith("#")]
        if any(_STRUCTURED.match(r) for r in more):
            return None, []  # a nested block YAML cannot read: not a plain line of text
        first = _KEY_LINE.fullmatch(rows[0])
        value = " ".join([(first.group(2) or "").strip() if first else "", *more]).strip()
        meta[key] = value
        lenient.append(key)
    return meta, lenient


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
