"""Markdown to WhatsApp's own markup, in chunks.

WhatsApp formats *bold*, _italic_, ~strike~, `inline code` and ```blocks``` and shows
everything else as typed, so headings become bold lines, links `text (url)`, and
Markdown's ** and ~~ their single-character forms. A message may be long (65536
characters), but a reply is easier to read in pieces, so chunks stay under 4000
characters, split between paragraphs, then lines, then characters; a code block split
across chunks reopens its fence. Deterministic, like every adapter's chunking: a resumed
delivery finds the same chunks.
"""

from __future__ import annotations

import re

WHATSAPP_LIMIT = 4000

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:https?|mailto):[^)\s]+)\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_BOLD_MARK = "\x00"  # stands for a bold star while italics are rewritten


def _inline(line: str) -> str:
    """One line of prose in WhatsApp markup (code spans are left as they are)."""
    pieces: list[str] = []
    last = 0
    for code in _INLINE_CODE.finditer(line):
        pieces.append(_prose(line[last : code.start()]))
        pieces.append(code.group(0))
        last = code.end()
    pieces.append(_prose(line[last:]))
    return "".join(pieces)


def _prose(text: str) -> str:
    text = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    return text.replace(_BOLD_MARK, "*")


def render_whatsapp(markdown: str) -> str:
    """The whole text in WhatsApp markup."""
    out: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
            out.append("```")
            continue
        if in_code:
            out.append(line)
            continue
        heading = _HEADING.match(line)
        if heading:
            out.append(f"*{_prose(heading.group(1)).strip('*')}*")
            continue
        line = _BULLET.sub(lambda m: f"{m.group(1)}• ", line)
        out.append(_inline(line))
    if in_code:
        out.append("```")
    return "\n".join(out).strip()


def _pieces(line: str, size: int) -> list[str]:
    """A line cut to at most `size` characters a piece, between words where it can."""
    pieces: list[str] = []
    while len(line) > size:
        cut = line.rfind(" ", 0, size + 1)
        cut = cut if cut > 0 else size
        pieces.append(line[:cut])
        line = line[cut:].lstrip(" ")
    pieces.append(line)
    return pieces


def whatsapp_chunks(markdown: str, limit: int = WHATSAPP_LIMIT) -> list[str]:
    """The rendered text cut into chunks of at most `limit` characters (never empty)."""
    text = render_whatsapp(markdown)
    if not text:
        return ["…"]  # an empty reply still says something
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    in_code = False
    for line in text.split("\n"):
        for piece in _pieces(line, limit - 8):
            if current and size + len(piece) + 1 > limit - 4:
                chunks.append("\n".join(current + (["```"] if in_code else [])))
                current, size = (["```"] if in_code else []), (4 if in_code else 0)
            current.append(piece)
            size += len(piece) + 1
        if line == "```":
            in_code = not in_code
    if current:
        chunks.append("\n".join(current))
    return [chunk for chunk in chunks if chunk.strip()] or ["…"]
