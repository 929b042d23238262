"""Text-only fallback: a model that rejects images (or binary documents) still answers.

The transcript keeps every image and document by blob reference, whoever attached it
(a chat attachment, a tool's result). When a model refuses them (a text-only model
behind an OpenAI-compatible server, an old snapshot), the router learns that the model
is text-only for this process and sends it the conversation with each such block
replaced by a note saying what was there and where it is saved, so the turn goes on and
the model can tell the user why it cannot see the picture.
"""

from __future__ import annotations

from dataclasses import replace

from .provider import ProviderError
from .types import Block, DocumentBlock, ImageBlock, Message, ModelRequest, TextBlock

# What the APIs say when a model takes no images (OpenAI: "image_url is only supported
# by certain models", Anthropic: "does not support image input", DeepSeek and other
# Rust servers: "unknown variant `image_url`", vLLM: "is not a multimodal model").
_MEDIA_WORDS = ("image", "vision", "multimodal", "pdf", "input_file", "`file`")
_REFUSAL_WORDS = (
    "not support",
    "only supported",
    "not supported",
    "unknown variant",
    "not a multimodal",
    "cannot accept",
    "can't accept",
)


def is_media_block(block: Block) -> bool:
    """An image, or a document no text-only model can read (a text document is text)."""
    if isinstance(block, ImageBlock):
        return True
    return isinstance(block, DocumentBlock) and not _is_text_document(block.media_type)


def _is_text_document(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in (
        "application/json",
        "application/xml",
        "application/x-yaml",
    )


def has_media(request: ModelRequest) -> bool:
    """Whether the request carries any block a text-only model would refuse."""
    return any(is_media_block(b) for m in request.messages for b in m.blocks)


def rejects_media(error: ProviderError) -> bool:
    """Whether a bad request is the model refusing images or documents, not another fault."""
    if error.error_class != "bad_request":
        return False
    text = str(error.args[0] if error.args else "").lower()
    return any(w in text for w in _MEDIA_WORDS) and any(w in text for w in _REFUSAL_WORDS)


def media_note(block: ImageBlock | DocumentBlock, model: str) -> str:
    """The text sent in place of one image or document to a text-only model."""
    what = "image" if isinstance(block, ImageBlock) else "document"
    label = block.name or block.media_type
    where = f"; it is saved at {block.blob}" if block.blob else ""
    return (
        f"[{what} {label} not shown: the model {model} does not accept {what}s, so this "
        f"conversation goes on text-only{where}]"
    )


def text_only(request: ModelRequest, model: str) -> ModelRequest:
    """`request` with every image and binary document replaced by a note (see media_note)."""
    messages = [_text_only_message(m, model) for m in request.messages]
    return replace(request, messages=messages)


def _text_only_message(message: Message, model: str) -> Message:
    if not any(is_media_block(b) for b in message.blocks):
        return message
    blocks: list[Block] = [
        TextBlock(media_note(b, model))
        if isinstance(b, ImageBlock | DocumentBlock) and is_media_block(b)
        else b
        for b in message.blocks
    ]
    return replace(message, blocks=blocks)
