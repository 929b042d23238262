"""The readable text of an HTML page (fetch_url's reduction): scripts and styles dropped,
blocks on their own lines, whitespace collapsed."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BLOCK = frozenset(
    {
        "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header",
        "footer", "nav", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "hr", "main",
    }
)  # fmt: skip


class _TextExtractor(HTMLParser):
    """Visible text of an HTML page: scripts and styles dropped, blocks on their own lines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self._skip += 1
        elif tag in _BLOCK:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP and self._skip:
            self._skip -= 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self._skip:
            self.parts.append(data)


def html_to_text(page: str) -> tuple[str, str]:
    """The title and the readable text of an HTML page."""
    parser = _TextExtractor()
    try:
        parser.feed(page)
        parser.close()
    except AssertionError:  # HTMLParser gives up on some broken markup
        return "", html.unescape(re.sub(r"<[^>]+>", " ", page))
    text = "".join(parser.parts)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    collapsed = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return " ".join(parser.title.split()), collapsed
