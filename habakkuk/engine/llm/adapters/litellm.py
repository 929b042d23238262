"""Everything else (Gemini, Bedrock, Mistral, ...) through litellm, if installed.

litellm is an optional extra (`pip install 'habakkuk[litellm]'`) and is
imported only when a `type: litellm` provider makes its first call, with
LITELLM_LOCAL_MODEL_COST_MAP set first so importing it never fetches a price
list from the network. It speaks Chat Completions shapes, so the conversion
and the stream assembly are the openai adapter's.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable
from typing import Any

from ...config import ProviderConfig
from ...presets import key_optional
from ..provider import Provider, ProviderError
from ..types import ModelRequest
from . import KEYLESS
from .openai_chat import ChatAssembler, build_messages, build_tools
from .streaming import StreamingProvider

INSTALL_HINT = "litellm is not installed; run: pip install 'habakkuk[litellm]'"
# litellm routes by a "vendor/" prefix; a preset's provider may leave it out.
MODEL_PREFIXES = {"gemini": "gemini/", "bedrock": "bedrock/"}


def import_litellm() -> Any:
    """The litellm module, or a ProviderError saying how to install it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        raise ProviderError("bad_request", INSTALL_HINT, provider="litellm") from None
    return litellm


def litellm_model(config: ProviderConfig, model: str) -> str:
    """The model name litellm routes by (with the preset's vendor prefix when missing)."""
    prefix = MODEL_PREFIXES.get(config.preset or config.name or "")
    if prefix and not model.startswith(prefix):
        return prefix + model
    return model


def build_params(config: ProviderConfig, request: ModelRequest) -> dict[str, Any]:
    """Keyword arguments of `litellm.acompletion` (streamed, litellm's retries off)."""
    params: dict[str, Any] = {
        "model": litellm_model(config, request.model),
        "messages": build_messages(request.system_text, request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": request.max_tokens,
        "num_retries": 0,
        "max_retries": 0,
    }
    tools = build_tools(request)
    if tools:
        params["tools"] = tools
    if request.api_key and request.api_key != KEYLESS:
        params["api_key"] = request.api_key
    if config.base_url:
        params["api_base"] = config.base_url
    if request.thinking != "off":
        params["reasoning_effort"] = request.thinking
    return params


class LiteLLMProvider(StreamingProvider):
    """The `litellm` adapter."""

    def __init__(self, config: ProviderConfig):
        self.config = config
        self.name = config.name or "litellm"
        self.keyless_ok = key_optional(config)

    def prepare(self, request: ModelRequest) -> Any:
        """The litellm module (imported now), once a key is set or not needed."""
        litellm = import_litellm()
        if not request.api_key and not self.keyless_ok:
            raise ProviderError(
                "auth",
                f"no API key is set (see providers.{self.name}.key_env)",
                provider=self.name,
            )
        return litellm

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `litellm.acompletion`."""
        return build_params(self.config, request)

    def open_stream(self, prepared: Any, params: dict[str, Any]) -> Awaitable[Any]:
        """One streamed completion."""
        result: Awaitable[Any] = prepared.acompletion(**params)
        return result

    def assembler(self) -> ChatAssembler:
        """Chat Completions chunks, recorded as litellm's."""
        return ChatAssembler(self.name, kind="litellm")

    async def aclose(self) -> None:
        """Nothing to close: litellm keeps its own clients."""


def create(provider_config: ProviderConfig) -> Provider:
    """The adapter for one `type: litellm` provider (litellm itself loads on first call)."""
    provider: Provider = LiteLLMProvider(provider_config)
    return provider
