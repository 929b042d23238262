"""Known model services: a provider can name one and get its type, URL and key variable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import ProviderConfig


@dataclass(frozen=True)
class Preset:
    """What a known service needs: adapter type, base URL, key variable, whether keyless works."""

    type: str
    base_url: str | None
    key_env: str | None
    key_optional: bool = False


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
    "gemini": Preset("litellm", None, "GEMINI_API_KEY"),
    "bedrock": Preset("litellm", None, None, key_optional=True),
}


def apply_preset(provider: ProviderConfig) -> str | None:
    """Fill type, base URL and key variable from the provider's preset.

    A provider names its preset with `preset:`, or is named after one and sets no
    type. Returns an error message, or None when the provider is complete.
    """
    preset_name = provider.preset
    if preset_name is None and provider.type is None and provider.name in PRESETS:
        preset_name = provider.name
    if preset_name is not None:
        preset = PRESETS.get(preset_name)
        if preset is None:
            return f"unknown preset {preset_name!r} (known: {', '.join(sorted(PRESETS))})"
        if provider.type is None:
            provider.type = preset.type  # type: ignore[assignment]
        if provider.base_url is None:
            provider.base_url = preset.base_url
        if provider.key_env is None:
            provider.key_env = preset.key_env
    if provider.type is None:
        return "needs a type (anthropic, openai, responses, litellm, mock) or a preset"
    return None


def key_optional(provider: ProviderConfig) -> bool:
    """Whether the provider works without a key (local servers, the mock)."""
    if provider.type == "mock":
        return True
    preset = PRESETS.get(provider.preset or provider.name)
    if preset is not None and preset.key_optional:
        return True
    url = provider.base_url or ""
    return "://127.0.0.1" in url or "://localhost" in url or "://[::1]" in url
