"""The text a reply is read aloud as: its Markdown stripped, cut at a sentence.

Emphasis, headings, links (their text), list markers and table rules are formatting, not
words; a code block is not read character by character (it is named: "(code)"); inline
code keeps its text. What is over the limit is cut at the last sentence end that fits,
else at a word.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_SENTENCE_END = re.compile(r"[.!?…](?:[\"')\]]*)(?=\s|$)")


@functools.cache
def _parser() -> MarkdownIt:
    """One CommonMark parser with tables and strikethrough (building it costs more than
    parsing a reply)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").enable("strikethrough")


def spoken(markdown: str) -> str:
    """`markdown` as plain sentences to speak."""
    tokens = _parser().parse(markdown)
    blocks: list[str] = []
    line: list[str] = []

    def flush() -> None:
        text = " ".join("".join(line).split())
        if text:
            blocks.append(text)
        line.clear()

    for token in tokens:
        if token.type in ("fence", "code_block"):
            flush()
            blocks.append("(code)")
        elif token.type == "inline":
            for child in token.children or ():
                if child.type in ("text", "code_inline"):
                    line.append(child.content)
                elif child.type in ("softbreak", "hardbreak"):
                    line.append(" ")
                elif child.type == "image":
                    line.append(child.content)
        elif token.type in ("paragraph_close", "heading_close", "th_close", "td_close"):
            if token.type in ("th_close", "td_close"):
                line.append(", ")
            else:
                flush()
        elif token.type in ("tr_close", "list_item_close"):
            flush()
    flush()
    return "\n".join(_sentence(block) for block in blocks)


def _sentence(block: str) -> str:
    """A block as a sentence: a heading or a list item without a stop gets one, so the
    voice pauses between them."""
    block = block.rstrip(", ")
    return block if block[-1:] in ".!?…:;" else f"{block}."


def cut(text: str, limit: int) -> str:
    """`text` up to `limit` characters, cut after the last sentence that fits (else at
    the last word that fits)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] > limit // 3:
        return head[: ends[-1]].rstrip()
    space = head.rfind(" ")
    return (head[:space] if space > limit // 3 else head).rstrip() + "…"


def reply_speech(markdown: str, limit: int) -> str:
    """What a reply is read aloud as: stripped, then cut at a sentence to `limit`."""
    return cut(spoken(markdown), limit)
