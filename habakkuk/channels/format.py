"""Markdown to Telegram's HTML, cut into chunks Telegram accepts.

Telegram's HTML mode knows b, i, s, u, code, pre, a and blockquote, and
rejects a message over 4096 characters or with unbalanced tags. So the text is
split into units (paragraphs and fenced code blocks) that are rendered on
their own, which keeps every chunk's tags balanced, and units are packed into
chunks by their rendered length. A unit too big for one chunk is split by
lines (a code block reopens its fence in every piece), and a single line too
big by characters. Chunking is deterministic: the same text always gives the
same chunks, which is what lets a retried delivery resume at a chunk index.
"""

from __future__ import annotations

import html
import re

TELEGRAM_LIMIT = 4096

_FENCE = re.compile(r"^(\s*)(```|~~~)(.*)$")
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+|mailto:[^)\s]+)\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
# Applied after bold: their content may not cross a tag, so the result stays balanced.
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*\n<>]+?)(?<=\S)\*(?![\w*])")
_ITALIC_UNDER = re.compile(r"(?<![\w_])_(?=\S)([^_\n<>]+?)(?<=\S)_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)([^<>\n]+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_TAG = re.compile(r"<[^>]+>")


def render_inline(text: str) -> str:
    """One line of Markdown inline syntax as Telegram HTML (escaped)."""
    slots: list[str] = []

    def stash(fragment: str) -> str:
        slots.append(fragment)
        return f"\x00{len(slots) - 1}\x00"

    # Code spans and links first: their contents are not formatted further.
    text = _INLINE_CODE.sub(lambda m: stash(f"<code>{html.escape(m.group(1))}</code>"), text)
    text = _LINK.sub(
        lambda m: stash(
            f'<a href="{html.escape(m.group(2), quote=True)}">{html.escape(m.group(1))}</a>'
        ),
        text,
    )
    text = html.escape(text, quote=False)
    text = _BOLD.sub(lambda m: f"<b>{m.group(2)}</b>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    text = _ITALIC_STAR.sub(lambda m: f"<i>{m.group(1)}</i>", text)
    text = _ITALIC_UNDER.sub(lambda m: f"<i>{m.group(1)}</i>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: slots[int(m.group(1))], text)


def _render_code(lines: list[str], language: str) -> str:
    body = html.escape("\n".join(lines), quote=False)
    if language:
        lang = html.escape(language, quote=True)
        return f'<pre><code class="language-{lang}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _render_text(lines: list[str]) -> str:
    out: list[str] = []
    quote: list[str] = []

    def flush_quote() -> None:
        if quote:
            out.append("<blockquote>" + "\n".join(quote) + "</blockquote>")
            quote.clear()

    for line in lines:
        match = _QUOTE.match(line)
        if match:
            quote.append(render_inline(match.group(1)))
            continue
        flush_quote()
        heading = _HEADING.match(line)
        bullet = _BULLET.match(line)
        if heading:
            out.append(f"<b>{render_inline(heading.group(1))}</b>")
        elif bullet and not re.fullmatch(r"\s*([-*_])(\s*\1){2,}\s*", line):
            out.append(f"{bullet.group(1)}• {render_inline(bullet.group(2))}")
        else:
            out.append(render_inline(line))
    flush_quote()
    return "\n".join(out)


class _Unit:
    """A paragraph or a fenced code block: the smallest thing rendered on its own."""

    def __init__(self, lines: list[str], code: bool, language: str = ""):
        self.lines = lines
        self.code = code
        self.language = language

    def render(self) -> str:
        return _render_code(self.lines, self.language) if self.code else _render_text(self.lines)


def _units(markdown: str) -> list[_Unit]:
    units: list[_Unit] = []
    paragraph: list[str] = []
    code: list[str] | None = None
    fence = ""
    language = ""
    for line in markdown.replace("\r\n", "\n").split("\n"):
        if code is not None:
            match = _FENCE.match(line)
            if match and match.group(2) == fence and not match.group(3).strip():
                units.append(_Unit(code, True, language))
                code = None
            else:
                code.append(line)
            continue
        match = _FENCE.match(line)
        if match:
            if paragraph:
                units.append(_Unit(paragraph, False))
                paragraph = []
            code, fence, language = [], match.group(2), match.group(3).strip().split(" ")[0]
            continue
        if not line.strip():
            if paragraph:
                units.append(_Unit(paragraph, False))
                paragraph = []
            continue
        paragraph.append(line)
    if code is not None:  # an unclosed fence runs to the end, as in CommonMark
        units.append(_Unit(code, True, language))
    if paragraph:
        units.append(_Unit(paragraph, False))
    return units


def _render_piece(unit: _Unit, piece: str) -> str:
    return _render_code([piece], unit.language) if unit.code else html.escape(piece, quote=False)


def _hard_split(unit: _Unit, limit: int) -> list[str]:
    """One line too long for a chunk: cut its raw text so each rendered piece fits.

    The cut is the longest prefix that fits (binary search, since escaping makes
    rendered length non-linear), moved back to a space when there is one.
    """
    text = unit.lines[0] if unit.lines else ""
    pieces: list[str] = []
    while text:
        low, high = 1, len(text)
        while low < high:
            middle = (low + high + 1) // 2
            if len(_render_piece(unit, text[:middle])) <= limit:
                low = middle
            else:
                high = middle - 1
        take = low
        if take < len(text) and not unit.code:
            space = text.rfind(" ", 0, take)
            if space > take // 2:
                take = space + 1
        pieces.append(_render_piece(unit, text[:take]))
        text = text[take:]
    return pieces


def _pack_lines(unit: _Unit, limit: int) -> list[_Unit]:
    """Split a unit too big for one chunk into runs of lines that each fit."""
    parts: list[_Unit] = []
    current: list[str] = []
    for line in unit.lines:
        candidate = _Unit([*current, line], unit.code, unit.language)
        if current and len(candidate.render()) > limit:
            parts.append(_Unit(current, unit.code, unit.language))
            current = [line]
        else:
            current.append(line)
    if current:
        parts.append(_Unit(current, unit.code, unit.language))
    return parts


def markdown_chunks(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Telegram HTML chunks of at most `limit` characters, in order (at least one)."""
    rendered: list[str] = []
    pending = _units(markdown)
    while pending:
        unit = pending.pop(0)
        text = unit.render()
        if len(text) <= limit:
            rendered.append(text)
        elif len(unit.lines) > 1:
            pending[0:0] = _pack_lines(unit, limit)
        else:
            rendered.extend(_hard_split(unit, limit))
    chunks: list[str] = []
    current = ""
    for piece in rendered:
        if not piece:
            continue
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            chunks.append(current)
            current = piece
    if current or not chunks:
        chunks.append(current or html.escape(markdown.strip()[:limit], quote=False) or "…")
    return chunks


def html_to_plain(text: str) -> str:
    """Telegram HTML back to plain text (the fallback when Telegram rejects the markup)."""
    return html.unescape(_TAG.sub("", text))
