"""Markdown to Discord's own Markdown, cut into messages under 2000 characters.

Discord renders most of Markdown itself (bold, italics, strike, code spans, fenced code
blocks with a language, quotes, lists, masked links and headings of levels 1-3), so the
text goes out nearly as written. What changes: a heading of level 4 or deeper (shown
literally by Discord) becomes bold, and a table (not rendered at all) becomes a code block
so its columns stay aligned.

Chunking is the shared one (chunking.py), in chunks of at most `DISCORD_LIMIT` characters:
code blocks stay intact, and one too big for a chunk is split by lines, every piece with
its own fence (and language). Deterministic, so a retried delivery resumes at a chunk index.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .chunking import Renderer, Unit, chunks

DISCORD_LIMIT = 2000

_DEEP_HEADING = re.compile(r"^\s{0,3}#{4,}\s+(.*?)\s*#*\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def _paragraph(lines: Sequence[str]) -> Unit:
    """A paragraph as a unit: a table becomes a code block (so its columns stay aligned),
    a heading Discord shows literally becomes bold."""
    if len(lines) >= 2 and "|" in lines[0] and _TABLE_RULE.match(lines[1]):
        return Unit(tuple(lines), True)
    return Unit(
        tuple(f"**{m.group(1)}**" if (m := _DEEP_HEADING.match(line)) else line for line in lines),
        False,
    )


def _code(lines: Sequence[str], language: str) -> str:
    return "\n".join((f"```{language}", *lines, "```"))


DISCORD_MARKDOWN = Renderer(
    text="\n".join,
    code=_code,
    escape=str,
    fallback=lambda markdown, limit: markdown.strip()[:limit],
    paragraph=_paragraph,
    drop_blank=True,
)
"""Discord's Markdown as the shared chunker renders it: nearly as written, nothing escaped."""


def discord_chunks(markdown: str, limit: int = DISCORD_LIMIT) -> list[str]:
    """Discord-flavoured Markdown in chunks of at most `limit` characters (at least one)."""
    return chunks(markdown, limit, DISCORD_MARKDOWN)
