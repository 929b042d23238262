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


_SONNET_LONG = (200_000, _claude(6.0, 22.5))

BUILTIN_PRICES: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-5": _claude(5.0, 25.0),
    "claude-opus-4-1": _claude(15.0, 75.0),
    "claude-opus-4": _claude(15.0, 75.0),
    "claude-sonnet-4-5": _claude(3.0, 15.0, _SONNET_LONG),
    "claude-sonnet-4": _claude(3.0, 15.0, _SONNET_LONG),
    "claude-3-7-sonnet": _claude(3.0, 15.0),
    "claude-3-5-sonnet": _claude(3.0, 15.0),
    "claude-haiku-4-5": _claude(1.0, 5.0),
    "claude-3-5-haiku": _claude(0.8, 4.0),
    "claude-3-haiku": _claude(0.25, 1.25),
    "claude-3-opus": _claude(15.0, 75.0),
    # OpenAI
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
    "o1": _openai(15.0, 60.0, 7.50),
    # Google
    "gemini-2-5-pro": Price(1.25, 10.0, 0.125, 1.25, (200_000, Price(2.50, 15.0, 0.25, 2.50))),
    "gemini-2-5-flash-lite": Price(0.10, 0.40, 0.01, 0.10),
    "gemini-2-5-flash": Price(0.30, 2.50, 0.03, 0.30),
    "gemini-2-0-flash": Price(0.10, 0.40, 0.025, 0.10),
    # Others (list prices of their own APIs)
    "deepseek-chat": Price(0.28, 0.42, 0.028, 0.28),
    "deepseek-reasoner": Price(0.28, 0.42, 0.028, 0.28),
    "grok-4": Price(3.0, 15.0, 0.75, 3.0),
    "grok-code-fast": Price(0.20, 1.50, 0.02, 0.20),
    "mistral-large": Price(2.0, 6.0, 2.0, 2.0),
    "mistral-medium": Price(0.40, 2.0, 0.40, 0.40),
    "mistral-small": Price(0.10, 0.30, 0.10, 0.10),
    "codestral": Price(0.30, 0.90, 0.30, 0.30),
    # Google Gemini 3 (the native gemini adapter; Google's list prices, long-prompt tier
    # past 200k tokens on Pro; implicit cache reads at a tenth of input)
    "gemini-3-pro": Price(2.0, 12.0, 0.20, 2.0, (200_000, Price(4.0, 18.0, 0.40, 4.0))),
    "gemini-3-1-pro": Price(2.0, 12.0, 0.20, 2.0, (200_000, Price(4.0, 18.0, 0.40, 4.0))),
    "gemini-3-flash": Price(0.50, 3.0, 0.05, 0.50),
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
