"""Transcript export: Markdown, JSON (the shape of GET /api/sessions/{id}) and HTML."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any, Literal

from .llm.types import (
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from .sessions import Compaction, Session, StoredMessage

Format = Literal["md", "json", "html"]
TEXT_CUT = 20_000


def rfc3339(timestamp: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def session_json(session: Session) -> dict[str, Any]:
    return {
        "id": session.id,
        "agent": session.agent,
        "title": session.title,
        "created_at": rfc3339(session.created_at),
        "updated_at": rfc3339(session.updated_at),
    }


def _api_block(raw: dict[str, Any]) -> dict[str, Any]:
    """A stored block as the API shows it: long text cut and marked."""
    block = dict(raw)
    for key in ("text",):
        value = block.get(key)
        if isinstance(value, str) and len(value) > TEXT_CUT:
            block[key] = value[:TEXT_CUT]
            block["cut"] = True
    return block


def keep_from(messages: list[StoredMessage], compaction: Compaction) -> int:
    """The index in `messages` of the first message the compaction kept verbatim."""
    return next(
        (i for i, m in enumerate(messages) if m.seq >= compaction.first_kept_seq), len(messages)
    )


def transcript_json(
    session: Session, messages: list[StoredMessage], compaction: Compaction | None = None
) -> dict[str, Any]:
    """{"session", "messages": [{seq, role, model, blocks}]} with blocks as stored, and
    "compaction": {"keep_from", "summary"} when older messages were summarized."""
    body: dict[str, Any] = {
        "session": session_json(session),
        "messages": [
            {
                "seq": m.seq,
                "role": m.role,
                "model": m.message.model,
                "blocks": [_api_block(b) for b in m.raw_blocks],
            }
            for m in messages
        ],
    }
    if compaction is not None:
        body["compaction"] = {
            "keep_from": keep_from(messages, compaction),
            "summary": compaction.summary,
        }
    return body


def _markdown_block(block: object) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return "> *thinking:* " + block.text.replace("\n", "\n> ")
    if isinstance(block, ToolUseBlock):
        args = json.dumps(block.input, ensure_ascii=False, indent=2)
        return f"**tool call** `{block.tool}` ({block.tool_use_id})\n\n```json\n{args}\n```"
    if isinstance(block, ToolResultBlock):
        label = "tool error" if block.is_error else "tool result"
        return f"**{label}** ({block.tool_use_id})\n\n```\n{block.text}\n```"
    if isinstance(block, (ImageBlock, DocumentBlock)):
        return f"*[{block.type}: {block.name or block.media_type}]*"
    return f"*[{getattr(block, 'type', 'block')}]*"


COMPACTED_NOTE = (
    "Context compacted here: the model is sent a summary of the messages above, "
    "then the messages from here on."
)


def transcript_markdown(
    session: Session, messages: list[StoredMessage], compaction: Compaction | None = None
) -> str:
    cut = keep_from(messages, compaction) if compaction is not None else -1
    lines = [
        f"# {session.title or session.id}",
        "",
        f"- session: `{session.id}`",
        f"- agent: {session.agent}",
        f"- created: {rfc3339(session.created_at)}",
        "",
    ]
    for index, m in enumerate(messages):
        if index == cut:
            lines += ["---", "", f"*{COMPACTED_NOTE}*", "", "---", ""]
        who = "User" if m.role == "user" else f"Assistant ({m.message.model})".replace(" ()", "")
        lines += [f"## {who} · #{m.seq}", ""]
        lines += [_markdown_block(b) + "\n" for b in m.message.blocks]
    if cut == len(messages):
        lines += ["---", "", f"*{COMPACTED_NOTE}*", ""]
    return "\n".join(lines).rstrip() + "\n"


def transcript_html(
    session: Session, messages: list[StoredMessage], compaction: Compaction | None = None
) -> str:
    """A self-contained, script-free page; every piece of text is escaped."""
    esc = html.escape
    cut = keep_from(messages, compaction) if compaction is not None else -1
    note = ""
    if compaction is not None:
        note = (
            f"<div class='compacted'><p><em>{esc(COMPACTED_NOTE)}</em></p>"
            f"<details><summary>Summary</summary><pre>{esc(compaction.summary)}</pre>"
            "</details></div>"
        )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{esc(session.title or session.id)}</title>",
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;"
        "padding:0 1rem}.m{border-left:3px solid #999;padding:.2rem 1rem;margin:1rem 0}"
        ".user{border-color:#2a7ae2}.assistant{border-color:#3a3}"
        "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem;overflow:auto}"
        ".err{color:#b00}.think{color:#777;font-style:italic}"
        ".compacted{border-top:1px dashed #999;border-bottom:1px dashed #999;margin:1rem 0}"
        "</style></head><body>",
        f"<h1>{esc(session.title or session.id)}</h1>",
        f"<p>session <code>{esc(session.id)}</code> · agent {esc(session.agent)} · "
        f"{esc(rfc3339(session.created_at))}</p>",
    ]
    for index, m in enumerate(messages):
        if index == cut:
            parts.append(note)
        parts.append(f"<div class='m {esc(m.role)}'><h3>{esc(m.role)} #{m.seq}</h3>")
        for block in m.message.blocks:
            if isinstance(block, TextBlock):
                parts.append(f"<pre>{esc(block.text)}</pre>")
            elif isinstance(block, ThinkingBlock):
                parts.append(f"<pre class='think'>{esc(block.text)}</pre>")
            elif isinstance(block, ToolUseBlock):
                args = json.dumps(block.input, ensure_ascii=False, indent=2)
                parts.append(
                    f"<p>tool call <code>{esc(block.tool)}</code></p><pre>{esc(args)}</pre>"
                )
            elif isinstance(block, ToolResultBlock):
                cls = " class='err'" if block.is_error else ""
                parts.append(f"<pre{cls}>{esc(block.text)}</pre>")
            else:
                parts.append(f"<p><em>[{esc(str(getattr(block, 'type', 'block')))}]</em></p>")
        parts.append("</div>")
    if cut == len(messages):
        parts.append(note)
    parts.append("</body></html>\n")
    return "\n".join(parts)


def export_transcript(
    session: Session,
    messages: list[StoredMessage],
    fmt: Format,
    compaction: Compaction | None = None,
) -> str:
    """The transcript in one of the export formats (`compaction`: the session's latest)."""
    if fmt == "json":
        body = transcript_json(session, messages, compaction)
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n"
    if fmt == "html":
        return transcript_html(session, messages, compaction)
    return transcript_markdown(session, messages, compaction)
