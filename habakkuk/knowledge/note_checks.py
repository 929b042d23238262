"""What a note's title, body and tags may be: one-line errors naming what is wrong."""

from __future__ import annotations

from habakkuk.engine.control_chars import refuse_controls
from habakkuk.engine.errors import HabakkukError

from .frontmatter import normalise_tags

NOTE_MAX_BYTES = 64_000
TITLE_MAX = 200
TAGS_MAX = 20
TAG_MAX = 40


def checked_title(title: str) -> str:
    """The title on one line; HabakkukError when empty, too long or holding a control
    character (NUL, an escape, a bidirectional override)."""
    refuse_controls(str(title), "memory: the title")
    clean = " ".join(str(title).split())
    if not clean:
        raise HabakkukError.said("errors.memory.title_empty")
    if len(clean) > TITLE_MAX:
        raise HabakkukError.said("errors.memory.title_long", most=TITLE_MAX)
    return clean


def checked_body(content: str) -> str:
    """The body without surrounding blank lines; HabakkukError when empty, too big or
    holding a control character."""
    body = str(content).strip("\n")
    refuse_controls(body, "memory: the content")
    if not body.strip():
        raise HabakkukError.said("errors.memory.content_empty")
    if len(body.encode("utf-8")) > NOTE_MAX_BYTES:
        raise HabakkukError.said("errors.memory.content_big", most=f"{NOTE_MAX_BYTES:,}")
    return body


def checked_tags(tags: list[str] | None) -> tuple[str, ...] | None:
    """The tags normalised (None: keep the note's tags); HabakkukError past the limits."""
    if tags is None:
        return None
    if isinstance(tags, str):
        tags = [tags]
    for tag in tags:
        refuse_controls(str(tag), "memory: a tag")
    clean = normalise_tags(list(tags))
    if len(clean) > TAGS_MAX:
        raise HabakkukError(f"memory: at most {TAGS_MAX} tags")
    for tag in clean:
        if len(tag) > TAG_MAX:
            raise HabakkukError(f"memory: tag {tag[:TAG_MAX]!r}... is over {TAG_MAX} characters")
    return clean


def given_tags(tags: list[str] | None) -> str:
    """The tags a caller passed, as one text for the secret check (before normalising)."""
    if tags is None:
        return ""
    return str(tags) if isinstance(tags, str) else " ".join(str(t) for t in tags)
