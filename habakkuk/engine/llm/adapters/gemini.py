"""Google Gemini through its REST streaming API, over aiohttp (no SDK, no extra).

`POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse` with the
key in `x-goog-api-key`; `base_url` is the API root (the default Google's), the
version path is added here. The system prompt is the `systemInstruction`, the
conversation `contents` of `user` and `model` turns; tool calls are
`functionCall` parts, their results `functionResponse` parts (matched to the
call by name and order: the API gives calls no ids), tools `functionDeclarations`
with their schema as `parametersJsonSchema`, images and documents `inlineData`
(text documents go as text).

Thinking is `thinkingConfig`: a token budget on 2.5 models, a level on 3 and
later (a model named by an alias gets a budget, which every thinking model
takes), with `includeThoughts` so the summaries stream as thinking. Every part
may carry a `thoughtSignature`; it is kept on the block the part became
(TextBlock, ThinkingBlock, ToolUseBlock) and replayed exactly. Gemini 3 refuses
a function call of the current turn without one, so calls another model wrote
(no signature at all in their message) carry the documented bypass value.

The stream and its blocks are gemini_stream.py's, the error mapping
gemini_errors.py's.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ...config import ProviderConfig
from ...presets import key_optional
from ..provider import Provider, ProviderError
from ..types import (
    ContextBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    ModelRequest,
    OpaqueBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from . import blob_base64, is_text_media, read_blob, require_key
from .gemini_errors import provider_error
from .gemini_stream import PROVIDER, GeminiAssembler, sse_events
from .streaming import StreamingProvider

if TYPE_CHECKING:
    import aiohttp

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"
# What Gemini 3 accepts in place of a signature on a call it did not write (documented).
BYPASS_SIGNATURE = "skip_thought_signature_validator"
# Token budgets of the thinking levels on 2.5 models (Flash takes at most 24576).
THINKING_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
EMPTY_RESULT = "(no output)"
CONNECT_SECONDS = 30.0
READ_SECONDS = 600.0  # between two pieces of a stream: a long think is quiet
_GENERATION = re.compile(r"^gemini-(\d+)(?:\.(\d+))?(?:-|$)")
_VERSIONED = re.compile(r"/v\d+(?:alpha|beta)?\d*$")
# Models that think nothing (image, speech and embedding models): no thinkingConfig.
_NO_THINKING = ("-image", "-tts", "embedding", "-live")


# -- models ------------------------------------------------------------------------------


def model_id(model: str) -> str:
    """The model's id in the URL: `models/` and a litellm-style `gemini/` prefix dropped."""
    name = model.strip()
    for prefix in ("models/", "gemini/"):
        name = name.removeprefix(prefix)
    return name


def generation(model: str) -> tuple[int, int] | None:
    """(major, minor) of a `gemini-X.Y-...` model; None for an alias or another family."""
    match = _GENERATION.match(model_id(model).lower())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def is_gemini(model: str) -> bool:
    return model_id(model).lower().startswith("gemini")


def strict_signatures(model: str) -> bool:
    """Whether the model refuses an unsigned call (Gemini 3 and later; an alias names
    the newest, so it counts too)."""
    if not is_gemini(model):
        return False
    found = generation(model)
    return found is None or found >= (3, 0)


def thinking_config(model: str, level: str) -> dict[str, Any] | None:
    """The `thinkingConfig` for a /think level (None: send none, the model's default).

    2.5: a budget (0 turns it off where the model allows: Flash does, Pro does not).
    3+: a level; "off" is the lowest the model has (minimal on Flash, low on Pro), and
    3.0 Pro, which has no medium, thinks high for it.
    """
    name = model_id(model).lower()
    if not is_gemini(name) or any(word in name for word in _NO_THINKING):
        return None
    found = generation(name)
    if found is not None and found < (2, 5):
        return None  # 2.0 and older do not think
    flash = "flash" in name
    if found is None or found < (3, 0):
        if level == "off":
            return {"thinkingBudget": 0} if found is not None and flash else None
        return {"thinkingBudget": THINKING_BUDGETS[level], "includeThoughts": True}
    if level == "off":
        return {"thinkingLevel": "minimal" if flash else "low"}
    value = "high" if level == "medium" and found == (3, 0) and "pro" in name else level
    return {"thinkingLevel": value, "includeThoughts": True}


# -- request -----------------------------------------------------------------------------


def _inline(block: ImageBlock | DocumentBlock) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.media_type, "data": blob_base64(block)}}


def _user_parts(message: Message, names: dict[str, str]) -> list[dict[str, Any]]:
    """A user message's parts: the function responses first, as the API wants them."""
    responses: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, ToolResultBlock):
            key = "error" if block.is_error else "output"
            response = {key: block.text or EMPTY_RESULT}
            name = names.get(block.tool_use_id, "tool")
            responses.append({"functionResponse": {"name": name, "response": response}})
        elif isinstance(block, TextBlock | ContextBlock):
            if block.text:
                parts.append({"text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_inline(block))
        elif isinstance(block, DocumentBlock):
            if is_text_media(block.media_type):
                body = read_blob(block).decode("utf-8", errors="replace")
                title = f"[{block.name}]\n" if block.name else ""
                parts.append({"text": f"{title}{body}"})
            else:
                parts.append(_inline(block))
    return responses + parts


def _model_parts(message: Message, names: dict[str, str], strict: bool) -> list[dict[str, Any]]:
    """An assistant message's parts, each with the signature it came with.

    Calls in a message that has no signed call were written by another model (or
    before signatures): for a strict model they carry the bypass value.
    """
    signed = any(isinstance(b, ToolUseBlock) and b.signature for b in message.blocks)
    bypass = BYPASS_SIGNATURE if strict and not signed else ""
    parts: list[dict[str, Any]] = []
    for block in message.blocks:
        part: dict[str, Any] | None = None
        signature = ""
        if isinstance(block, TextBlock | ContextBlock):
            signature = block.signature if isinstance(block, TextBlock) else ""
            if block.text or signature:
                part = {"text": block.text}
        elif isinstance(block, ThinkingBlock):
            # Only our own signed thoughts: unsigned summaries tell the model nothing.
            if block.provider == PROVIDER and block.signature:
                part, signature = {"text": block.text, "thought": True}, block.signature
        elif isinstance(block, ToolUseBlock):
            names[block.tool_use_id] = block.tool
            part = {"functionCall": {"name": block.tool, "args": block.input}}
            signature = block.signature or bypass
        elif isinstance(block, OpaqueBlock) and block.provider == PROVIDER:
            part = dict(block.data)
        if part is not None:
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
    return parts


def build_contents(messages: list[Message], model: str) -> list[dict[str, Any]]:
    """The request's `contents`: same-role neighbours merged, empty turns left out."""
    strict = strict_signatures(model)
    names: dict[str, str] = {}  # tool_use_id -> the tool's name, for its response
    contents: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            parts = _model_parts(message, names, strict)
            role = "model"
        else:
            parts = _user_parts(message, names)
            role = "user"
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
            if role == "user":
                contents[-1]["parts"].sort(key=lambda p: 0 if "functionResponse" in p else 1)
        else:
            contents.append({"role": role, "parts": parts})
    return contents


def build_body(request: ModelRequest) -> dict[str, Any]:
    """The GenerateContentRequest of `request`."""
    body: dict[str, Any] = {"contents": build_contents(request.messages, request.model)}
    if request.system_text:
        body["systemInstruction"] = {"parts": [{"text": request.system_text}]}
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.input_schema}
            for t in request.tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
    config: dict[str, Any] = {"maxOutputTokens": request.max_tokens}
    thinking = thinking_config(request.model, request.thinking)
    if thinking is not None:
        config["thinkingConfig"] = thinking
        budget = thinking.get("thinkingBudget") or 0
        if request.max_tokens <= budget:
            # Thoughts count against the output limit: leave room for the answer.
            config["maxOutputTokens"] = budget + request.max_tokens
    body["generationConfig"] = config
    return body


def stream_url(base_url: str, model: str) -> str:
    """The streaming endpoint of `model` under the API root `base_url` (a root that
    already ends in a version, `.../v1beta`, is used as it is)."""
    root = base_url.rstrip("/")
    if not _VERSIONED.search(root):
        root = f"{root}/{API_VERSION}"
    return f"{root}/models/{quote(model_id(model), safe='-._')}:streamGenerateContent?alt=sse"


# -- the provider ------------------------------------------------------------------------


class GeminiStream:
    """One streamed answer: iterate for its events; closing frees the connection."""

    def __init__(self, response: aiohttp.ClientResponse, provider: str):
        self.response = response
        self.events = sse_events(response, provider)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self.events

    async def aclose(self) -> None:
        """Give the connection back (read to the end) or drop it (cut short)."""
        await self.events.aclose()
        if self.response.content.at_eof():
            self.response.release()
        else:
            self.response.close()


class GeminiProvider(StreamingProvider):
    """The `gemini` adapter: one aiohttp session (its connection pool) per event loop."""

    def __init__(self, config: ProviderConfig):
        self.name = config.name or PROVIDER
        self.base_url = config.base_url or DEFAULT_BASE_URL
        self.keyless_ok = key_optional(config)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def prepare(self, request: ModelRequest) -> str:
        """The key to send (a ProviderError when none is set)."""
        return require_key(request.api_key, self.name, self.keyless_ok)

    def warm(self, api_key: str | None) -> None:
        """Import aiohttp ahead of the first call (ProviderHub.warm, on a worker thread)."""
        require_key(api_key, self.name, self.keyless_ok)
        import aiohttp  # noqa: F401

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The call: its URL and its JSON body."""
        return {"url": stream_url(self.base_url, request.model), "body": build_body(request)}

    def open_stream(self, prepared: str, params: dict[str, Any]) -> Awaitable[GeminiStream]:
        """POST the request; an error answer raises its ProviderError."""
        return self._open(prepared, params)

    async def _open(self, key: str, params: dict[str, Any]) -> GeminiStream:
        import aiohttp

        data = json.dumps(params["body"], ensure_ascii=False, separators=(",", ":")).encode()
        headers = {"content-type": "application/json", "x-goog-api-key": key}
        try:
            # A file-like body: aiohttp writes a big one (inline images) in pieces rather
            # than holding the event loop.
            body = io.BytesIO(data)
            response = await self._client().post(params["url"], data=body, headers=headers)
        except aiohttp.ClientError as exc:
            raise ProviderError("network", str(exc) or type(exc).__name__) from exc
        if response.status < 400:
            return GeminiStream(response, self.name)
        try:
            raw = await response.read()
        except aiohttp.ClientError as exc:
            raise ProviderError("network", str(exc) or type(exc).__name__) from exc
        finally:
            response.release()
        text = raw.decode("utf-8", errors="replace")
        try:
            answer: Any = json.loads(text)
        except ValueError:
            answer = text
        raise provider_error(response.status, answer, self.name, response.headers)

    def assembler(self) -> GeminiAssembler:
        """The GenerateContentResponse mapping."""
        return GeminiAssembler(self.name)

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=CONNECT_SECONDS, sock_read=READ_SECONDS
            )
            # trust_env: HTTPS_PROXY and NO_PROXY apply, as they do for the SDK adapters.
            self._session = aiohttp.ClientSession(timeout=timeout, trust_env=True)
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        """Close the connection pool."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


def create(provider_config: ProviderConfig) -> Provider:
    """The adapter for one `type: gemini` provider."""
    provider: Provider = GeminiProvider(provider_config)
    return provider
