"""Gemini's streamed answer: the server-sent events and what they build.

`streamGenerateContent?alt=sse` sends one GenerateContentResponse JSON per
`data:` event. Each carries the next parts of the first candidate (text,
thought summaries with `thought: true`, whole functionCall parts), a
cumulative `usageMetadata`, and at the end a `finishReason`. Any part may
carry a `thoughtSignature`; it is kept on the block the part becomes, so the
next request replays it exactly (gemini.py). An `error` object may arrive
inside the stream too; it is mapped like an HTTP error.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from ..provider import ProviderError
from ..types import (
    Block,
    Message,
    OpaqueBlock,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolUseBlock,
    Usage,
)
from .gemini_errors import error_object, provider_error

PROVIDER = "gemini"
FINISH_REASONS = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
    "IMAGE_PROHIBITED_CONTENT": "refusal",
    "LANGUAGE": "refusal",
    "MALFORMED_FUNCTION_CALL": "malformed_tool_call",
    "UNEXPECTED_TOOL_CALL": "malformed_tool_call",
    "TOO_MANY_TOOL_CALLS": "malformed_tool_call",
}


async def sse_events(response: Any, provider: str) -> AsyncGenerator[Any, None]:
    """The JSON of each `data:` event of an aiohttp response, as it arrives.

    Lines are split by hand rather than with the reader's readline: one event can
    be megabytes (an image the model drew), past aiohttp's line limit. A
    connection cut mid-body is a network error.
    """
    import aiohttp

    pending: list[bytes] = []  # the pieces of an unfinished line (joined once it ends)
    data: list[bytes] = []
    try:
        async for chunk in response.content.iter_any():
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            *lines, rest = b"".join((*pending, chunk)).split(b"\n")
            pending = [rest]
            for line in lines:
                event = _line(line.rstrip(b"\r"), data)
                if event is not None:
                    yield _parse(event, provider)
    except aiohttp.ClientError as exc:
        raise ProviderError("network", f"the stream broke: {exc}", provider=provider) from exc
    tail = _line(b"".join(pending).rstrip(b"\r"), data)
    if tail is None and data:
        tail = b"\n".join(data)
    if tail is not None:
        yield _parse(tail, provider)


def _line(line: bytes, data: list[bytes]) -> bytes | None:
    """Take one SSE line; the event's data when a blank line ends it."""
    if not line:
        if not data:
            return None
        event = b"\n".join(data)
        data.clear()
        return event
    if line.startswith(b"data:"):
        value = line[5:]
        data.append(value[1:] if value.startswith(b" ") else value)
    return None  # comments, `event:`, `id:` and `retry:` lines say nothing here


def _parse(event: bytes, provider: str) -> Any:
    try:
        return json.loads(event)
    except ValueError:
        text = event[:200].decode("utf-8", "replace")
        raise ProviderError(
            "server", f"unreadable stream event: {text}", provider=provider
        ) from None


def new_call_id() -> str:
    """An id for a call (the Gemini API gives its calls none)."""
    return f"gemini_{uuid.uuid4().hex[:24]}"


class GeminiAssembler:
    """Streamed GenerateContentResponses in, deltas out, the message at the end."""

    def __init__(self, provider: str):
        self.provider = provider
        self.blocks: list[Block] = []
        self.usage = Usage()
        self.finish: str | None = None

    def feed(self, chunk: Any) -> list[StreamEvent]:
        """The deltas of one GenerateContentResponse, in order."""
        if not isinstance(chunk, dict):
            return []
        error = error_object(chunk)
        if error is not None:
            raise provider_error(None, chunk, self.provider)
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            self.usage = usage_of(usage)
        events: list[StreamEvent] = []
        candidates = chunk.get("candidates") or []
        candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
        content = candidate.get("content") or {}
        for part in content.get("parts") or []:
            if isinstance(part, dict):
                events.extend(self._part(part))
        finish = candidate.get("finishReason")
        if finish:
            self.finish = str(finish)
        feedback = chunk.get("promptFeedback") or {}
        if not candidates and feedback.get("blockReason"):
            self.finish = "SAFETY"  # the prompt itself was blocked: no candidate comes
        return events

    def _part(self, part: dict[str, Any]) -> list[StreamEvent]:
        signature = str(part.get("thoughtSignature") or "")
        last = self.blocks[-1] if self.blocks else None
        if "functionCall" in part:
            call = part["functionCall"] or {}
            name = str(call.get("name") or "")
            args = call.get("args")
            args = args if isinstance(args, dict) else {}
            call_id = str(call.get("id") or "") or new_call_id()
            self.blocks.append(ToolUseBlock(call_id, name, args, signature=signature))
            arguments = json.dumps(args, ensure_ascii=False)
            return [ToolCallStart(call_id, name), ToolCallDelta(call_id, arguments)]
        if "text" in part and part.get("thought"):
            text = str(part["text"] or "")
            if isinstance(last, ThinkingBlock) and not last.signature:
                last.text += text
                last.signature = signature
            else:
                self.blocks.append(ThinkingBlock(text, signature=signature, provider=PROVIDER))
            return [ThinkingDelta(text)] if text else []
        if "text" in part:
            text = str(part["text"] or "")
            # Consecutive pieces are one block; a signature closes it (the stream may
            # send it on a last, empty piece).
            if isinstance(last, TextBlock) and not last.signature:
                last.text += text
                last.signature = signature
            else:
                self.blocks.append(TextBlock(text, signature=signature))
            return [TextDelta(text)] if text else []
        # Parts we do not read (code execution, an image the model drew): replayed as is.
        self.blocks.append(OpaqueBlock(PROVIDER, dict(part)))
        return []

    def done(self) -> StreamDone:
        """The final event; a stream that never said why it stopped was cut."""
        if self.finish is None:
            raise ProviderError(
                "network", "the stream ended without a finish reason", provider=self.provider
            )
        blocks = [b for b in self.blocks if not _empty(b)]
        stop = FINISH_REASONS.get(self.finish, self.finish.lower())
        if stop == "end_turn" and any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        return StreamDone(Message("assistant", blocks), self.usage, stop)


def _empty(block: Block) -> bool:
    """A text block of no words and no signature (a stream's closing piece)."""
    return isinstance(block, TextBlock) and not block.text and not block.signature


def usage_of(meta: dict[str, Any]) -> Usage:
    """Our usage of a `usageMetadata`: the prompt count includes the cached tokens, and
    the thoughts are billed as output."""

    def count(name: str) -> int:
        value = meta.get(name)
        return value if isinstance(value, int) and value > 0 else 0

    cached = count("cachedContentTokenCount")
    prompt = count("promptTokenCount") + count("toolUsePromptTokenCount")
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=count("candidatesTokenCount") + count("thoughtsTokenCount"),
        cache_read_tokens=cached,
    )
