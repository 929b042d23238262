"""Anthropic Messages through the official SDK, streamed.

Thinking blocks keep their signature and are replayed as the API requires
(redacted ones as `redacted_thinking`, their data kept in `signature`).
Cache-control breakpoints sit on the system prompt, the last tool, and the
last block of the last two user turns, so the cached prefix only ever grows. A session's
persona is a second system block after the frozen prompt's breakpoint.
Images and documents are sent base64 from their blobs.

Where the model has them (llm/hosted.py), the request declares Anthropic's
hosted web search and fetch (server tools); their server_tool_use and result
blocks come back as OpaqueBlocks and are replayed only to this kind. The web
pages the text cites are listed as links after it (a "Sources:" note).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ...config import ProviderConfig
from ..computer_use import computer_version
from ..hosted import (
    FETCH_MAX_CONTENT_TOKENS,
    FETCH_NAME,
    MAX_USES,
    PAUSE_STOP,
    SEARCH_NAME,
    HostedWeb,
    explain,
    hosted_web,
    offered,
    sources_note,
)
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
from . import blob_base64, is_text_media, parse_arguments
from .anthropic_computer import NativeCalls, declaration, stored_input
from .streaming import ClientStreamingProvider

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

PROVIDER = "anthropic"
EPHEMERAL = {"type": "ephemeral"}
# Token budgets for the thinking levels (the API wants budget < max_tokens).
THINKING_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
STOP_REASONS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}
# The server tools' versions (GA in the Messages API: no beta header).
WEB_SEARCH_TYPE = "web_search_20250305"
WEB_FETCH_TYPE = "web_fetch_20250910"
# Requests can run long (big outputs); connect fails fast, reads may wait.
TIMEOUT_SECONDS = 600.0


def _new_client(base_url: str | None, api_key: str) -> AsyncAnthropic:
    import anthropic

    return anthropic.AsyncAnthropic(
        api_key=api_key, base_url=base_url, max_retries=0, timeout=TIMEOUT_SECONDS
    )


# -- request -----------------------------------------------------------------------------


def _media_block(block: ImageBlock | DocumentBlock) -> dict[str, Any]:
    if isinstance(block, ImageBlock):
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": block.media_type,
                "data": blob_base64(block),
            },
        }
    if is_text_media(block.media_type):
        from . import read_blob

        text = read_blob(block).decode("utf-8", errors="replace")
        source: dict[str, Any] = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        source = {"type": "base64", "media_type": block.media_type, "data": blob_base64(block)}
    converted: dict[str, Any] = {"type": "document", "source": source}
    if block.name:
        converted["title"] = block.name
    return converted


def _content(message: Message, native: NativeCalls) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    native.start(message)
    for block in message.blocks:
        if isinstance(block, TextBlock | ContextBlock):
            if block.text:
                content.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingBlock):
            # Only our own signed thinking can be replayed; other providers' is dropped.
            if block.provider not in ("", PROVIDER) or not block.signature:
                continue
            if block.redacted:
                content.append({"type": "redacted_thinking", "data": block.signature})
            else:
                content.append(
                    {"type": "thinking", "thinking": block.text, "signature": block.signature}
                )
        elif isinstance(block, ToolUseBlock) and native.is_native(block):
            content.append(native.call(block))
        elif isinstance(block, ToolUseBlock):
            content.append(
                {
                    "type": "tool_use",
                    "id": block.tool_use_id,
                    "name": block.tool,
                    "input": block.input,
                }
            )
        elif isinstance(block, ToolResultBlock) and (found := native.result(block, _media_block)):
            content.append(found)
        elif isinstance(block, ToolResultBlock):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
            if block.text:
                result["content"] = block.text
            if block.is_error:
                result["is_error"] = True
            content.append(result)
        elif isinstance(block, ImageBlock) and native.moved(block):
            continue  # inside its call's result
        elif isinstance(block, ImageBlock | DocumentBlock):
            content.append(_media_block(block))
        elif isinstance(block, OpaqueBlock) and block.provider == PROVIDER:
            content.append(dict(block.data))
    return content


def build_messages(
    messages: list[Message], native: NativeCalls | None = None
) -> list[dict[str, Any]]:
    """The API's messages: same-role neighbours merged, tool results first in a user turn
    (`native`: the native computer tool the request declares, llm/computer_use.py)."""
    converted: list[dict[str, Any]] = []
    native = native or NativeCalls(None)
    for message in messages:
        content = _content(message, native)
        if not content:
            continue
        if converted and converted[-1]["role"] == message.role:
            converted[-1]["content"].extend(content)
        else:
            converted.append({"role": message.role, "content": content})
    for item in converted:
        if item["role"] == "user":
            # The API wants a turn's tool results before any other content.
            item["content"].sort(key=lambda b: 0 if b.get("type") == "tool_result" else 1)
    if converted and converted[-1]["role"] == "assistant":
        # A paused turn sent back to be resumed: the API refuses a final assistant
        # message whose text ends in whitespace.
        last = converted[-1]["content"][-1]
        if last.get("type") == "text":
            last["text"] = last["text"].rstrip()
            if not last["text"]:
                converted[-1]["content"].pop()
                if not converted[-1]["content"]:
                    converted.pop()
    return converted


def _mark_cache(messages: list[dict[str, Any]]) -> None:
    """Breakpoints on the last two user turns: this call's end and the previous one's."""
    marked = 0
    for item in reversed(messages):
        if marked == 2:
            break
        if item["role"] != "user":
            continue
        for block in reversed(item["content"]):
            if block.get("type") not in ("thinking", "redacted_thinking"):
                block["cache_control"] = EPHEMERAL
                marked += 1
                break


def _hosted_tools(web: HostedWeb) -> list[dict[str, Any]]:
    """The server tool declarations of `web`."""
    tools: list[dict[str, Any]] = []
    if web.search:
        tools.append({"type": WEB_SEARCH_TYPE, "name": SEARCH_NAME, "max_uses": MAX_USES})
    if web.fetch:
        tools.append(
            {
                "type": WEB_FETCH_TYPE,
                "name": FETCH_NAME,
                "max_uses": MAX_USES,
                "max_content_tokens": FETCH_MAX_CONTENT_TOKENS,
                "citations": {"enabled": True},
            }
        )
    return tools


def build_params(request: ModelRequest, cache: bool = True) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for `request` (without `stream`)."""
    computer = computer_version(PROVIDER, request.model) if request.computer else None
    messages = build_messages(request.messages, NativeCalls(computer))
    if cache:
        _mark_cache(messages)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    }
    blocks: list[dict[str, Any]] = []
    if request.system:
        system: dict[str, Any] = {"type": "text", "text": request.system}
        if cache:
            system["cache_control"] = EPHEMERAL
        blocks.append(system)
    if request.persona:
        # After the frozen prompt's breakpoint, with none of its own: a persona change
        # re-reads only what follows the frozen prompt (the four breakpoints are taken).
        blocks.append({"type": "text", "text": request.persona})
    if blocks:
        params["system"] = blocks
    web = hosted_web(PROVIDER, request.model, request.web)
    tools: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in offered(request.tools, web)
    ]
    tools += _hosted_tools(web)
    if computer is not None and request.computer is not None:
        tools.append(declaration(computer, request.computer))
        if computer.beta:
            params["betas"] = [computer.beta]  # sent by the SDK's beta client as the header
    if tools:
        if cache:
            tools[-1]["cache_control"] = EPHEMERAL
        params["tools"] = tools
    budget = THINKING_BUDGETS.get(request.thinking)
    if budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if params["max_tokens"] <= budget:
            params["max_tokens"] = budget + request.max_tokens
    return params


# -- response ----------------------------------------------------------------------------


class _Assembler:
    """Builds the message from stream events and turns them into our deltas."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason = "end_turn"
        self.finished = False

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            usage = event.message.usage
            self.usage.input_tokens = usage.input_tokens or 0
            self.usage.cache_read_tokens = usage.cache_read_input_tokens or 0
            self.usage.cache_write_tokens = usage.cache_creation_input_tokens or 0
            self.usage.output_tokens = usage.output_tokens or 0
            self._server_tools(usage)
        elif kind == "content_block_start":
            block = event.content_block
            data: dict[str, Any] = {"type": block.type, "json": ""}
            if block.type == "text":
                data["text"] = block.text or ""
            elif block.type == "thinking":
                data["thinking"] = block.thinking or ""
                data["signature"] = block.signature or ""
            elif block.type == "redacted_thinking":
                data["data"] = block.data
            elif block.type == "tool_use":
                data["id"], data["name"] = block.id, block.name
                # A toolset member's call (the native computer's) is stored as the toolset's.
                data["toolset"] = str(getattr(block, "toolset_name", None) or "")
                self.blocks[event.index] = data
                return [ToolCallStart(block.id, stored_input(block.name, data["toolset"], {})[0])]
            else:
                data["raw"] = block.model_dump(mode="json", exclude_none=True)
            self.blocks[event.index] = data
        elif kind == "content_block_delta":
            data = self.blocks.setdefault(event.index, {"type": "text", "text": "", "json": ""})
            delta = event.delta
            if delta.type == "text_delta":
                data["text"] = data.get("text", "") + delta.text
                return [TextDelta(delta.text)]
            if delta.type == "thinking_delta":
                data["thinking"] = data.get("thinking", "") + delta.thinking
                return [ThinkingDelta(delta.thinking)]
            if delta.type == "signature_delta":
                data["signature"] = data.get("signature", "") + delta.signature
            elif delta.type == "input_json_delta":
                data["json"] += delta.partial_json
                if data["type"] == "tool_use" and delta.partial_json:
                    return [ToolCallDelta(data["id"], delta.partial_json)]
            elif delta.type == "citations_delta":
                data.setdefault("citations", []).append(
                    delta.citation.model_dump(mode="json", exclude_none=True)
                )
        elif kind == "message_delta":
            stop = event.delta.stop_reason
            if stop:
                self.stop_reason = STOP_REASONS.get(stop, stop)
            usage = event.usage
            self.usage.output_tokens = usage.output_tokens or self.usage.output_tokens
            # Newer API versions repeat (possibly corrected) input counts at the end.
            if usage.input_tokens is not None:
                self.usage.input_tokens = usage.input_tokens
            if usage.cache_read_input_tokens is not None:
                self.usage.cache_read_tokens = usage.cache_read_input_tokens
            if usage.cache_creation_input_tokens is not None:
                self.usage.cache_write_tokens = usage.cache_creation_input_tokens
            self._server_tools(usage)
            # The pages the text cited, as links after it (streamed like the text).
            note = self._sources()
            if note:
                return [TextDelta(note)]
        elif kind == "message_stop":
            self.finished = True
        return []

    def _server_tools(self, usage: Any) -> None:
        """The hosted tool uses the usage reports (cumulative: the last report wins)."""
        used = getattr(usage, "server_tool_use", None)
        if used is None:
            return
        self.usage.web_search_requests = getattr(used, "web_search_requests", 0) or 0
        self.usage.web_fetch_requests = getattr(used, "web_fetch_requests", 0) or 0

    def _sources(self) -> str:
        """The "Sources:" note of the web pages the message's text cites ("" for none, and
        for a paused message: it goes back to the provider as it came)."""
        if self.stop_reason == PAUSE_STOP:
            return ""
        cited = [
            (str(c.get("url", "")), str(c.get("title") or ""))
            for index in sorted(self.blocks)
            for c in self.blocks[index].get("citations", ())
            if isinstance(c, dict)
        ]
        return sources_note(cited)

    def done(self) -> StreamDone:
        """The final event; a stream without its message_stop was cut."""
        if not self.finished:
            raise ProviderError("network", "the stream ended early", provider=self.provider)
        return StreamDone(self.message(), self.usage, self.stop_reason)

    def message(self) -> Message:
        blocks: list[Any] = []
        for index in sorted(self.blocks):
            data = self.blocks[index]
            kind = data["type"]
            if kind == "text":
                if data.get("text"):
                    blocks.append(TextBlock(data["text"]))
            elif kind == "thinking":
                blocks.append(
                    ThinkingBlock(data["thinking"], signature=data["signature"], provider=PROVIDER)
                )
            elif kind == "redacted_thinking":
                blocks.append(
                    ThinkingBlock("", signature=data["data"], redacted=True, provider=PROVIDER)
                )
            elif kind == "tool_use":
                toolset = data.get("toolset", "")
                name, arguments = stored_input(data["name"], toolset, parse_arguments(data["json"]))
                blocks.append(ToolUseBlock(data["id"], name, arguments, toolset=toolset))
            else:
                raw = dict(data["raw"])
                if data["json"]:
                    raw["input"] = parse_arguments(data["json"])
                blocks.append(OpaqueBlock(PROVIDER, raw))
        note = self._sources()
        if note:
            blocks.append(TextBlock(note))
        return Message("assistant", blocks)


class AnthropicProvider(ClientStreamingProvider["AsyncAnthropic"]):
    """The `anthropic` adapter."""

    def __init__(self, config: ProviderConfig):
        super().__init__(config, PROVIDER, _new_client)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create`."""
        return build_params(request)

    def open_stream(self, prepared: AsyncAnthropic, params: dict[str, Any]) -> Awaitable[Any]:
        """One streamed Messages call (through the beta client when the request needs a
        beta: the native computer tool's older versions)."""
        if "betas" in params:
            return prepared.beta.messages.create(**params, stream=True)
        return prepared.messages.create(**params, stream=True)

    def assembler(self) -> _Assembler:
        """The Messages event mapping."""
        return _Assembler(self.name)

    def explain(self, error: ProviderError, request: ModelRequest) -> ProviderError:
        """A refusal of the hosted web tools says how to turn them off."""
        return explain(error, hosted_web(PROVIDER, request.model, request.web))


def create(provider_config: ProviderConfig) -> Provider:
    """The adapter for one `type: anthropic` provider."""
    provider: Provider = AnthropicProvider(provider_config)
    return provider
