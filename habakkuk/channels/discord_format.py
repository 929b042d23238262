"""Markdown to Discord's own Markdown, cut into messages under 2000 characters.

Discord renders most of Markdown itself (bold, italics, strike, code spans, fenced code
blocks with a language, quotes, lists, masked links and headings of levels 1-3), so the
text goes out nearly as written. What changes: a heading of level 4 or deeper (shown
literally by Discord) becomes bold, and a table (not rendered at all) becomes a code block
so its columns stay aligned.

Chunking keeps code blocks intact: the text is split into units (paragraphs and fenced
code blocks), packed into chunks of at most `DISCORD_LIMIT` characters; a code block too
big for one chunk is split by lines and every piece gets its own fence (with the
language), a line too long by characters. Chunking is deterministic (the same text, the
same chunks), which lets a retried delivery resume at a chunk index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DISCORD_LIMIT = 2000

_FENCE = re.compile(r"^\s*(```|~~~)(.*)$")
_DEEP_HEADING = re.compile(r"^\s{0,3}#{4,}\s+(.*?)\s*#*\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


@dataclass(frozen=True)
class _Unit:
    """A paragraph or a fenced code block: never cut unless it alone is too big."""

    lines: tuple[str, ...]
    code: bool
    language: str = ""

    def render(self) -> str:
        if self.code:
            return "\n".join((f"```{self.language}", *self.lines, "```"))
        return "\n".join(self.lines)


def _paragraph(lines: list[str]) -> list[_Unit]:
    """A paragraph's units: a table among its lines becomes a code block of its own."""
    if len(lines) >= 2 and "|" in lines[0] and _TABLE_RULE.match(lines[1]):
        return [_Unit(tuple(lines), True)]
    out = [f"**{m.group(1)}**" if (m := _DEEP_HEADING.match(line)) else line for line in lines]
    return [_Unit(tuple(out), False)]


def _units(markdown: str) -> list[_Unit]:
    units: list[_Unit] = []
    paragraph: list[str] = []
    code: list[str] | None = None
    fence = language = ""
    for line in markdown.replace("\r\n", "\n").split("\n"):
        match = _FENCE.match(line)
        if code is not None:
            if match and match.group(1) == fence and not match.group(2).strip():
                units.append(_Unit(tuple(code), True, language))
                code = None
            else:
                code.append(line)
            continue
        if match:
            if paragraph:
                units += _paragraph(paragraph)
                paragraph = []
            code, fence = [], match.group(1)
            language = match.group(2).strip().split(" ")[0]
            continue
        if not line.strip():
            if paragraph:
                units += _paragraph(paragraph)
                paragraph = []
            continue
        paragraph.append(line)
    if code is not None:  # an unclosed fence runs to the end, as in CommonMark
        units.append(_Unit(tuple(code), True, language))
    if paragraph:
        units += _paragraph(paragraph)
    return units


def _split_lines(unit: _Unit, limit: int) -> list[_Unit]:
    """A unit too big for one chunk as runs of whole lines that each fit."""
    parts: list[_Unit] = []
    current: list[str] = []
    for line in unit.lines:
        if current and len(_Unit((*current, line), unit.code, unit.language).render()) > limit:
            parts.append(_Unit(tuple(current), unit.code, unit.language))
            current = []
        current.append(line)
    if current:
        parts.append(_Unit(tuple(current), unit.code, unit.language))
    return parts


def _hard_split(unit: _Unit, limit: int) -> list[str]:
    """One line too long for a chunk: cut at a space when there is one, each piece fenced
    again when it is code."""
    overhead = len(_Unit(("",), unit.code, unit.language).render())
    room = max(1, limit - overhead)
    text = unit.lines[0] if unit.lines else ""
    pieces: list[str] = []
    while text:
        take = min(room, len(text))
        if take < len(text) and not unit.code:
            space = text.rfind(" ", 0, take)
            if space > take // 2:
                take = space + 1
        pieces.append(_Unit((text[:take],), unit.code, unit.language).render())
        text = text[take:]
    return pieces


def discord_chunks(markdown: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Discord-flavoured Markdown in chunks of at most `limit` characters (at least one)."""
    rendered: list[str] = []
    pending = _units(markdown)
    while pending:
        unit = pending.pop(0)
        text = unit.render()
        if len(text) <= limit:
            rendered.append(text)
        elif len(unit.lines) > 1:
            pending[0:0] = _split_lines(unit, limit)
        else:
            rendered.extend(_hard_split(unit, limit))
    chunks: list[str] = []
    current = ""
    for piece in rendered:
        if not piece.strip():
            continue
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            chunks.append(current)
            current = piece
    if current or not chunks:
        chunks.append(current or markdown.strip()[:limit] or "…")
    return chunks
