"""What a model call cost: config `pricing:` overrides, then a built-in list-price table.

Prices are US dollars per million tokens. A model id matches the longest
table prefix (followed by nothing, a date or a variant, never a minor version)
after normalising it: gateway prefixes ("anthropic/claude-...",
"openrouter/openai/gpt-5") and Bedrock region and vendor prefixes
("us.anthropic.claude-...") are dropped, and dots become dashes so
"claude-sonnet-4.5" and "claude-sonnet-4-5" are the same model. Some models
charge more for long prompts: past the tier's threshold (prompt tokens
including cached ones) the whole call is billed at the tier's prices.
Unknown models cost nothing (and `habakkuk usage` says they are unpriced).
A call's hosted web searches (llm/hosted.py) are billed per search on top of its
tokens, at the price per 1,000 searches of the model's family
(`WEB_SEARCH_PER_1000`); hosted web fetches cost only the tokens they add.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .types import Usage

MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens; cache prices of None fall back to sensible defaults."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    # (threshold in prompt tokens, the prices above it)
    long_prompt: tuple[int, Price] | None = None

    def cost(self, usage: Usage) -> float:
        """The dollars of one call's usage."""
        if self.long_prompt is not None and usage.prompt_tokens > self.long_prompt[0]:
            return self.long_prompt[1].cost(usage)
        cache_read = self.cache_read if self.cache_read is not None else self.input * 0.1
        cache_write = self.cache_write if self.cache_write is not None else self.input
        total = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
        )
        return total / MILLION


def _claude(inp: float, out: float, long: tuple[int, Price] | None = None) -> Price:
    # Anthropic: cache reads cost a tenth of input, 5-minute cache writes 1.25 times.
    return Price(inp, out, inp * 0.1, inp * 1.25, long)


def _openai(inp: float, out: float, cached: float) -> Price:
    # OpenAI caches automatically: writes cost nothing extra.
    return Price(inp, out, cached, inp)


def _flat(inp: float, out: float, cached: float | None = None) -> Price:
    # Services without a cache discount bill cached tokens as input.
    return Price(inp, out, inp if cached is None else cached, inp)


# Anthropic's 1M-token context: past 200k prompt tokens, input doubles, output x1.5.
_SONNET_LONG = (200_000, _claude(6.0, 22.5))
_OPUS_LONG = (200_000, _claude(10.0, 37.5))
# Gemini Pro models bill the whole call at the higher tier past 200k prompt tokens.
_GEMINI_25_PRO_LONG = (200_000, Price(2.50, 15.0, 0.25, 2.50))
_GEMINI_3_PRO_LONG = (200_000, Price(4.0, 18.0, 0.40, 4.0))
# GPT-5.4 past 272k prompt tokens: input x2, output x1.5.
_GPT_54_LONG = (272_000, _openai(5.0, 22.5, 0.50))
# xAI's Grok 4 family past 128k prompt tokens.
_GROK_4_LONG = (128_000, Price(6.0, 30.0, 1.50, 6.0))
_GROK_FAST_LONG = (128_000, Price(0.40, 1.0, 0.05, 0.40))

# List prices as known on 2026-12-07, from each vendor's own price page (dollars per
# million tokens). Open-weight models served by several hosts (Llama, gpt-oss, Qwen,
# Kimi) carry one host's list price (Groq's, else Bedrock's): the table is keyed by model,
# not by host, and `pricing:` in config sets another. Every model a preset or the setup
# screen offers is here (tests/llm/test_pricing_coverage.py checks it).
BUILTIN_PRICES: dict[str, Price] = {
    # Anthropic (also on Bedrock, OpenRouter and Vertex under the same names)
    "claude-opus-4-6": _claude(5.0, 25.0, _OPUS_LONG),
    "claude-opus-4-5": _claude(5.0, 25.0),
    "claude-opus-4-1": _claude(15.0, 75.0),
    "claude-opus-4": _claude(15.0, 75.0),
    "claude-sonnet-4-6": _claude(3.0, 15.0, _SONNET_LONG),
    "claude-sonnet-4-5": _claude(3.0, 15.0, _SONNET_LONG),
    "claude-sonnet-4": _claude(3.0, 15.0, _SONNET_LONG),
    "claude-3-7-sonnet": _claude(3.0, 15.0),
    "claude-3-5-sonnet": _claude(3.0, 15.0),
    "claude-haiku-4-5": _claude(1.0, 5.0),
    "claude-3-5-haiku": _claude(0.8, 4.0),
    "claude-3-haiku": _claude(0.25, 1.25),
    "claude-3-opus": _claude(15.0, 75.0),
    # OpenAI
    "gpt-5-4-pro": _openai(30.0, 180.0, 30.0),
    "gpt-5-4-mini": _openai(0.75, 4.50, 0.075),
    "gpt-5-4-nano": _openai(0.20, 1.25, 0.02),
    "gpt-5-4": Price(2.50, 15.0, 0.25, 2.50, _GPT_54_LONG),
    "gpt-5-3-codex": _openai(1.75, 14.0, 0.175),
    "gpt-5-2-pro": _openai(21.0, 168.0, 21.0),
    "gpt-5-2": _openai(1.75, 14.0, 0.175),
    "gpt-5-1-codex-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5-1": _openai(1.25, 10.0, 0.125),
    "gpt-5-pro": _openai(15.0, 120.0, 15.0),
    "gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "gpt-5": _openai(1.25, 10.0, 0.125),
    "gpt-4-1-nano": _openai(0.10, 0.40, 0.025),
    "gpt-4-1-mini": _openai(0.40, 1.60, 0.10),
    "gpt-4-1": _openai(2.0, 8.0, 0.50),
    "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "gpt-4o": _openai(2.50, 10.0, 1.25),
    "o4-mini": _openai(1.10, 4.40, 0.275),
    "o3-mini": _openai(1.10, 4.40, 0.55),
    "o3-pro": _openai(20.0, 80.0, 20.0),
    "o3": _openai(2.0, 8.0, 0.50),
    "o1-pro": _openai(150.0, 600.0, 150.0),
    "o1-mini": _openai(1.10, 4.40, 0.55),
    "o1": _openai(15.0, 60.0, 7.50),
    # Image generation billed by tokens (text in, image out): images: in config.
    "gpt-image-1-mini": _openai(2.0, 8.0, 0.20),
    "gpt-image-1": _openai(5.0, 40.0, 1.25),
    # Google (Gemini API and Vertex; implicit cache reads at a tenth of input)
    "gemini-3-1-pro": Price(2.0, 12.0, 0.20, 2.0, _GEMINI_3_PRO_LONG),
    "gemini-3-pro-image": Price(2.0, 120.0, 0.20, 2.0),
    "gemini-3-pro": Price(2.0, 12.0, 0.20, 2.0, _GEMINI_3_PRO_LONG),
    "gemini-3-flash": Price(0.50, 3.0, 0.05, 0.50),
    "gemini-2-5-pro": Price(1.25, 10.0, 0.125, 1.25, _GEMINI_25_PRO_LONG),
    "gemini-2-5-flash-lite": Price(0.10, 0.40, 0.01, 0.10),
    "gemini-2-5-flash-image": Price(0.30, 30.0, 0.03, 0.30),
    "gemini-2-5-flash": Price(0.30, 2.50, 0.03, 0.30),
    "gemini-2-0-flash-lite": Price(0.075, 0.30, 0.075, 0.075),
    "gemini-2-0-flash": Price(0.10, 0.40, 0.025, 0.10),
    # DeepSeek's own API (V3.2 behind both names; cache hits at a tenth)
    "deepseek-chat": Price(0.28, 0.42, 0.028, 0.28),
    "deepseek-reasoner": Price(0.28, 0.42, 0.028, 0.28),
    "deepseek-v3-2": Price(0.28, 0.42, 0.028, 0.28),
    "deepseek-v3-1": _flat(0.56, 1.68),
    "deepseek-v3p1": _flat(0.56, 1.68),  # Fireworks' spelling
    "deepseek-v3": _flat(0.58, 1.68),  # Bedrock's deepseek.v3
    "deepseek-r1": _flat(1.35, 5.40),  # Bedrock's deepseek.r1
    # Mistral (no cache discount)
    "mistral-large-2402": _flat(4.0, 12.0),  # Bedrock's Mistral Large (24.02)
    "mistral-large-2407": _flat(2.0, 6.0),
    "mistral-large-2411": _flat(2.0, 6.0),
    "mistral-large": _flat(0.50, 1.50),  # Mistral Large 3 (-latest)
    "mistral-medium": _flat(0.40, 2.0),
    "mistral-small-2402": _flat(1.0, 3.0),  # Bedrock's Mistral Small (24.02)
    "mistral-small": _flat(0.10, 0.30),
    "magistral-medium": _flat(2.0, 5.0),
    "magistral-small": _flat(0.50, 1.50),
    "devstral-small": _flat(0.10, 0.30),
    "devstral": _flat(0.40, 2.0),
    "codestral": _flat(0.30, 0.90),
    "pixtral-large": _flat(2.0, 6.0),
    "ministral-14b": _flat(0.20, 0.20),
    "ministral-8b": _flat(0.10, 0.10),
    "ministral-3b": _flat(0.04, 0.04),
    "open-mistral-nemo": _flat(0.15, 0.15),
    "mistral-nemo": _flat(0.15, 0.15),
    # xAI
    "grok-4-1-fast": Price(0.20, 0.50, 0.05, 0.20, _GROK_FAST_LONG),
    "grok-4-fast": Price(0.20, 0.50, 0.05, 0.20, _GROK_FAST_LONG),
    "grok-4": Price(3.0, 15.0, 0.75, 3.0, _GROK_4_LONG),
    "grok-code-fast-1": Price(0.20, 1.50, 0.02, 0.20),
    "grok-code-fast": Price(0.20, 1.50, 0.02, 0.20),
    "grok-3-mini": Price(0.30, 0.50, 0.075, 0.30),
    "grok-3": Price(3.0, 15.0, 0.75, 3.0),
    # Open-weight models at Groq's list prices (also how Together, Fireworks, Cerebras
    # and OpenRouter name them)
    "llama-3-3-70b": _flat(0.59, 0.79),
    "llama-3-1-8b": _flat(0.05, 0.08),
    "llama-4-scout": _flat(0.11, 0.34),
    "llama-4-maverick": _flat(0.20, 0.60),
    "llama-v3p3-70b": _flat(0.90, 0.90),  # Fireworks' spelling and price
    "gpt-oss-120b": _flat(0.15, 0.60, 0.075),
    "gpt-oss-20b": _flat(0.075, 0.30, 0.0375),
    "qwen3-32b": _flat(0.29, 0.59),
    "qwen-3-32b": _flat(0.40, 0.80),  # Cerebras' spelling and price
    "qwen3-235b-a22b": _flat(0.20, 0.60),
    "kimi-k2": _flat(1.0, 3.0, 0.50),
    # Bedrock's own models and its spellings of others (region and vendor prefixes
    # are dropped by `normalise`)
    "nova-premier": Price(2.50, 12.50, 0.625, 2.50),
    "nova-pro": Price(0.80, 3.20, 0.20, 0.80),
    "nova-lite": Price(0.06, 0.24, 0.015, 0.06),
    "nova-micro": Price(0.035, 0.14, 0.00875, 0.035),
    "llama3-3-70b": _flat(0.72, 0.72),
    "llama3-1-70b": _flat(0.72, 0.72),
    "llama3-1-8b": _flat(0.22, 0.22),
    "llama4-maverick": _flat(0.24, 0.97),
    "llama4-scout": _flat(0.17, 0.66),
    "gpt-oss-120b-1": _flat(0.15, 0.60),  # openai.gpt-oss-120b-1:0
    "gpt-oss-20b-1": _flat(0.07, 0.30),
}

# Dollars per 1,000 hosted web searches, by model-id prefix (longest match): Anthropic's
# web_search server tool and OpenAI Responses' web_search tool calls.
WEB_SEARCH_PER_1000: dict[str, float] = {
    "claude": 10.0,
    "gpt": 10.0,
    "o3": 10.0,
    "o4": 10.0,
}

# Bedrock prefixes its model ids with a region group and a vendor.
_REGION_PREFIXES = ("us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.")
_VENDOR_PREFIXES = ("anthropic.", "amazon.", "meta.", "mistral.", "cohere.", "ai21.", "openai.")


def normalise(model: str) -> str:
    """The model id as the table spells it (see the module docstring)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = name.split(":", 1)[0] if name.startswith(_VENDOR_PREFIXES + _REGION_PREFIXES) else name
    for prefix in _REGION_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name.replace(".", "-")


def _price_of_override(value: Any) -> Price:
    return Price(
        float(value.input),
        float(value.output),
        None if value.cache_read is None else float(value.cache_read),
        None if value.cache_write is None else float(value.cache_write),
    )


# Model names whose price lookup is remembered (a bound: names come from config and chains).
_REMEMBERED = 1024


def _matches(name: str, prefix: str) -> bool:
    """`prefix` names this model: exactly, or followed by a date or variant, never by a
    minor version ("gpt-5" is not "gpt-5-4-mini", "claude-opus-4" is not "claude-opus-4-6")."""
    if name == prefix:
        return True
    if not name.startswith(prefix + "-"):
        return False
    segment = name[len(prefix) + 1 :].split("-", 1)[0]
    return not (segment.isdigit() and len(segment) <= 3)


class PriceTable:
    """Config overrides and the built-in table, by longest matching prefix (config first)."""

    def __init__(self, overrides: Mapping[str, Any] | None = None):
        self._overrides = {
            normalise(k): _price_of_override(v) for k, v in (overrides or {}).items()
        }
        # Each model's answer, found once: every call's usage is priced (a server's
        # every request), and both tables are fixed for the table's life.
        self._found: dict[str, Price | None] = {}

    def lookup(self, model: str) -> Price | None:
        """The price of `model`, or None when neither the config nor the table knows it."""
        if model in self._found:
            return self._found[model]
        price = self._lookup(model)
        if len(self._found) < _REMEMBERED:
            self._found[model] = price
        return price

    def _lookup(self, model: str) -> Price | None:
        name = normalise(model)
        # The longest matching prefix of either; at equal length the config wins.
        candidates = [
            (len(p), 1, price) for p, price in self._overrides.items() if _matches(name, p)
        ]
        candidates += [
            (len(p), 0, price) for p, price in BUILTIN_PRICES.items() if _matches(name, p)
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda c: (c[0], c[1]))[2]

    def cost(self, model: str, usage: Usage) -> float | None:
        """Dollars for one call (its hosted web searches included), or None when the
        model is unpriced."""
        price = self.lookup(model)
        if price is None:
            return None
        return price.cost(usage) + web_search_cost(model, usage.web_search_requests)


def web_search_cost(model: str, searches: int) -> float:
    """Dollars of `searches` hosted web searches made by `model` (0 when none or unknown)."""
    if searches <= 0:
        return 0.0
    name = normalise(model)
    found = [(len(p), per) for p, per in WEB_SEARCH_PER_1000.items() if name.startswith(p)]
    if not found:
        return 0.0
    return searches * max(found)[1] / 1000
