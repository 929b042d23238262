"""Markdown out to Matrix: `org.matrix.custom.html` chunks with a plain `body` beside them.

The HTML is format.py's (b, i, s, code, pre, a, blockquote: all in Matrix's allowed
subset), with line breaks as `<br>` outside `<pre>` (HTML collapses newlines). A Matrix
event is at most 65,536 bytes and carries the text twice (body and formatted_body), so a
chunk is at most 6,000 characters: even at 4 UTF-8 bytes each, both fit.
"""

from __future__ import annotations

import re

from .format import html_to_plain, markdown_chunks

MATRIX_LIMIT = 6000
HTML_FORMAT = "org.matrix.custom.html"
_PRE = re.compile(r"(<pre>.*?</pre>)", re.DOTALL)
_BR = re.compile(r"<br\s*/?>")


def render_chunks(markdown: str) -> list[str]:
    """Markdown as Matrix HTML chunks, in order (at least one)."""
    return [_breaks(chunk) for chunk in markdown_chunks(markdown, MATRIX_LIMIT)]


def _breaks(html_text: str) -> str:
    parts = _PRE.split(html_text)
    return "".join(p if p.startswith("<pre>") else p.replace("\n", "<br>") for p in parts)


def plain_body(chunk: str) -> str:
    """The plain `body` of an HTML chunk (what clients without HTML show)."""
    return html_to_plain(_BR.sub("\n", chunk))


def text_content(chunk: str, *, notice: bool = False) -> dict[str, str]:
    """An m.room.message content for one chunk (m.notice for a silent draft)."""
    return {
        "msgtype": "m.notice" if notice else "m.text",
        "body": plain_body(chunk),
        "format": HTML_FORMAT,
        "formatted_body": chunk,
    }
