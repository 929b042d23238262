"""The Bedrock Converse request: our messages, tools and settings as its JSON body.

Shapes follow the Converse API (the bedrock-runtime service model): `messages` of
`{role, content}` with text, image, document, toolUse, toolResult and
reasoningContent blocks; `system` text blocks; `inferenceConfig.maxTokens`;
`toolConfig.tools` of `toolSpec`s; `additionalModelRequestFields.thinking` for the
Claude models that think. Media go as base64 `bytes` (the JSON encoding of a blob).

What a model accepts depends on the model, so `traits` reads it from a small table
keyed by the model id (an inference-profile region prefix such as "us." or an ARN's
path dropped): cache points where AWS documents prompt caching (Claude 3.5 Haiku,
3.7 Sonnet and the 4.x family in system, messages and tools; Amazon Nova in system
and messages), extended thinking on Claude 3.7 and 4.x, and a tool result's `status`
on Claude and Nova (other models refuse the field). A model the table does not know
gets none of them: a request without cache points costs more, one with a point a
model refuses fails.

Cache points sit where the anthropic adapter puts its breakpoints: after the frozen
system prompt, after the last tool, and at the end of the last two user turns, so
the cached prefix only grows; the persona follows the system prompt's point.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from . import blob_base64, is_text_media

PROVIDER = "bedrock"
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
# Token budgets for the thinking levels (as the anthropic adapter: budget < maxTokens).
THINKING_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
# Cross-region inference profiles prefix the model id with a geography.
REGION_PREFIXES = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca.")
EVERYWHERE = frozenset({"system", "messages", "tools"})
NO_TOOLS = frozenset({"system", "messages"})
# Model id prefix -> where cache points are accepted (AWS "Prompt caching": supported models).
CACHE_POINTS: dict[str, frozenset[str]] = {
    "anthropic.claude-3-5-haiku": EVERYWHERE,
    "anthropic.claude-3-7-sonnet": EVERYWHERE,
    "anthropic.claude-sonnet-4": EVERYWHERE,
    "anthropic.claude-opus-4": EVERYWHERE,
    "anthropic.claude-haiku-4": EVERYWHERE,
    "amazon.nova-micro": NO_TOOLS,
    "amazon.nova-lite": NO_TOOLS,
    "amazon.nova-pro": NO_TOOLS,
    "amazon.nova-premier": NO_TOOLS,
}
THINKING_MODELS = (
    "anthropic.claude-3-7-sonnet",
    "anthropic.claude-sonnet-4",
    "anthropic.claude-opus-4",
    "anthropic.claude-haiku-4",
)
TOOL_STATUS_MODELS = ("anthropic.claude", "amazon.nova")
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
# A document's name: letters, digits, single spaces, hyphens, parentheses, brackets.
_NAME_REFUSED = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")
_NAME_MAX = 200
EMPTY_RESULT = "(no output)"


@dataclass(frozen=True)
class Traits:
    """What one model accepts beyond the common Converse fields."""

    cache: frozenset[str] = frozenset()
    thinking: bool = False
    tool_status: bool = False


def base_model(model: str) -> str:
    """The model id without an ARN's path or an inference profile's region prefix."""
    name = model.strip().lower()
    if name.startswith("arn:"):
        name = name.rsplit("/", 1)[-1]
    for prefix in REGION_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def traits(model: str) -> Traits:
    """What `model` accepts (nothing extra for a model the tables do not know)."""
    name = base_model(model)
    cache = next((where for p, where in CACHE_POINTS.items() if name.startswith(p)), frozenset())
    return Traits(
        cache=cache,
        thinking=name.startswith(THINKING_MODELS),
        tool_status=name.startswith(TOOL_STATUS_MODELS),
    )


# -- content -------------------------------------------------------------------------------


def document_name(name: str, taken: set[str]) -> str:
    """A name Converse accepts (its character set, unique within the request)."""
    cleaned = " ".join(
        _NAME_REFUSED.sub(" ", name.rsplit(".", 1)[0] if "." in name else name).split()
    )
    cleaned = cleaned[:_NAME_MAX].strip() or "document"
    unique, n = cleaned, 2
    while unique in taken:
        unique = f"{cleaned} ({n})"
        n += 1
    taken.add(unique)
    return unique


def _media(block: ImageBlock | DocumentBlock, taken: set[str]) -> dict[str, Any]:
    if isinstance(block, ImageBlock):
        image_format = IMAGE_FORMATS.get(block.media_type)
        if image_format is None:
            return {"text": f"[an image in {block.media_type} was left out: not a Bedrock format]"}
        return {"image": {"format": image_format, "source": {"bytes": blob_base64(block)}}}
    doc_format = DOCUMENT_FORMATS.get(block.media_type)
    if doc_format is None and is_text_media(block.media_type):
        doc_format = "txt"
    if doc_format is None:
        return {
            "text": f"[document {block.name} ({block.media_type}) left out: not a Bedrock format]"
        }
    name = document_name(block.name or doc_format, taken)
    source = {"bytes": blob_base64(block)}
    return {"document": {"format": doc_format, "name": name, "source": source}}


def _content(
    message: Message, model_traits: Traits, taken: set[str], tools: bool
) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, TextBlock | ContextBlock):
            if block.text:
                content.append({"text": block.text})
        elif isinstance(block, ThinkingBlock):
            # Only reasoning Bedrock signed can go back; other providers' is dropped.
            if block.provider != PROVIDER or not block.signature:
                continue
            if block.redacted:
                content.append({"reasoningContent": {"redactedContent": block.signature}})
            else:
                text = {"text": block.text, "signature": block.signature}
                content.append({"reasoningContent": {"reasoningText": text}})
        elif not tools and isinstance(block, ToolUseBlock | ToolResultBlock):
            # Converse refuses tool blocks in a request that offers no tools (a summary's,
            # a title's): the model reads them as text instead.
            content.append({"text": _tool_text(block)})
        elif isinstance(block, ToolUseBlock):
            content.append(
                {
                    "toolUse": {
                        "toolUseId": block.tool_use_id,
                        "name": block.tool,
                        "input": block.input,
                    }
                }
            )
        elif isinstance(block, ToolResultBlock):
            result: dict[str, Any] = {
                "toolUseId": block.tool_use_id,
                "content": [{"text": block.text or EMPTY_RESULT}],
            }
            if model_traits.tool_status:
                result["status"] = "error" if block.is_error else "success"
            elif block.is_error:
                result["content"] = [{"text": f"Error: {block.text or EMPTY_RESULT}"}]
            content.append({"toolResult": result})
        elif isinstance(block, ImageBlock | DocumentBlock):
            content.append(_media(block, taken))
        # Opaque blocks are other providers' (Bedrock has no hosted tools): left out.
    return content


def _tool_text(block: ToolUseBlock | ToolResultBlock) -> str:
    if isinstance(block, ToolUseBlock):
        return f"[called {block.tool} with {json.dumps(block.input, ensure_ascii=False)}]"
    outcome = "failed" if block.is_error else "returned"
    return f"[the tool {outcome}: {block.text or EMPTY_RESULT}]"


def build_messages(
    messages: list[Message], model_traits: Traits, tools: bool = True
) -> list[dict[str, Any]]:
    """Converse messages: same-role neighbours merged, tool results first in a user turn,
    starting with a user turn, a final assistant turn without trailing whitespace; tool
    blocks as text when the request offers no tools."""
    converted: list[dict[str, Any]] = []
    taken: set[str] = set()
    for message in messages:
        content = _content(message, model_traits, taken, tools)
        if not content:
            continue
        if converted and converted[-1]["role"] == message.role:
            converted[-1]["content"].extend(content)
        elif converted or message.role == "user":
            converted.append({"role": message.role, "content": content})
    for item in converted:
        if item["role"] == "user":
            item["content"].sort(key=lambda b: 0 if "toolResult" in b else 1)
            blocks = item["content"]
            if any("document" in b for b in blocks) and not any("text" in b for b in blocks):
                # Converse wants a text block beside a document.
                blocks.append({"text": "(see the attached document)"})
    if converted and converted[-1]["role"] == "assistant":
        last = converted[-1]["content"][-1]
        if "text" in last:
            last["text"] = last["text"].rstrip()
            if not last["text"]:
                converted[-1]["content"].pop()
                if not converted[-1]["content"]:
                    converted.pop()
    return converted


def _mark_cache(messages: list[dict[str, Any]]) -> None:
    """Cache points at the end of the last two user turns."""
    marked = 0
    for item in reversed(messages):
        if marked == 2:
            break
        if item["role"] == "user":
            item["content"].append(dict(CACHE_POINT))
            marked += 1


def build_body(request: ModelRequest) -> dict[str, Any]:
    """The Converse (stream) request body for `request`."""
    model_traits = traits(request.model)
    cache = model_traits.cache
    messages = build_messages(request.messages, model_traits, bool(request.tools))
    if "messages" in cache:
        _mark_cache(messages)
    body: dict[str, Any] = {"messages": messages}
    system: list[dict[str, Any]] = []
    if request.system:
        system.append({"text": request.system})
        if "system" in cache:
            system.append(dict(CACHE_POINT))
    if request.persona:
        system.append({"text": request.persona})
    if system:
        body["system"] = system
    max_tokens = request.max_tokens
    budget = THINKING_BUDGETS.get(request.thinking) if model_traits.thinking else None
    if budget is not None:
        body["additionalModelRequestFields"] = {
            "thinking": {"type": "enabled", "budget_tokens": budget}
        }
        if max_tokens <= budget:
            max_tokens = budget + request.max_tokens
    body["inferenceConfig"] = {"maxTokens": max_tokens}
    if request.tools:
        tools: list[dict[str, Any]] = []
        for tool in request.tools:
            spec: dict[str, Any] = {"name": tool.name, "inputSchema": {"json": tool.input_schema}}
            if tool.description:
                spec["description"] = tool.description
            tools.append({"toolSpec": spec})
        if "tools" in cache:
            tools.append(dict(CACHE_POINT))
        body["toolConfig"] = {"tools": tools}
    return body
