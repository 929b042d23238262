"""Every model a preset's service or the setup screen offers has a list price, with its
long-prompt tier and cache prices where the vendor has them; the rest is unpriced."""

from __future__ import annotations

import pytest

from habakkuk.engine.config import PriceConfig
from habakkuk.engine.llm.pricing import BUILTIN_PRICES, PriceTable
from habakkuk.engine.llm.types import Usage
from habakkuk.engine.presets import PRESETS
from habakkuk.services.setup import CHOICES, Choice

# The models each hosted preset's service lists, spelled as users write them in config
# (the provider's own ids; OpenRouter's and Bedrock's with their prefixes).
PRESET_MODELS: dict[str, list[str]] = {
    "anthropic": [
        "claude-opus-4-6",
        "claude-opus-4-5-20251101",
        "claude-opus-4-1",
        "claude-sonnet-4-6",
        "claude-sonnet-4-5-20250929",
        "claude-sonnet-4-20250514",
        "claude-haiku-4-5-20251001",
        "claude-3-5-haiku-latest",
    ],
    "openai": [
        "gpt-5.4",
        "gpt-5.4-mini",
        "gpt-5.4-nano",
        "gpt-5.4-pro",
        "gpt-5.3-codex",
        "gpt-5.2",
        "gpt-5.2-pro",
        "gpt-5.1",
        "gpt-5.1-codex-max",
        "gpt-5.1-codex-mini",
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-nano",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4o",
        "gpt-4o-mini",
        "o3",
        "o4-mini",
        "gpt-image-1",
    ],
    "openrouter": [
        "anthropic/claude-sonnet-4.6",
        "openai/gpt-5.4-mini",
        "google/gemini-3-pro-preview",
        "x-ai/grok-4.1-fast",
        "deepseek/deepseek-v3.2",
        "meta-llama/llama-3.3-70b-instruct",
        "moonshotai/kimi-k2-0905",
    ],
    "groq": [
        "llama-3.3-70b-versatile",
        "llama-3.1-8b-instant",
        "meta-llama/llama-4-scout-17b-16e-instruct",
        "meta-llama/llama-4-maverick-17b-128e-instruct",
        "openai/gpt-oss-120b",
        "openai/gpt-oss-20b",
        "qwen/qwen3-32b",
        "moonshotai/kimi-k2-instruct-0905",
    ],
    "deepseek": ["deepseek-chat", "deepseek-reasoner"],
    "mistral": [
        "mistral-large-latest",
        "mistral-large-2411",
        "mistral-medium-latest",
        "mistral-small-latest",
        "magistral-medium-latest",
        "magistral-small-latest",
        "devstral-medium-latest",
        "devstral-small-latest",
        "codestral-latest",
        "pixtral-large-latest",
        "ministral-8b-latest",
        "ministral-3b-latest",
        "open-mistral-nemo",
    ],
    "together": [
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "openai/gpt-oss-120b",
        "deepseek-ai/DeepSeek-V3.1",
        "Qwen/Qwen3-235B-A22B-Instruct-2507-tput",
        "moonshotai/Kimi-K2-Instruct-0905",
    ],
    "xai": [
        "grok-4",
        "grok-4-0709",
        "grok-4-fast-reasoning",
        "grok-4-1-fast-non-reasoning",
        "grok-code-fast-1",
        "grok-3",
        "grok-3-mini",
    ],
    "fireworks": [
        "accounts/fireworks/models/llama-v3p3-70b-instruct",
        "accounts/fireworks/models/gpt-oss-120b",
        "accounts/fireworks/models/deepseek-v3p1",
        "accounts/fireworks/models/kimi-k2-instruct-0905",
    ],
    "cerebras": ["gpt-oss-120b", "llama-3.3-70b", "qwen-3-32b"],
    "gemini": [
        "gemini/gemini-3-pro-preview",
        "gemini-3.1-pro-preview",
        "gemini-3-flash-preview",
        "gemini-3-pro-image-preview",
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
        "gemini-2.5-flash-image",
        "gemini-2.0-flash",
        "gemini-2.0-flash-lite",
    ],
    "bedrock": [
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "global.anthropic.claude-opus-4-6-v1",
        "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
        "anthropic.claude-3-5-sonnet-20241022-v2:0",
        "amazon.nova-premier-v1:0",
        "us.amazon.nova-pro-v1:0",
        "amazon.nova-lite-v1:0",
        "amazon.nova-micro-v1:0",
        "us.meta.llama3-3-70b-instruct-v1:0",
        "us.meta.llama4-maverick-17b-instruct-v1:0",
        "meta.llama3-1-8b-instruct-v1:0",
        "mistral.mistral-large-2407-v1:0",
        "us.deepseek.r1-v1:0",
        "openai.gpt-oss-120b-1:0",
        "openai.gpt-oss-20b-1:0",
    ],
}

# Presets for servers on the user's own machine: their models cost nothing to list and
# are priced (at 0, if wanted) with `pricing:`.
LOCAL = {name for name, preset in PRESETS.items() if "://127.0.0.1" in (preset.base_url or "")}
# Presets reached through a subscription login (`habakkuk auth login`): their calls cost $0.
LOGINS = {name for name, preset in PRESETS.items() if preset.auth is not None}


def test_every_hosted_preset_lists_its_models() -> None:
    assert set(PRESET_MODELS) == set(PRESETS) - LOCAL - LOGINS


@pytest.mark.parametrize("model", [m for models in PRESET_MODELS.values() for m in models], ids=str)
def test_every_preset_model_has_a_list_price(model: str) -> None:
    assert PriceTable().lookup(model) is not None, model


# The setup's choices with a model of a paid service (the demo's costs nothing; "any
# OpenAI-compatible server" names none).
OFFERED = [c for c in CHOICES if c.default_model and not c.is_demo]


@pytest.mark.parametrize("choice", OFFERED, ids=[c.name for c in OFFERED])
def test_every_model_the_setup_offers_has_a_price(choice: Choice) -> None:
    assert PriceTable().lookup(choice.default_model) is not None, choice.default_model


@pytest.mark.parametrize(
    ("model", "short", "long"),
    [
        # (model, $ for 100k in + 10k out, $ for 300k in + 10k out: the long-prompt tier)
        ("gemini-2.5-pro", 0.125 + 0.10, 0.75 + 0.15),
        ("gemini-3-pro-preview", 0.20 + 0.12, 1.20 + 0.18),
        ("claude-sonnet-4-6", 0.30 + 0.15, 1.80 + 0.225),
        ("claude-opus-4-6", 0.50 + 0.25, 3.0 + 0.375),
        ("grok-4", 0.30 + 0.15, 1.80 + 0.30),
        ("gpt-5.4", 0.25 + 0.15, 1.50 + 0.225),  # its tier starts past 272k
    ],
)
def test_long_prompt_tiers_bill_the_whole_call_higher(
    model: str, short: float, long: float
) -> None:
    table = PriceTable()
    assert table.cost(model, Usage(100_000, 10_000)) == pytest.approx(short)
    assert table.cost(model, Usage(300_000, 10_000)) == pytest.approx(long)


def test_gpt_5_4_past_272k_tokens_costs_double_input_and_half_again_output() -> None:
    cost = PriceTable().cost("gpt-5.4", Usage(250_000, 10_000))
    assert cost == pytest.approx(250_000 * 2.50 / 1e6 + 10_000 * 15.0 / 1e6)
    long = PriceTable().cost("gpt-5.4", Usage(280_000, 10_000))
    assert long == pytest.approx(280_000 * 5.0 / 1e6 + 10_000 * 22.5 / 1e6)


@pytest.mark.parametrize(
    ("model", "cache_read"),
    [
        ("gemini-2.5-flash", 0.03),
        ("gemini-3-flash-preview", 0.05),
        ("gpt-5.4-mini", 0.075),
        ("claude-sonnet-4-6", 0.30),
        ("deepseek-chat", 0.028),
        ("grok-code-fast-1", 0.02),
        ("us.amazon.nova-pro-v1:0", 0.20),
        ("mistral-small-latest", 0.10),  # no discount: cached tokens bill as input
    ],
)
def test_cache_reads_have_the_vendors_price(model: str, cache_read: float) -> None:
    # 100k tokens: under every long-prompt tier.
    cost = PriceTable().cost(model, Usage(cache_read_tokens=100_000))
    assert cost == pytest.approx(cache_read / 10)


def test_an_override_wins_over_a_tiered_list_price() -> None:
    table = PriceTable({"gemini-2.5-pro": PriceConfig(input=1.0, output=1.0)})
    assert table.cost("gemini/gemini-2.5-pro", Usage(300_000, 0)) == pytest.approx(0.3)


def test_image_models_are_not_priced_as_their_text_siblings() -> None:
    table = PriceTable()
    image = table.cost("gemini-2.5-flash-image", Usage(0, 1_000_000))
    text = table.cost("gemini-2.5-flash", Usage(0, 1_000_000))
    assert image == pytest.approx(30.0)
    assert text == pytest.approx(2.50)


def test_the_table_has_no_prefix_shadowed_by_a_shorter_one() -> None:
    # Each key prices itself (none is taken over by another key).
    table = PriceTable()
    for key, price in BUILTIN_PRICES.items():
        assert table.lookup(key) is price, key
