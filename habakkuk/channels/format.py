"""Markdown to Telegram's HTML, cut into chunks Telegram accepts.

Telegram's HTML mode knows b, i, s, u, code, pre, a and blockquote, and
rejects a message over 4096 characters or with unbalanced tags. The shared
chunker (chunking.py) renders each paragraph and code block on its own, which
keeps every chunk's tags balanced; this module says how a unit renders.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from .chunking import Renderer, chunks

TELEGRAM_LIMIT = 4096

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


def _render_code(lines: Sequence[str], language: str) -> str:
    body = html.escape("\n".join(lines), quote=False)
    if language:
        lang = html.escape(language, quote=True)
        return f'<pre><code class="language-{lang}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _render_text(lines: Sequence[str]) -> str:
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


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _fallback(markdown: str, limit: int) -> str:
    return html.escape(markdown.strip()[:limit], quote=False)


TELEGRAM_HTML = Renderer(text=_render_text, code=_render_code, escape=_escape, fallback=_fallback)
"""Telegram's HTML as the shared chunker renders it (Signal and Matrix start from it too)."""


def markdown_chunks(markdown: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Telegram HTML chunks of at most `limit` characters, in order (at least one)."""
    return chunks(markdown, limit, TELEGRAM_HTML)


def html_to_plain(text: str) -> str:
    """Telegram HTML back to plain text (the fallback when Telegram rejects the markup)."""
    return html.unescape(_TAG.sub("", text))
