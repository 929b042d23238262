"""The conversation-shape checks of the fake model server, as each real API makes them.

The real services answer 400 to a conversation whose tool calls and results are out of
order, or whose images sit where the API takes none; a fake that accepted them would let
an adapter that sends such requests pass its tests. Each check returns the API's own
error message (None when the request is well formed):

- Anthropic Messages: every ``tool_use`` has its ``tool_result`` in the next user
  message, tool results come first in a user message (an image before one is refused),
  images only in user messages, with a base64 source whose bytes are of the media type
  it names.
- Chat Completions: an assistant message with ``tool_calls`` is followed by a ``tool``
  message for each call before any other message; a ``tool`` message answers one of
  them; images (``image_url`` data URLs) only in ``user`` messages, never ``tool`` ones.
- Responses: each ``function_call`` has its ``function_call_output`` before the next
  message item, each output answers a call; ``input_image`` only in user messages.

A model named in ``blind`` takes no images: a request that carries one gets the API's
answer for a text-only model.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def sniff_image(data: bytes) -> str | None:
    """The media type the bytes are (by their magic number), or None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _decode(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _data_url_problem(url: Any) -> str | None:
    """OpenAI's complaint about an image URL we send (always a base64 data URL)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return "Invalid image URL: expected a base64-encoded data URL with an image MIME type."
    head, _, payload = url.partition(",")
    media_type = head.removeprefix("data:").removesuffix(";base64")
    raw = _decode(payload)
    if not head.endswith(";base64") or raw is None:
        return "Invalid image URL: expected a base64-encoded data URL with an image MIME type."
    if media_type not in IMAGE_TYPES or sniff_image(raw) is None:
        return (
            "You uploaded an unsupported image. Please make sure your image has of one the "
            "following formats: ['png', 'jpeg', 'gif', 'webp']."
        )
    return None


# -- Anthropic Messages ---------------------------------------------------------------


def anthropic_problem(body: dict[str, Any], blind: set[str]) -> str | None:
    """The Messages API's complaint about the conversation in ``body``, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            return f"messages.{index}.content: Input should be a valid list"
        problem = _anthropic_content_problem(index, message.get("role"), content)
        if problem:
            return problem
        if message.get("role") == "assistant":
            problem = _anthropic_results_follow(index, content, messages)
            if problem:
                return problem
    model = str(body.get("model", ""))
    if model in blind and _anthropic_has_image(messages):
        return f"'{model}' does not support image input."
    return None


def _anthropic_content_problem(index: int, role: Any, content: list[Any]) -> str | None:
    seen_other = False
    for position, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        where = f"messages.{index}.content.{position}"
        if kind == "tool_result":
            if role != "user":
                return f"{where}: tool_result blocks are only allowed in user messages"
            if seen_other:
                return (
                    f"{where}: tool_result blocks must come before any other content in "
                    "a user message"
                )
            inner = block.get("content")
            for part, item in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(item, dict) and item.get("type") == "image":
                    problem = _anthropic_image_problem(
                        f"{where}.content.{part}", item.get("source")
                    )
                    if problem:
                        return problem
            continue
        seen_other = True
        if kind == "image":
            if role != "user":
                return f"{where}: image blocks are only allowed in user messages"
            problem = _anthropic_image_problem(where, block.get("source"))
            if problem:
                return problem
    return None


def _anthropic_image_problem(where: str, source: Any) -> str | None:
    if not isinstance(source, dict) or source.get("type") != "base64":
        return f"{where}.image.source: Input tag does not match any of the expected tags"
    media_type = source.get("media_type")
    if media_type not in IMAGE_TYPES:
        return (
            f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', "
            "'image/png', 'image/gif' or 'image/webp'"
        )
    raw = _decode(source.get("data"))
    if raw is None:
        return f"{where}.image.source.base64.data: The image data is not valid base64"
    actual = sniff_image(raw)
    if actual is None:
        return f"{where}.image.source.base64.data: Could not process image"
    if actual != media_type:
        return (
            f"{where}.image.source.base64.data: The image was specified using the "
            f"{media_type} media type, but the image appears to be a {actual} image"
        )
    return None


def _anthropic_results_follow(index: int, content: list[Any], messages: list[Any]) -> str | None:
    ids = [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    if not ids:
        return None
    following = messages[index + 1] if index + 1 < len(messages) else None
    answered: set[Any] = set()
    if isinstance(following, dict) and following.get("role") == "user":
        blocks = following.get("content")
        if isinstance(blocks, list):
            answered = {
                b.get("tool_use_id")
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "tool_result"
            }
    missing = [i for i in ids if i not in answered]
    if following is None or not missing:
        return None  # the last assistant message (prefill) needs no results
    return (
        f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(map(str, missing))}. Each `tool_use` block must have "
        "a corresponding `tool_result` block in the next message."
    )


def _anthropic_has_image(messages: list[Any]) -> bool:
    return any(
        isinstance(block, dict) and block.get("type") == "image"
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


# -- Chat Completions -----------------------------------------------------------------


def chat_problem(body: dict[str, Any], blind: set[str]) -> str | None:
    """Chat Completions' complaint about the messages in ``body``, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "Invalid type for 'messages': expected an array."
    pending: list[Any] = []  # tool_call ids still waiting for their tool message
    answerable: set[Any] = set()
    has_image = False
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"Invalid type for 'messages[{index}]': expected an object."
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            if call_id in pending:
                pending.remove(call_id)
        elif pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(map(str, pending))}"
            )
        else:
            answerable = set()
        problem, images = _chat_content_problem(index, role, message.get("content"))
        if problem:
            return problem
        has_image = has_image or images
        if role == "assistant":
            calls = message.get("tool_calls") or []
            pending = [c.get("id") for c in calls if isinstance(c, dict)]
            answerable = set(pending)
    model = str(body.get("model", ""))
    if model in blind and has_image:
        return "Invalid content type. image_url is only supported by certain models."
    return None


def _chat_content_problem(index: int, role: Any, content: Any) -> tuple[str | None, bool]:
    """(the complaint about one message's content, whether it holds an image)."""
    if content is None or isinstance(content, str):
        return None, False
    if not isinstance(content, list):
        return f"Invalid type for 'messages[{index}].content': expected a string or array.", False
    images = False
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "image_url":
            continue
        images = True
        if role != "user":
            return (
                f"Invalid 'messages[{index}]'. Image URLs are only allowed for messages with "
                f"role 'user', but this message with role '{role}' contains an image URL."
            ), True
        image = part.get("image_url")
        problem = _data_url_problem(image.get("url") if isinstance(image, dict) else None)
        if problem:
            return problem, True
    return None, images


# -- Responses ------------------------------------------------------------------------


def responses_problem(body: dict[str, Any], blind: set[str]) -> str | None:
    """The Responses API's complaint about the ``input`` items in ``body``, or None."""
    items = body.get("input")
    if isinstance(items, str) or items is None:
        return None
    if not isinstance(items, list):
        return "Invalid type for 'input': expected a string or an array."
    pending: list[Any] = []
    called: set[Any] = set()
    has_image = False
    for index, item in enumerate(items):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "function_call":
            pending.append(item.get("call_id"))
            called.add(item.get("call_id"))
            continue
        if kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in called:
                return f"No tool call found for function call output with call_id {call_id}."
            if call_id in pending:
                pending.remove(call_id)
            continue
        if kind == "message" and pending:
            return f"No tool output found for function call {pending[0]}."
        if kind == "message":
            problem, images = _responses_content_problem(index, item)
            if problem:
                return problem
            has_image = has_image or images
    if pending:
        return f"No tool output found for function call {pending[0]}."
    model = str(body.get("model", ""))
    if model in blind and has_image:
        return "Invalid content type. input_image is only supported by certain models."
    return None


def _responses_content_problem(index: int, item: dict[str, Any]) -> tuple[str | None, bool]:
    content = item.get("content")
    if not isinstance(content, list):
        return None, False
    images = False
    for position, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "input_image":
            continue
        images = True
        if item.get("role") != "user":
            return (
                f"Invalid value: 'input_image'. Supported values are: 'output_text' and "
                f"'refusal' (input[{index}].content[{position}].type)."
            ), True
        problem = _data_url_problem(part.get("image_url"))
        if problem:
            return problem, True
    return None, images
