"""Transcript export: Markdown, JSON (the shape of GET /api/sessions/{id}) and HTML.

Each shows the user's words, not the notes Habakkuk sends the model with them
(the time, the todo list): those context blocks are shown by type only in JSON
and left out of Markdown and HTML. A /v1 client's system messages are shown. The
provider's hosted web tool blocks show as placeholders ("[web search: QUERY]").
Exports written to disk go under HOME/exports/ unless a path is given.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from .agent.guidance import KIND_PREFIX as GUIDANCE_KIND
from .errors import HabakkukError
from .home import ensure_private_dir
from .llm.hosted import describe
from .llm.types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from .sessions import Compaction, Session, StoredMessage

Format = Literal["md", "json", "html"]
EXPORT_FORMATS: tuple[Format, ...] = get_args(Format)
FORMATS: tuple[str, ...] = ("md", "json", "html")
TEXT_CUT = 20_000
# The context a reader of the transcript is shown: what a client sent, unlike the
# notes Habakkuk adds to each turn.
SHOWN_CONTEXT = ("client",)


def shown_context(kind: str, text: str) -> bool:
    """Whether a reader is shown a context block: what a client sent, and the user's own
    /steer guidance (a follow-up turn's empty marks of it aside)."""
    return kind in SHOWN_CONTEXT or (kind.startswith(GUIDANCE_KIND) and bool(text))


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
    """A stored block as the API shows it: long text cut and marked; a note Habakkuk
    sent with the user's words (the time, the todo list) by type only; a hosted web
    tool's block as its placeholder (its data is the provider's, kept for replay: a
    fetched page, encrypted search results)."""
    if raw.get("type") == "context" and not shown_context(
        str(raw.get("kind", "")), str(raw.get("text", ""))
    ):
        return {"type": "context", "kind": str(raw.get("kind", ""))}
    if raw.get("type") == "opaque":
        data = raw.get("data")
        hosted = OpaqueBlock(str(raw.get("provider", "")), data if isinstance(data, dict) else {})
        return {"type": "opaque", "provider": hosted.provider, "text": describe(hosted)}
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


def _tool_names(messages: list[StoredMessage]) -> dict[str, str]:
    """tool_use_id -> the tool's name, for labelling results."""
    return {
        call.tool_use_id: call.tool
        for m in messages
        if m.role == "assistant"
        for call in m.message.tool_uses
    }


def _shown(block: object) -> bool:
    """Whether an export shows the block (not a note Habakkuk added to the turn)."""
    if isinstance(block, OpaqueBlock):
        return bool(describe(block))  # a hosted tool's block, not the pause mark
    return not isinstance(block, ContextBlock) or shown_context(block.kind, block.text)


def _speaker(m: StoredMessage, tools: dict[str, str]) -> str:
    """Who a message is from: User, Assistant (model), or the tool results it carries."""
    if m.role == "assistant":
        return f"Assistant ({m.message.model})".replace(" ()", "")
    results = m.message.tool_results
    if results and not any(isinstance(b, TextBlock) and b.text.strip() for b in m.message.blocks):
        names = ", ".join(dict.fromkeys(tools.get(r.tool_use_id, "tool") for r in results))
        return f"Tool result{'s' if len(results) > 1 else ''} · {names}"
    return "User"


def _markdown_block(block: object, tools: dict[str, str]) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ContextBlock):
        return "> " + block.text.replace("\n", "\n> ")
    if isinstance(block, ThinkingBlock):
        return "> *thinking:* " + block.text.replace("\n", "\n> ")
    if isinstance(block, ToolUseBlock):
        args = json.dumps(block.input, ensure_ascii=False, indent=2)
        fence = _fence(args)
        return f"**tool call** `{block.tool}` ({block.tool_use_id})\n\n{fence}json\n{args}\n{fence}"
    if isinstance(block, ToolResultBlock):
        label = "tool error" if block.is_error else "tool result"
        tool = tools.get(block.tool_use_id, "")
        name = f" `{tool}`" if tool else ""
        fence = _fence(block.text)
        return f"**{label}**{name} ({block.tool_use_id})\n\n{fence}\n{block.text}\n{fence}"
    if isinstance(block, (ImageBlock, DocumentBlock)):
        return f"*[{block.type}: {block.name or block.media_type}]*"
    if isinstance(block, OpaqueBlock):
        return f"*{describe(block)}*"
    return f"*[{getattr(block, 'type', 'block')}]*"


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in `text`, so it cannot close early."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


COMPACTED_NOTE = (
    "Context compacted here: the model is sent a summary of the messages above, "
    "then the messages from here on."
)


def transcript_markdown(
    session: Session, messages: list[StoredMessage], compaction: Compaction | None = None
) -> str:
    cut = keep_from(messages, compaction) if compaction is not None else -1
    tools = _tool_names(messages)
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
        lines += [f"## {_speaker(m, tools)} · #{m.seq}", ""]
        lines += [_markdown_block(b, tools) + "\n" for b in m.message.blocks if _shown(b)]
    if cut == len(messages):
        lines += ["---", "", f"*{COMPACTED_NOTE}*", ""]
    return "\n".join(lines).rstrip() + "\n"


def _markdown_renderer() -> Any:
    """CommonMark with tables and strikethrough. Raw HTML in a message is escaped, not
    passed through, and images are not loaded, so the page stays script-free and
    self-contained; markdown-it refuses javascript:, vbscript: and data: links."""
    from markdown_it import MarkdownIt

    return (
        MarkdownIt("commonmark", {"html": False})
        .enable(["table", "strikethrough"])
        .disable("image")
    )


def transcript_html(
    session: Session, messages: list[StoredMessage], compaction: Compaction | None = None
) -> str:
    """A self-contained, script-free page: messages' Markdown rendered, everything else
    (and any HTML inside the Markdown) escaped."""
    esc = html.escape
    render = _markdown_renderer().render
    tools = _tool_names(messages)
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
        ".err{color:#b00}.think{color:#777;font-style:italic}.tool{border-color:#c80}"
        ".context{color:#555;border-left:2px solid #ccc;padding-left:.7rem}"
        "code{background:#f4f4f4}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2rem .5rem}"
        ".compacted{border-top:1px dashed #999;border-bottom:1px dashed #999;margin:1rem 0}"
        "</style></head><body>",
        f"<h1>{esc(session.title or session.id)}</h1>",
        f"<p>session <code>{esc(session.id)}</code> · agent {esc(session.agent)} · "
        f"{esc(rfc3339(session.created_at))}</p>",
    ]
    for index, m in enumerate(messages):
        if index == cut:
            parts.append(note)
        who = _speaker(m, tools)
        cls = "tool" if who.startswith("Tool result") else m.role
        parts.append(f"<div class='m {esc(cls)}'><h3>{esc(who)} · #{m.seq}</h3>")
        for block in m.message.blocks:
            if not _shown(block):
                continue
            if isinstance(block, TextBlock):
                parts.append(render(block.text))
            elif isinstance(block, ContextBlock):
                parts.append(f"<div class='context'>{render(block.text)}</div>")
            elif isinstance(block, ThinkingBlock):
                parts.append(f"<pre class='think'>{esc(block.text)}</pre>")
            elif isinstance(block, ToolUseBlock):
                args = json.dumps(block.input, ensure_ascii=False, indent=2)
                parts.append(
                    f"<p>tool call <code>{esc(block.tool)}</code></p><pre>{esc(args)}</pre>"
                )
            elif isinstance(block, ToolResultBlock):
                err = " class='err'" if block.is_error else ""
                tool = tools.get(block.tool_use_id, "")
                label = ("tool error" if block.is_error else "tool result") + (
                    f" <code>{esc(tool)}</code>" if tool else ""
                )
                parts.append(f"<p>{label}</p><pre{err}>{esc(block.text)}</pre>")
            elif isinstance(block, OpaqueBlock):
                parts.append(f"<p><em>{esc(describe(block))}</em></p>")
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


def export_path(home: Path, session_id: str, fmt: str) -> Path:
    """Where an export goes when no path is given: HOME/exports/<session>.<fmt>."""
    return home / "exports" / f"{session_id}.{fmt}"


def save_export(
    home: Path, session_id: str, fmt: str, text: str, given: str | Path | None = None
) -> Path:
    """Write an export and return where it went: to `given` (~ expanded; relative to the
    current folder), else HOME/exports/<session>.<fmt> (a private folder, as transcripts
    are). Missing folders are created. HabakkukError, one line naming the path, when the
    file cannot be written (a file where a folder should be, no permission)."""
    default = given is None or not str(given).strip()
    path = export_path(home, session_id, fmt) if default else Path(str(given)).expanduser()
    try:
        if default:
            ensure_private_dir(path.parent)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.filename and str(exc.filename) != str(path):
            reason = f"{exc.filename}: {reason}"
        raise HabakkukError.said("errors.sessions.cannot_write", path=path, reason=reason) from None
    return path
