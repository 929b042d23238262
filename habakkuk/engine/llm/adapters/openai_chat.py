"""OpenAI Chat Completions through the official SDK: OpenAI and any compatible server.

Strict servers reject `tool_calls: []` and `content: null`, so neither is
ever sent. Tool results become role "tool" messages right after the assistant
message that asked for them. Streamed tool-call pieces are assembled by their
index; usage comes from the extra chunk `stream_options.include_usage` asks for.
The conversion and the stream assembly are shared with the litellm adapter.
The request goes out through the SDK's raw request path with a body encoded once
(openai_raw.py says why).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ...config import ProviderConfig
from ..provider import Provider, ProviderError
from ..types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from . import (
    data_url,
    is_text_media,
    parse_arguments,
    read_blob,
)
from .lazy_types import defer_type_packages
from .openai_raw import ToolsJson, encode_body, open_chat_stream
from .sdk_http import sdk_http_client
from .streaming import ClientStreamingProvider

if TYPE_CHECKING:
    from openai import AsyncOpenAI

FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
TIMEOUT_SECONDS = 600.0
EMPTY_RESULT = "(no output)"


def new_client(base_url: str | None, api_key: str) -> AsyncOpenAI:
    """An AsyncOpenAI client without SDK retries (the router retries).

    Its HTTP goes through the SDK's own aiohttp client in a serving process, httpx2's in
    a one-shot run (sdk_http.py says why): the SDK raises the same exception types
    either way, so errors.classify sees no difference.
    """
    defer_type_packages()  # a call needs few of the SDK's types (lazy_types.py)
    import openai

    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=TIMEOUT_SECONDS,
        http_client=sdk_http_client(TIMEOUT_SECONDS),
    )


# -- request -----------------------------------------------------------------------------


def _user_parts(blocks: list[Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock | ContextBlock):
            if block.text:
                parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append({"type": "image_url", "image_url": {"url": data_url(block)}})
        elif isinstance(block, DocumentBlock):
            if is_text_media(block.media_type):
                body = read_blob(block).decode("utf-8", errors="replace")
                title = f"[{block.name}]\n" if block.name else ""
                parts.append({"type": "text", "text": f"{title}{body}"})
            else:
                file: dict[str, Any] = {"file_data": data_url(block)}
                file["filename"] = block.name or "document"
                parts.append({"type": "file", "file": file})
    return parts


def _user_messages(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, ToolResultBlock):
            text = block.text or EMPTY_RESULT
            if block.is_error and not text.lower().startswith("error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": text})
    parts = _user_parts(message.blocks)
    if parts:
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _assistant_message(message: Message) -> dict[str, Any] | None:
    text = "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
    calls = [
        {
            "id": b.tool_use_id,
            "type": "function",
            "function": {"name": b.tool, "arguments": _dumps(b.input)},
        }
        for b in message.blocks
        if isinstance(b, ToolUseBlock)
    ]
    if not text and not calls:
        return None
    # Content is always a string (never null); tool_calls only when there are some.
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = calls
    return out


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def build_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Chat Completions messages for a conversation."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "user":
            out.extend(_user_messages(message))
        else:
            converted = _assistant_message(message)
            if converted is not None:
                out.append(converted)
    return out


def build_tools(request: ModelRequest) -> list[dict[str, Any]]:
    """The function tools (empty when the request has none: then none are sent)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in request.tools
    ]


def chat_tool_key(tool: dict[str, Any]) -> tuple[str, str, object]:
    """A function tool's name, description and schema object (see ToolsJson)."""
    function = tool["function"]
    return function["name"], function["description"], function["parameters"]


def build_params(request: ModelRequest, *, official: bool) -> dict[str, Any]:
    """Keyword arguments of `chat.completions.create` (with stream and usage on)."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": build_messages(request.system_text, request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tools = build_tools(request)
    if tools:
        params["tools"] = tools
    # OpenAI's reasoning models reject max_tokens; most compatible servers only know it.
    params["max_completion_tokens" if official else "max_tokens"] = request.max_tokens
    if request.thinking != "off":
        params["reasoning_effort"] = request.thinking
    return params


# -- response ----------------------------------------------------------------------------


def _field(value: Any, name: str) -> Any:
    """A field of a chunk or of a part of one: a key of the plain JSON the openai
    adapter streams, an attribute of the objects litellm yields."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _reasoning(delta: Any) -> Any:
    """The non-standard reasoning text reasoning servers (DeepSeek, vLLM, OpenRouter) add."""
    if isinstance(delta, dict):
        return delta.get("reasoning_content") or delta.get("reasoning")
    extra = getattr(delta, "model_extra", None) or {}
    return (
        getattr(delta, "reasoning_content", None)
        or extra.get("reasoning_content")
        or extra.get("reasoning")
    )


class ChatAssembler:
    """Turns Chat Completions chunks into deltas and the final message.

    A chunk is the JSON object the server sent (the openai adapter) or litellm's
    object of the same shape.
    """

    def __init__(self, provider: str, kind: str = "openai"):
        self.provider = provider
        self.kind = kind  # the adapter type, recorded on thinking blocks
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.finish: str | None = None
        self.saw_usage = False

    def feed(self, chunk: Any) -> list[StreamEvent]:
        """The deltas in one chunk, in order."""
        events: list[StreamEvent] = []
        usage = _field(chunk, "usage")
        if usage is not None:
            self._take_usage(usage)
        for choice in _field(chunk, "choices") or []:
            delta = _field(choice, "delta")
            if delta is not None:
                events.extend(self._delta(delta))
            finish = _field(choice, "finish_reason")
            if finish:
                self.finish = finish
        return events

    def _delta(self, delta: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        reasoning = _reasoning(delta)
        if isinstance(reasoning, str) and reasoning:
            self.thinking.append(reasoning)
            events.append(ThinkingDelta(reasoning))
        content = _field(delta, "content")
        if content:
            self.text.append(content)
            events.append(TextDelta(content))
        for piece in _field(delta, "tool_calls") or []:
            index = _field(piece, "index")
            if index is None:
                index = len(self.calls)
            call = self.calls.get(index)
            if call is None:
                call = {"id": "", "name": "", "arguments": "", "started": False, "pending": []}
                self.calls[index] = call
            piece_id = _field(piece, "id")
            if piece_id:
                call["id"] = piece_id
            function = _field(piece, "function")
            name = _field(function, "name") if function is not None else None
            if name and not call["started"]:
                call["name"] = name
            arguments = _field(function, "arguments") if function is not None else None
            if not call["started"] and call["name"]:
                call["id"] = call["id"] or f"call_{index}"
                call["started"] = True
                events.append(ToolCallStart(call["id"], call["name"]))
                for pending in call["pending"]:
                    events.append(ToolCallDelta(call["id"], pending))
                call["pending"] = []
            if arguments:
                call["arguments"] += arguments
                if call["started"]:
                    events.append(ToolCallDelta(call["id"], arguments))
                else:
                    call["pending"].append(arguments)
        return events

    def _take_usage(self, usage: Any) -> None:
        prompt = _field(usage, "prompt_tokens") or 0
        details = _field(usage, "prompt_tokens_details")
        cached = (_field(details, "cached_tokens") or 0) if details is not None else 0
        written = (_field(details, "cache_write_tokens") or 0) if details is not None else 0
        self.usage = Usage(
            input_tokens=max(0, prompt - cached - written),
            output_tokens=_field(usage, "completion_tokens") or 0,
            cache_read_tokens=cached,
            cache_write_tokens=written,
        )
        self.saw_usage = True

    def done(self) -> StreamDone:
        """The final event; a stream that never said why it stopped was cut."""
        if self.finish is None:
            raise ProviderError(
                "network", "the stream ended without a finish reason", provider=self.provider
            )
        blocks: list[Any] = []
        if self.thinking:
            blocks.append(ThinkingBlock("".join(self.thinking), provider=self.kind))
        text = "".join(self.text)
        if text:
            blocks.append(TextBlock(text))
        for index in sorted(self.calls):
            call = self.calls[index]
            if not call["name"]:
                continue
            blocks.append(
                ToolUseBlock(
                    call["id"] or f"call_{index}", call["name"], parse_arguments(call["arguments"])
                )
            )
        stop = FINISH_REASONS.get(self.finish, self.finish)
        if stop == "end_turn" and any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"  # some servers say "stop" after calling tools
        return StreamDone(Message("assistant", blocks), self.usage, stop)


def is_official(base_url: str | None) -> bool:
    """Whether requests go to OpenAI itself (the default URL or api.openai.com)."""
    return base_url is None or "api.openai.com" in base_url


class OpenAIChatProvider(ClientStreamingProvider["AsyncOpenAI"]):
    """The `openai` adapter (Chat Completions)."""

    def __init__(self, config: ProviderConfig):
        super().__init__(config, "openai", new_client)
        self.official = is_official(config.base_url)
        self.tools_json = ToolsJson(chat_tool_key)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create`."""
        return build_params(request, official=self.official)

    def open_stream(self, prepared: AsyncOpenAI, params: dict[str, Any]) -> Awaitable[Any]:
        """One streamed Chat Completions call."""
        return open_chat_stream(prepared, encode_body(params, self.tools_json))

    def assembler(self) -> ChatAssembler:
        """The Chat Completions chunk mapping."""
        return ChatAssembler(self.name)


def create(provider_config: ProviderConfig) -> Provider:
    """The adapter for one `type: openai` provider."""
    provider: Provider = OpenAIChatProvider(provider_config)
    return provider
