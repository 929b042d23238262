"""Markdown to Signal's text: plain words plus style ranges, in chunks Signal shows whole.

Signal has no markup language: a message is plain text and a list of body ranges
(`start:length:STYLE`, STYLE one of BOLD, ITALIC, STRIKETHROUGH, MONOSPACE, SPOILER), its
offsets counted in UTF-16 code units as Java strings count them, not in code points
(an emoji outside the BMP is two units). signal-cli takes them as `textStyle`.

The chunking is the one every platform shares (channels/format.py): Markdown is rendered
to balanced HTML chunks, deterministic, so a retried delivery resumes at a chunk index.
A chunk is that HTML (the adapter's `render` output, what the delivery worker hands back
to `send_text`); `styled` turns one chunk into the text and ranges signal-cli sends.
Chunks stay under 2000 characters, the body size Signal sends inline (signal-cli
would turn a longer body into a "long text" attachment that some clients fold).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Literal

from .format import markdown_chunks

SIGNAL_LIMIT = 2000

Style = Literal["BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE", "SPOILER"]
_TAG_STYLES: dict[str, Style] = {
    "b": "BOLD",
    "strong": "BOLD",
    "i": "ITALIC",
    "em": "ITALIC",
    "s": "STRIKETHROUGH",
    "del": "STRIKETHROUGH",
    "code": "MONOSPACE",
    "pre": "MONOSPACE",
    "tg-spoiler": "SPOILER",
}


@dataclass(frozen=True)
class StyleRange:
    """One styled run: `start` and `length` in UTF-16 code units."""

    start: int
    length: int
    style: Style

    def __str__(self) -> str:
        return f"{self.start}:{self.length}:{self.style}"


@dataclass(frozen=True)
class StyledText:
    """A message body as signal-cli sends it: plain text and its style ranges."""

    text: str
    styles: tuple[StyleRange, ...] = ()

    @property
    def text_style(self) -> list[str]:
        """The ranges as signal-cli's `textStyle` parameter (`start:length:STYLE`)."""
        return [str(s) for s in self.styles]


def utf16_len(text: str) -> int:
    """The length of `text` in UTF-16 code units (what Signal's offsets count)."""
    return len(text.encode("utf-16-le")) // 2


def signal_chunks(markdown: str, limit: int = SIGNAL_LIMIT) -> list[str]:
    """Markdown as chunks for `styled` (never empty)."""
    return markdown_chunks(markdown, limit)


def styled(chunk: str) -> StyledText:
    """One rendered chunk as plain text with its style ranges."""
    parser = _Styler()
    parser.feed(chunk)
    parser.close()
    return parser.result()


@dataclass
class _Open:
    style: Style | None
    start: int
    href: str = ""
    text: list[str] = field(default_factory=list)


class _Styler(HTMLParser):
    """Walks the chunk's HTML, writing text and noting where each style starts and ends."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.units = 0  # UTF-16 length of what is written so far
        self.open: list[tuple[str, _Open]] = []
        self.ranges: list[StyleRange] = []
        self.quote_depth = 0

    def _write(self, text: str) -> None:
        if self.quote_depth and "\n" in text:
            text = text.replace("\n", "\n> ")
        self.out.append(text)
        self.units += utf16_len(text)
        for tag, item in self.open:
            if tag == "a":
                item.text.append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "blockquote":
            self.quote_depth += 1
            self._write("> ")
            return
        href = (dict(attrs).get("href") or "") if tag == "a" else ""
        self.open.append((tag, _Open(_TAG_STYLES.get(tag), self.units, href)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "blockquote":
            self.quote_depth = max(0, self.quote_depth - 1)
            return
        for index in range(len(self.open) - 1, -1, -1):
            name, item = self.open[index]
            if name != tag:
                continue
            del self.open[index]
            if tag == "a" and item.href and "".join(item.text).strip() != item.href:
                self._write(f" ({item.href})")
            length = self.units - item.start
            # <pre><code> styles the same run twice: one range is enough
            duplicate = any(
                r.start == item.start and r.length == length and r.style == item.style
                for r in self.ranges
            )
            if item.style is not None and length > 0 and not duplicate:
                self.ranges.append(StyleRange(item.start, length, item.style))
            return

    def handle_data(self, data: str) -> None:
        self._write(data)

    def result(self) -> StyledText:
        text = "".join(self.out)
        ranges = sorted(self.ranges, key=lambda r: (r.start, r.length, r.style))
        return StyledText(text, tuple(ranges))
