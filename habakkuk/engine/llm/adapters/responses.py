"""The OpenAI Responses API through the official SDK, stateless.

Every request sends the whole conversation with `store: false` and asks for
`reasoning.encrypted_content`; reasoning items come back as ThinkingBlocks
with the item id in `signature` and the encrypted content in `encrypted`, and
are replayed as reasoning items, so the model keeps its chain of thought
without the service storing anything. Tool calls are function_call items,
their results function_call_output items. The request goes out through the SDK's
raw request path with a body encoded once (openai_raw.py says why).

Where the model has it (llm/hosted.py), the request declares the hosted
`web_search` tool; its web_search_call items come back as OpaqueBlocks,
replayed only to this kind, and the pages the answer cites (url_citation
annotations) are listed as links after it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ...config import ProviderConfig
from ..hosted import explain, hosted_web, offered, sources_note
from ..provider import Provider, ProviderError
from ..types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    OpaqueBlock,
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
from .errors import classify_code
from .openai_chat import EMPTY_RESULT, new_client
from .openai_raw import ToolsJson, encode_body, open_responses_stream
from .streaming import ClientStreamingProvider

if TYPE_CHECKING:
    from openai import AsyncOpenAI

PROVIDER = "responses"
# The hosted search tool's declaration: one object, so its encoding is cached (ToolsJson).
WEB_SEARCH_TOOL: dict[str, Any] = {"type": "web_search"}


# -- request -----------------------------------------------------------------------------


def _user_content(blocks: list[Any]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock | ContextBlock):
            if block.text:
                content.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock):
            content.append({"type": "input_image", "image_url": data_url(block), "detail": "auto"})
        elif isinstance(block, DocumentBlock):
            if is_text_media(block.media_type):
                body = read_blob(block).decode("utf-8", errors="replace")
                title = f"[{block.name}]\n" if block.name else ""
                content.append({"type": "input_text", "text": f"{title}{body}"})
            else:
                content.append(
                    {
                        "type": "input_file",
                        "filename": block.name or "document",
                        "file_data": data_url(block),
                    }
                )
    return content


def build_input(messages: list[Message]) -> list[dict[str, Any]]:
    """The `input` items for a conversation."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            for block in message.blocks:
                if isinstance(block, ToolResultBlock):
                    items.append(
                        {
                            "type": "function_call_output",
                            "call_id": block.tool_use_id,
                            "output": block.text or EMPTY_RESULT,
                        }
                    )
            content = _user_content(message.blocks)
            if content:
                items.append({"type": "message", "role": "user", "content": content})
            continue
        items.extend(_assistant_items(message))
    return items


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    """An assistant message as output items, in order (text runs become messages)."""
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "".join(text)}],
                }
            )
            text.clear()

    for block in message.blocks:
        if isinstance(block, TextBlock):
            if block.text:
                text.append(block.text)
        elif isinstance(block, ThinkingBlock):
            # Only our own encrypted reasoning can be replayed.
            if block.provider == PROVIDER and block.encrypted and block.signature:
                flush()
                summary = [{"type": "summary_text", "text": block.text}] if block.text else []
                items.append(
                    {
                        "type": "reasoning",
                        "id": block.signature,
                        "summary": summary,
                        "encrypted_content": block.encrypted,
                    }
                )
        elif isinstance(block, ToolUseBlock):
            flush()
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.tool_use_id,
                    "name": block.tool,
                    "arguments": json.dumps(block.input, ensure_ascii=False),
                }
            )
        elif isinstance(block, OpaqueBlock) and block.provider == PROVIDER:
            flush()
            items.append(dict(block.data))
    flush()
    return items


def responses_tool_key(tool: dict[str, Any]) -> tuple[str, str, object]:
    """A function tool's name, description and schema object (see ToolsJson); a hosted
    tool is known by its type and its declaration object itself."""
    if tool.get("type") != "function":
        return str(tool.get("type", "")), "", tool
    return tool["name"], tool["description"], tool["parameters"]


def build_params(request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments of `responses.create` (streamed, stateless)."""
    params: dict[str, Any] = {
        "model": request.model,
        "input": build_input(request.messages),
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": request.max_tokens,
    }
    if request.system_text:
        params["instructions"] = request.system_text
    web = hosted_web(PROVIDER, request.model, request.web)
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": False,
        }
        for t in offered(request.tools, web)
    ]
    if web.search:
        tools.append(WEB_SEARCH_TOOL)
    if tools:
        params["tools"] = tools
    if request.thinking != "off":
        params["reasoning"] = {"effort": request.thinking, "summary": "auto"}
    return params


# -- response ----------------------------------------------------------------------------


class _Assembler:
    def __init__(self, provider: str):
        self.provider = provider
        self.items: dict[int, Any] = {}
        self.call_ids: dict[str, str] = {}  # item id -> call_id
        self.usage = Usage()
        self.stop_reason: str | None = None

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "response.output_text.delta":
            return [TextDelta(event.delta)] if event.delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [ThinkingDelta(event.delta)] if event.delta else []
        if kind == "response.output_item.added":
            item = event.item
            if item.type == "function_call":
                self.call_ids[item.id or item.call_id] = item.call_id
                return [ToolCallStart(item.call_id, item.name)]
        elif kind == "response.function_call_arguments.delta":
            call_id = self.call_ids.get(event.item_id, event.item_id)
            return [ToolCallDelta(call_id, event.delta)] if event.delta else []
        elif kind == "response.output_item.done":
            self.items[event.output_index] = event.item
        elif kind in ("response.completed", "response.incomplete"):
            self._finish(event.response, incomplete=kind == "response.incomplete")
            # The pages the answer cited, as links after it (streamed like the text).
            note = self._sources()
            return [TextDelta(note)] if note else []
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            code = getattr(error, "code", None)
            message = getattr(error, "message", None) or "the response failed"
            raise ProviderError(classify_code(code, message), message, provider=self.provider)
        elif kind == "error":
            message = getattr(event, "message", "") or "stream error"
            error_class = classify_code(getattr(event, "code", None), message)
            raise ProviderError(error_class, message, provider=self.provider)
        return []

    def _finish(self, response: Any, incomplete: bool) -> None:
        usage = getattr(response, "usage", None)
        if usage is not None:
            details = getattr(usage, "input_tokens_details", None)
            cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
            written = (getattr(details, "cache_write_tokens", 0) or 0) if details is not None else 0
            self.usage = Usage(
                input_tokens=max(0, (usage.input_tokens or 0) - cached - written),
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=cached,
                cache_write_tokens=written,
            )
        # The final object is authoritative for the output items.
        for index, item in enumerate(getattr(response, "output", None) or []):
            self.items[index] = item
        if incomplete:
            details = getattr(response, "incomplete_details", None)
            reason = getattr(details, "reason", None) or "incomplete"
            self.stop_reason = "max_tokens" if reason == "max_output_tokens" else str(reason)
        else:
            self.stop_reason = "end_turn"
        # Each hosted search call is billed apart from the tokens.
        self.usage.web_search_requests = sum(
            1 for item in self.items.values() if item.type == "web_search_call"
        )

    def _sources(self) -> str:
        """The "Sources:" note of the url_citation annotations of the output ("" for none)."""
        cited: list[tuple[str, str]] = []
        for index in sorted(self.items):
            item = self.items[index]
            if item.type != "message":
                continue
            for part in item.content:
                for note in getattr(part, "annotations", None) or ():
                    if getattr(note, "type", "") == "url_citation":
                        cited.append((note.url or "", getattr(note, "title", "") or ""))
        return sources_note(cited)

    def done(self) -> StreamDone:
        if self.stop_reason is None:
            raise ProviderError(
                "network", "the stream ended before the response completed", provider=self.provider
            )
        blocks: list[Any] = []
        for index in sorted(self.items):
            item = self.items[index]
            kind = item.type
            if kind == "reasoning":
                summary = "\n\n".join(s.text for s in (item.summary or []))
                if not summary and getattr(item, "content", None):
                    summary = "\n\n".join(getattr(c, "text", "") for c in item.content)
                blocks.append(
                    ThinkingBlock(
                        summary,
                        signature=item.id or "",
                        encrypted=item.encrypted_content or "",
                        provider=PROVIDER,
                    )
                )
            elif kind == "message":
                text = "".join(
                    getattr(part, "text", None) or getattr(part, "refusal", None) or ""
                    for part in item.content
                )
                if text:
                    blocks.append(TextBlock(text))
            elif kind == "function_call":
                arguments = parse_arguments(item.arguments)
                blocks.append(ToolUseBlock(item.call_id, item.name, arguments))
            else:
                raw = item.model_dump(mode="json", exclude_none=True)
                blocks.append(OpaqueBlock(PROVIDER, raw))
        note = self._sources()
        if note:
            blocks.append(TextBlock(note))
        stop = self.stop_reason
        if stop == "end_turn" and any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        return StreamDone(Message("assistant", blocks), self.usage, stop)


class ResponsesProvider(ClientStreamingProvider["AsyncOpenAI"]):
    """The `responses` adapter."""

    def __init__(self, config: ProviderConfig):
        super().__init__(config, PROVIDER, new_client)
        self.tools_json = ToolsJson(responses_tool_key)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `responses.create`."""
        return build_params(request)

    def open_stream(self, prepared: AsyncOpenAI, params: dict[str, Any]) -> Awaitable[Any]:
        """One streamed Responses call."""
        return open_responses_stream(prepared, encode_body(params, self.tools_json))

    def assembler(self) -> _Assembler:
        """The Responses event mapping."""
        return _Assembler(self.name)

    def explain(self, error: ProviderError, request: ModelRequest) -> ProviderError:
        """A refusal of the hosted web search says how to turn it off."""
        return explain(error, hosted_web(PROVIDER, request.model, request.web))


def create(provider_config: ProviderConfig) -> Provider:
    """The adapter for one `type: responses` provider."""
    provider: Provider = ResponsesProvider(provider_config)
    return provider
