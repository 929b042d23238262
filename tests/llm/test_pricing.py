"""Cost from config overrides and the built-in list-price table."""

from __future__ import annotations

import pytest

from habakkuk.engine.config import PriceConfig
from habakkuk.engine.llm.pricing import PriceTable, normalise
from habakkuk.engine.llm.types import Usage


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("openrouter/openai/gpt-4.1-mini", "gpt-4-1-mini"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001-v1"),
        ("global.anthropic.claude-opus-4-1", "claude-opus-4-1"),
        ("gemini/gemini-2.5-pro", "gemini-2-5-pro"),
    ],
)
def test_model_ids_are_normalised_across_gateways_and_regions(model: str, expected: str) -> None:
    assert normalise(model) == expected


def test_anthropic_call_costs_every_token_kind() -> None:
    usage = Usage(
        input_tokens=1000, output_tokens=200, cache_read_tokens=10_000, cache_write_tokens=500
    )
    cost = PriceTable().cost("claude-haiku-4-5", usage)
    # $1 in, $5 out, $0.10 cache read, $1.25 cache write per million
    assert cost == pytest.approx((1000 * 1 + 200 * 5 + 10_000 * 0.1 + 500 * 1.25) / 1e6)


def test_longest_prefix_wins_and_dated_ids_match() -> None:
    table = PriceTable()
    assert table.cost("gpt-5-mini-2025-08-07", Usage(1_000_000, 0)) == pytest.approx(0.25)
    assert table.cost("gpt-5-2025-08-07", Usage(1_000_000, 0)) == pytest.approx(1.25)


def test_a_newer_minor_version_is_not_priced_as_the_older_model() -> None:
    table = PriceTable()
    assert table.lookup("gpt-5.9-mini") is None
    assert table.lookup("claude-opus-4-9") is None
    assert table.lookup("grok-4-7") is None


def test_long_prompts_use_the_higher_tier() -> None:
    table = PriceTable()
    short = table.cost("claude-sonnet-4-5", Usage(100_000, 1000))
    long = table.cost("claude-sonnet-4-5", Usage(150_000, 1000, cache_read_tokens=60_000))
    assert short == pytest.approx((100_000 * 3 + 1000 * 15) / 1e6)
    assert long == pytest.approx((150_000 * 6 + 1000 * 22.5 + 60_000 * 0.6) / 1e6)


def test_config_overrides_win_over_the_table() -> None:
    table = PriceTable({"gpt-5": PriceConfig(input=2.0, output=4.0, cache_read=0.0)})
    usage = Usage(1_000_000, 1_000_000, cache_read_tokens=1_000_000)
    assert table.cost("gpt-5", usage) == pytest.approx(6.0)
    # A model the override does not name still gets its list price.
    assert table.cost("gpt-5-mini", Usage(1_000_000, 0)) == pytest.approx(0.25)


def test_unknown_models_are_unpriced() -> None:
    assert PriceTable().cost("my-local-llama", Usage(1000, 1000)) is None


def test_a_model_priced_again_gets_the_same_answer() -> None:
    table = PriceTable({"gpt-5": PriceConfig(input=2.0, output=4.0, cache_read=0.0)})
    usage = Usage(1_000_000, 1_000_000)
    for _ in range(3):  # the second and later lookups come from the table's memory
        assert table.cost("gpt-5", usage) == pytest.approx(6.0)
        assert table.cost("gpt-5-mini", Usage(1_000_000, 0)) == pytest.approx(0.25)
        assert table.cost("my-local-llama", usage) is None


def test_hosted_web_searches_cost_per_thousand_on_top_of_the_tokens() -> None:
    table = PriceTable()
    tokens = table.cost("claude-haiku-4-5", Usage(1000, 100))
    assert tokens is not None
    searched = Usage(1000, 100, web_search_requests=3, web_fetch_requests=2)
    # $10 per 1,000 searches; a fetch costs only the tokens it adds.
    assert table.cost("claude-haiku-4-5", searched) == pytest.approx(tokens + 0.03)
    assert table.cost("openrouter/openai/gpt-5", Usage(web_search_requests=1)) == pytest.approx(
        0.01
    )
    assert table.cost("llama3.1", searched) is None  # an unpriced model stays unpriced
