"""Markdown cut into chunks under a platform's limit, rendered by that platform's renderer.

Every chat platform caps a message's length, and most reject or mangle markup cut in the
middle. So the text is split into units (paragraphs and fenced code blocks), each
rendered on its own, which keeps every chunk's markup balanced, and the rendered units
are packed into chunks joined by a blank line. A unit too big for one chunk is split by
lines (a code block reopens its fence, with its language, in every piece), and a single
line too big by characters. There is always at least one chunk. Chunking is
deterministic: the same text always gives the same chunks, which is what lets a retried
delivery resume at a chunk index.

What differs between platforms is only the rendering, given as a `Renderer`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

_FENCE = re.compile(r"^\s*(```|~~~)(.*)$")


@dataclass(frozen=True)
class Unit:
    """A paragraph or a fenced code block: the smallest thing rendered on its own."""

    lines: tuple[str, ...]
    code: bool
    language: str = ""


def prose(lines: Sequence[str]) -> Unit:
    """A paragraph as one unit of prose (what most platforms make of every paragraph)."""
    return Unit(tuple(lines), False)


@dataclass(frozen=True)
class Renderer:
    """How one platform renders the units a chunk is made of."""

    text: Callable[[Sequence[str]], str]
    """A paragraph's lines (never blank) as the platform's markup."""
    code: Callable[[Sequence[str], str], str]
    """A code block's lines and its language ("" when none) as a fenced block."""
    escape: Callable[[str], str]
    """A raw piece of one prose line cut by a hard split, as it is sent."""
    fallback: Callable[[str, int], str]
    """The chunk for a text and limit that rendered to nothing ("" for "…")."""
    paragraph: Callable[[Sequence[str]], Unit] = field(default=prose)
    """A paragraph's lines as a unit (Discord turns a table into a code block)."""
    drop_blank: bool = False
    """Leave out pieces of only whitespace, not only empty ones."""

    def render(self, unit: Unit) -> str:
        """The unit in the platform's markup."""
        return self.code(unit.lines, unit.language) if unit.code else self.text(unit.lines)

    def piece(self, unit: Unit, raw: str) -> str:
        """A piece of the unit's single line, rendered alone (code keeps its fence)."""
        return self.code((raw,), unit.language) if unit.code else self.escape(raw)


def units(markdown: str, renderer: Renderer) -> list[Unit]:
    """The text's paragraphs and fenced code blocks, in order."""
    out: list[Unit] = []
    paragraph: list[str] = []
    code: list[str] | None = None
    fence = language = ""

    def end_paragraph() -> None:
        if paragraph:
            out.append(renderer.paragraph(paragraph))
            paragraph.clear()

    for line in markdown.replace("\r\n", "\n").split("\n"):
        match = _FENCE.match(line)
        if code is not None:
            if match and match.group(1) == fence and not match.group(2).strip():
                out.append(Unit(tuple(code), True, language))
                code = None
            else:
                code.append(line)
        elif match:
            end_paragraph()
            code, fence = [], match.group(1)
            language = match.group(2).strip().split(" ")[0]
        elif not line.strip():
            end_paragraph()
        else:
            paragraph.append(line)
    if code is not None:  # an unclosed fence runs to the end, as in CommonMark
        out.append(Unit(tuple(code), True, language))
    end_paragraph()
    return out


def _pack_lines(unit: Unit, limit: int, renderer: Renderer) -> list[Unit]:
    """A unit too big for one chunk as runs of whole lines that each fit."""
    parts: list[Unit] = []
    current: list[str] = []
    for line in unit.lines:
        candidate = Unit((*current, line), unit.code, unit.language)
        if current and len(renderer.render(candidate)) > limit:
            parts.append(Unit(tuple(current), unit.code, unit.language))
            current = []
        current.append(line)
    if current:
        parts.append(Unit(tuple(current), unit.code, unit.language))
    return parts


def _hard_split(unit: Unit, limit: int, renderer: Renderer) -> list[str]:
    """One line too long for a chunk: its raw text cut so each rendered piece fits.

    The cut is the longest prefix that fits (binary search, since escaping makes the
    rendered length grow unevenly; at least one character, so a fence longer than the
    limit still makes progress), moved back to a space in prose when there is one.
    """
    text = unit.lines[0] if unit.lines else ""
    pieces: list[str] = []
    while text:
        low, high = 1, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if len(renderer.piece(unit, text[:middle])) <= limit:
                low = middle
            else:
                high = middle - 1
        take = low
        if take < len(text) and not unit.code:
            space = text.rfind(" ", 0, take)
            if space > take // 2:
                take = space + 1
        pieces.append(renderer.piece(unit, text[:take]))
        text = text[take:]
    return pieces


def chunks(markdown: str, limit: int, renderer: Renderer) -> list[str]:
    """The text in the renderer's markup, in chunks of at most `limit` characters, in order
    (at least one)."""
    rendered: list[str] = []
    pending = units(markdown, renderer)
    while pending:
        unit = pending.pop(0)
        text = renderer.render(unit)
        if len(text) <= limit:
            rendered.append(text)
        elif len(unit.lines) > 1:
            pending[0:0] = _pack_lines(unit, limit, renderer)
        else:
            rendered.extend(_hard_split(unit, limit, renderer))
    out: list[str] = []
    current = ""
    for piece in rendered:
        if not (piece.strip() if renderer.drop_blank else piece):
            continue
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            out.append(current)
            current = piece
    if current or not out:
        out.append(current or renderer.fallback(markdown, limit) or "…")
    return out
