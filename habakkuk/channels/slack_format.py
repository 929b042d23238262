"""Markdown to Slack's mrkdwn and back, cut into chunks Slack accepts.

Out: mrkdwn knows *bold*, _italic_, ~strike~, `code`, ```blocks```, > quotes and
<url|text> links, and every literal &, < and > must be escaped (&amp; &lt; &gt;).
Escaping is also what keeps the model from pinging anyone: a `<!channel>`, `<!here>`,
`<!everyone>` or `<@U123>` it writes arrives as visible text, never as a mention. The
only mention a message carries is the reply mention the adapter builds itself
(`reply_mention`), outside the rendered text.

Chunks stay under 3000 characters, the limit of a section block's text (a message with
buttons is a section plus an actions block), so one chunking serves text and blocks.
The chunking is the shared one (chunking.py), deterministic: a retried delivery resumes at
a chunk index.

In: a message's text is mrkdwn too; `plain_text` turns it into what the model reads
(entities unescaped, <@U1> as @U1, links as their text and URL).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .adapter import Button
from .chunking import Renderer, chunks

SLACK_LIMIT = 3000

_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+|mailto:[^)\s]+)\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*\x01])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)([^\n]+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"\s*([-*_])(\s*\1){2,}\s*")
# Bold is marked with \x01 while italics are rewritten, so *bold* is not read as italic.
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """Slack's three control characters as entities (the only escaping mrkdwn has)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_inline(text: str) -> str:
    """One line of Markdown inline syntax as mrkdwn (escaped)."""
    slots: list[str] = []

    def stash(fragment: str) -> str:
        slots.append(fragment)
        return f"\x00{len(slots) - 1}\x00"

    # Code spans and links first: their contents are not formatted further.
    text = _INLINE_CODE.sub(lambda m: stash(f"`{escape(m.group(1))}`"), text)
    text = _LINK.sub(
        lambda m: stash(f"<{_link_url(m.group(2))}|{escape(m.group(1)).replace('|', '¦')}>"),
        text,
    )
    text = escape(text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = text.replace(_BOLD_MARK, "*")
    return re.sub("\x00(\\d+)\x00", lambda m: slots[int(m.group(1))], text)


def _link_url(url: str) -> str:
    # Inside <...> a "|" ends the URL and ">" the link: percent-encode both.
    return escape(url).replace("|", "%7C")


def _render_code(lines: Sequence[str]) -> str:
    return "```\n" + escape("\n".join(lines)) + "\n```"


def _render_text(lines: Sequence[str]) -> str:
    out: list[str] = []
    for line in lines:
        quote = _QUOTE.match(line)
        heading = _HEADING.match(line)
        bullet = _BULLET.match(line)
        if quote:
            out.append("> " + render_inline(quote.group(1)))
        elif heading:
            out.append(f"*{render_inline(heading.group(1)).replace('*', '')}*")
        elif bullet and not _RULE.fullmatch(line):
            out.append(f"{bullet.group(1)}• {render_inline(bullet.group(2))}")
        else:
            out.append(render_inline(line))
    return "\n".join(out)


def _fallback(markdown: str, limit: int) -> str:
    return escape(markdown.strip())[:limit]


SLACK_MRKDWN = Renderer(
    text=_render_text,
    code=lambda lines, _language: _render_code(lines),
    escape=escape,
    fallback=_fallback,
)
"""Slack's mrkdwn as the shared chunker renders it (a code block's language is dropped:
mrkdwn has no syntax highlighting)."""


def mrkdwn_chunks(markdown: str, limit: int = SLACK_LIMIT) -> list[str]:
    """mrkdwn chunks of at most `limit` characters, in order (at least one)."""
    return chunks(markdown, limit, SLACK_MRKDWN)


def reply_mention(user: str) -> str:
    """The one mention Habakkuk writes: the person a reply in a shared channel answers."""
    return f"<@{user}> " if re.fullmatch(r"[UW][A-Z0-9]+", user) else ""


_ANGLE = re.compile(r"<([^<>]*)>")


def plain_text(mrkdwn: str, strip_user: str = "") -> str:
    """A message's mrkdwn as plain text: mentions as @id (`strip_user`'s removed),
    links as "text (url)", channels as #name, entities unescaped."""

    def angle(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return "" if strip_user and target[1:] == strip_user else f"@{label or target[1:]}"
        if target.startswith("#"):
            return f"#{label or target[1:]}"
        if target.startswith("!"):
            return f"@{label or target[1:].split('^')[0]}"
        if label and label != target:
            return f"{label} ({target})"
        return target.removeprefix("mailto:")

    text = _ANGLE.sub(angle, mrkdwn)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", text).strip()


_FENCED = re.compile(r"```\n?(.*?)\n?```", re.DOTALL)
_MARKED = re.compile(r"(?<![\w*_~`])([*_~`])(?=\S)([^\n]*?\S)\1(?![\w*_~`])")


def mrkdwn_to_plain(mrkdwn: str) -> str:
    """What a person reads of a message the bot sent: the words without their markers."""
    text = _FENCED.sub(lambda m: m.group(1), mrkdwn)
    for _ in range(3):  # nested markers (*_both_*) come off one layer at a time
        text = _MARKED.sub(lambda m: m.group(2), text)
    return plain_text(text)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def blocks_of(text: str, buttons: list[list[Button]]) -> list[dict[str, Any]]:
    """The text and its buttons, one actions block per row (Block Kit)."""
    blocks = [section(text)]
    for r, row in enumerate(buttons):
        elements = [
            {
                "type": "button",
                "action_id": f"fy_{r}_{i}",
                "text": {"type": "plain_text", "text": b.text[:75], "emoji": True},
                "value": b.data,
            }
            for i, b in enumerate(row)
        ]
        blocks.append({"type": "actions", "block_id": f"fy_{r}", "elements": elements})
    return blocks
