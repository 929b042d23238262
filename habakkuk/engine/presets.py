"""Known model services: a provider can name one and get its type, URL and key variable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

# The model adapters (engine/llm/adapters/): what a provider's `type:` names.
ProviderType = Literal["anthropic", "openai", "responses", "litellm", "mock", "bedrock", "gemini"]
# The subscription logins a provider may sign in with (`auth:`, `habakkuk auth login`).
LoginKind = Literal["chatgpt", "copilot"]


class ProviderLike(Protocol):
    """What `key_optional` reads of a provider (engine.config.ProviderConfig), so presets
    need not import the config module that fills providers from them."""

    @property
    def type(self) -> str | None: ...

    @property
    def preset(self) -> str | None: ...

    @property
    def name(self) -> str: ...

    @property
    def base_url(self) -> str | None: ...


@dataclass(frozen=True)
class Preset:
    """What a known service needs: adapter type, base URL, key variable, whether keyless works."""

    type: ProviderType
    base_url: str | None
    key_env: str | None
    key_optional: bool = False
    auth: LoginKind | None = None  # signs in with `habakkuk auth login` instead of a key


PRESETS: dict[str, Preset] = {
    "anthropic": Preset("anthropic", None, "ANTHROPIC_API_KEY"),
    "openai": Preset("openai", None, "OPENAI_API_KEY"),
    "openrouter": Preset("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "groq": Preset("openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "deepseek": Preset("openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "mistral": Preset("openai", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    "together": Preset("openai", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "xai": Preset("openai", "https://api.x.ai/v1", "XAI_API_KEY"),
    "fireworks": Preset("openai", "https://api.fireworks.ai/inference/v1", "FIREWORKS_API_KEY"),
    "cerebras": Preset("openai", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
    "ollama": Preset("openai", "http://127.0.0.1:11434/v1", "OLLAMA_API_KEY", key_optional=True),
    "lmstudio": Preset("openai", "http://127.0.0.1:1234/v1", "LMSTUDIO_API_KEY", key_optional=True),
    "vllm": Preset("openai", "http://127.0.0.1:8000/v1", "VLLM_API_KEY", key_optional=True),
    "llamacpp": Preset("openai", "http://127.0.0.1:8080/v1", "LLAMACPP_API_KEY", key_optional=True),
    "litellm-proxy": Preset("openai", "http://127.0.0.1:4000/v1", "LITELLM_API_KEY", True),
    "gemini": Preset("gemini", None, "GEMINI_API_KEY"),
    # Native (adapters/bedrock.py): the AWS credential chain, or a Bedrock API key here.
    "bedrock": Preset("bedrock", None, "AWS_BEARER_TOKEN_BEDROCK", key_optional=True),
    "chatgpt": Preset("responses", "https://chatgpt.com/backend-api/codex", None, auth="chatgpt"),
    "copilot": Preset("openai", None, None, auth="copilot"),
}


def key_optional(provider: ProviderLike) -> bool:
    """Whether the provider works without a key (local servers, the mock)."""
    if provider.type == "mock":
        return True
    if provider.type == "bedrock":
        return True  # the AWS credential chain signs when no Bedrock API key is set
    preset = PRESETS.get(provider.preset or provider.name)
    if preset is not None and preset.key_optional:
        return True
    url = provider.base_url or ""
    return "://127.0.0.1" in url or "://localhost" in url or "://[::1]" in url
