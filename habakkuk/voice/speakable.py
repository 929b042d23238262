"""A reply as something to say: Markdown stripped, cut at a sentence to `max_chars`."""

from __future__ import annotations

import re

DEFAULT_MAX_CHARS = 1500

_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.M | re.S)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"<?https?://\S+>?")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.M)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M)
_QUOTE = re.compile(r"^\s*>\s?", re.M)
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$", re.M)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}.*$", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1")
_CODE = re.compile(r"`([^`]*)`")
_HTML = re.compile(r"</?[a-zA-Z][^>]*>")
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


def strip_markdown(text: str) -> str:
    """The words of a Markdown reply, without its markup (code blocks are left out)."""
    text = _FENCE.sub(" (code omitted) ", text)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _TABLE_RULE.sub("", text)
    text = _RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _BULLET.sub("", text)
    text = _QUOTE.sub("", text)
    text = _CODE.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _HTML.sub("", text)
    text = text.replace("|", " ")
    # A line break ends a thought when it has no punctuation of its own (list items).
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " ".join(line if line[-1] in ".!?:;,…" else line + "." for line in lines)
    return re.sub(r"\s+", " ", joined).strip()


def cut_at_sentence(text: str, max_chars: int) -> str:
    """`text`, or its longest run of whole sentences within `max_chars` (at a word when
    the first sentence alone is longer)."""
    if len(text) <= max_chars:
        return text
    head = text[: max_chars + 1]
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() <= max_chars]
    if ends:
        return head[: ends[-1]].strip()
    words = head[:max_chars].rsplit(" ", 1)[0]
    return (words or head[:max_chars]).rstrip(" ,;:") + "…"


def speakable(reply: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """What to say of a reply: its words, whole sentences, at most `max_chars`."""
    return cut_at_sentence(strip_markdown(reply), max_chars)
