"""Markdown to IRC text: one chunk per line, each within what one IRC line carries.

IRC has no multi-line message, so every line of a reply is a PRIVMSG of its own, and
every line is a chunk: a delivery resumed after a crash starts at the first line not yet
sent, and a line is never sent twice by a resumed one. Blank lines are left out (IRC
cannot send an empty message). Formatting uses the mIRC control codes most clients show:
bold (\\x02) for **strong** and headings, italics (\\x1d), monospace (\\x11) for `code`;
a link is written `text (url)`; code blocks go line by line as typed.

Lines are cut at RENDER_BUDGET bytes, which fits a relayed line for nicks, users, hosts
and targets of common lengths; the adapter cuts again, at the exact budget its own
prefix and the target leave, the rare line that is still too long (irc_wire.split_text).
Deterministic, as every adapter's chunking must be.
"""

from __future__ import annotations

import re

from .irc_wire import split_text

RENDER_BUDGET = 350
BOLD, ITALIC, MONO, RESET = "\x02", "\x1d", "\x11", "\x0f"
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)([^*_\n]+?)(?<=\S)\1(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
# What IRC clients take as formatting: a person's text keeps none of it as markup.
_CONTROL = re.compile(r"\x03(\d{1,2}(,\d{1,2})?)?|[\x02\x0f\x11\x16\x1d\x1e\x1f]")


def _prose(text: str) -> str:
    text = _LINK.sub(lambda m: m.group(1) if m.group(1) == m.group(2) else f"{m[1]} ({m[2]})", text)
    text = _STRONG.sub(lambda m: f"{BOLD}{m.group(2)}{BOLD}", text)
    text = _EMPHASIS.sub(lambda m: f"{ITALIC}{m.group(2)}{ITALIC}", text)
    return _STRIKE.sub(lambda m: m.group(1), text)


def inline(line: str) -> str:
    """One line of Markdown prose in IRC formatting (code spans in monospace)."""
    pieces: list[str] = []
    last = 0
    for code in _CODE.finditer(line):
        pieces.append(_prose(line[last : code.start()]))
        pieces.append(f"{MONO}{code.group(1)}{MONO}")
        last = code.end()
    pieces.append(_prose(line[last:]))
    return "".join(pieces)


def irc_lines(markdown: str, budget: int = RENDER_BUDGET) -> list[str]:
    """The Markdown as IRC lines of at most `budget` bytes (never empty: "…" for a text
    with nothing to show)."""
    out: list[str] = []
    in_code = False
    for raw in markdown.replace("\r\n", "\n").replace("\t", "    ").split("\n"):
        if _FENCE.match(raw):
            in_code = not in_code
            continue
        if in_code:
            line = raw.rstrip()
        else:
            heading = _HEADING.match(raw)
            if heading:
                line = f"{BOLD}{inline(heading.group(1))}{BOLD}" if heading.group(1) else ""
            else:
                line = inline(_BULLET.sub(lambda m: f"{m.group(1)}• ", raw.rstrip()))
        out.extend(split_text(line, budget))
    return out or ["…"]


def plain(text: str) -> str:
    """A person's IRC text without formatting codes (colours, bold, ...)."""
    return _CONTROL.sub("", text)
