"""USER.md and IDENTITY.md: the agent's profile of its user, and who the agent is.

USER.md is `## Section` blocks, changed one section at a time: append (text already in
the section is skipped), replace, remove. It is capped at 6,000 bytes: a change that would
make it longer is refused with a message saying how to make room.
"""

from __future__ import annotations

from habakkuk.engine.errors import HabakkukError

from .memory_types import ProfileMode

PROFILE_CAP = 6_000
SECTION_MAX = 80


def check_section(section: str) -> str:
    """The section's heading text, one line; HabakkukError when empty or too long."""
    name = " ".join(str(section).split()).lstrip("#").strip()
    if not name:
        raise HabakkukError("user profile: section is empty; name it, e.g. 'Preferences'")
    if len(name) > SECTION_MAX:
        raise HabakkukError(f"user profile: section name is over {SECTION_MAX} characters")
    return name


def split_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(the text before the first section, [(heading, body), ...]) of a USER.md."""
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            preamble.append(line)
    return "\n".join(preamble).strip("\n"), [
        (heading, "\n".join(body).strip("\n")) for heading, body in sections
    ]


def join_sections(preamble: str, sections: list[tuple[str, str]]) -> str:
    """The USER.md text of a preamble and sections ("" when both are empty)."""
    parts = [preamble.strip("\n")] if preamble.strip() else []
    for heading, body in sections:
        parts.append(f"## {heading}\n{body.strip(chr(10))}".rstrip("\n"))
    return ("\n\n".join(parts) + "\n") if parts else ""


def change_section(text: str, section: str, content: str, mode: ProfileMode) -> str:
    """USER.md with one section changed; the cap is checked by `check_cap`."""
    name = check_section(section)
    body = content.strip("\n")
    if mode not in ("append", "replace", "remove"):
        raise HabakkukError(f"user profile: mode {mode!r}: use append, replace or remove")
    if mode != "remove" and not body.strip():
        raise HabakkukError("user profile: content is empty (to drop a section, use remove)")
    preamble, sections = split_sections(text)
    index = next((i for i, (h, _) in enumerate(sections) if h.lower() == name.lower()), None)
    if mode == "append":
        if index is None:
            sections.append((name, body))
        else:
            heading, old = sections[index]
            if body.strip() not in old:
                sections[index] = (heading, f"{old}\n{body}" if old.strip() else body)
    elif mode == "replace":
        if index is None:
            sections.append((name, body))
        else:
            sections[index] = (sections[index][0], body)
    elif index is not None:
        heading, old = sections[index]
        if body.strip():
            kept = old.replace(body.strip(), "")
            lines = [line for line in kept.splitlines() if line.strip()]
            sections[index] = (heading, "\n".join(lines))
            if not lines:
                del sections[index]
        else:
            del sections[index]
    return join_sections(preamble, sections)


def check_cap(text: str) -> None:
    """HabakkukError when USER.md would exceed its cap."""
    size = len(text.encode("utf-8"))
    if size > PROFILE_CAP:
        raise HabakkukError(
            f"user profile: the change would make USER.md {size:,} bytes, over its "
            f"{PROFILE_CAP:,}-byte cap; replace or remove a section to make room"
        )


def cut(text: str, cap: int = PROFILE_CAP) -> tuple[str, bool]:
    """`text` cut to `cap` bytes on a character boundary, and whether it was cut."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text, False
    return data[:cap].decode("utf-8", "ignore"), True


def render_identity(name: str, emoji: str, manner: str) -> str:
    """IDENTITY.md: the agent's name, emoji and manner, as the prompt reads it."""
    clean_name = " ".join(name.split())
    clean_emoji = " ".join(emoji.split())
    clean_manner = manner.strip()
    if not clean_name:
        raise HabakkukError("identity: name is empty")
    if len(clean_name) > 60:
        raise HabakkukError("identity: name is over 60 characters")
    if len(clean_emoji) > 16:
        raise HabakkukError("identity: emoji is over 16 characters")
    if len(clean_manner) > 1_000:
        raise HabakkukError("identity: manner is over 1,000 characters")
    lines = ["# Identity", "", f"- Name: {clean_name}"]
    if clean_emoji:
        lines.append(f"- Emoji: {clean_emoji}")
    if clean_manner:
        lines.append(f"- Manner: {clean_manner}")
    return "\n".join(lines) + "\n"
