"""The usage ledger's store (engine/llm/usage.py) behaves the same on SQLite and
PostgreSQL: rows recorded with their cost, totals by model and agent (and since a day),
generations as their own kind, and retention."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from habakkuk.engine.config import ModelRef
from habakkuk.engine.llm.pricing import PriceTable
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Usage
from habakkuk.engine.llm.usage import SCHEMA, UsageStore
from habakkuk.engine.storage import Storage

SONNET = ModelRef("anthropic", "claude-sonnet-4-5")
LOCAL = ModelRef("local", "llama3.1")


@pytest.fixture
async def usage(storage: Storage) -> AsyncIterator[UsageStore]:
    store = UsageStore(await storage.open(SCHEMA), PriceTable())
    try:
        yield store
    finally:
        await store.close()


async def test_calls_are_recorded_with_cost_and_totalled_by_model_and_agent(
    usage: UsageStore,
) -> None:
    cost = await usage.record(SONNET, Caller("main", "s1"), Usage(1000, 100))
    assert cost == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    await usage.record(SONNET, Caller("main", "s2"), Usage(2000, 200, 5000, 10))
    await usage.record(SONNET, Caller("coder", "s3"), Usage(10, 1))
    assert await usage.record(LOCAL, Caller("main", "s1"), Usage(50, 5)) is None
    totals = {(t.model, t.agent): t for t in await usage.totals()}
    main = totals[("anthropic/claude-sonnet-4-5", "main")]
    assert (main.calls, main.input_tokens, main.output_tokens) == (2, 3000, 300)
    assert (main.cache_read_tokens, main.cache_write_tokens) == (5000, 10)
    assert main.unpriced_calls == 0 and isinstance(main.calls, int)
    assert main.cost == pytest.approx((3000 * 3 + 300 * 15 + 5000 * 0.3 + 10 * 3.75) / 1e6)
    local = totals[("local/llama3.1", "main")]
    assert (local.cost, local.unpriced_calls) == (0.0, 1)
    assert [t.agent for t in await usage.totals(agent="coder")] == ["coder"]
    assert sorted(t.model for t in await usage.totals(session="s1")) == [
        "anthropic/claude-sonnet-4-5",
        "local/llama3.1",
    ]
    # The most expensive first.
    first = (await usage.totals())[0]
    assert (first.model, first.agent) == ("anthropic/claude-sonnet-4-5", "main")


async def test_totals_since_a_day_leave_out_older_calls(usage: UsageStore) -> None:
    now = time.time()
    await usage.record(SONNET, Caller("main"), Usage(1, 1), at=now - 10 * 86400)
    await usage.record(SONNET, Caller("main"), Usage(2, 2), at=now - 60)
    (recent,) = await usage.totals(since=now - 86400)
    assert (recent.calls, recent.input_tokens) == (1, 2)


async def test_generations_and_searches_are_their_own_kind(usage: UsageStore) -> None:
    await usage.record(SONNET, Caller("main", "s1"), Usage(10, 1, web_search_requests=2))
    image = ModelRef("openai", "gpt-image-1")
    await usage.record_generation("image", image, Caller("main", "s1"), Usage(12, 4160))
    await usage.record_generation("image", image, Caller("main", "s1"), Usage(12, 4160))
    sketch = ModelRef("acme", "sketcher-1")  # no list price: counted as unpriced
    await usage.record_generation("image", sketch, Caller("main", "s1"), Usage(5, 100))
    clip = ModelRef("fal", "fal-ai/veo3")
    cost = await usage.record_generation("video", clip, Caller("main", "s1"), Usage(), cost=3.2)
    assert cost == 3.2
    totals = {t.model: t for t in await usage.totals(session="s1")}
    assert set(totals) == {
        "anthropic/claude-sonnet-4-5",
        "openai/gpt-image-1 [image]",
        "acme/sketcher-1 [image]",
        "fal/fal-ai/veo3 [video]",
    }
    assert totals["anthropic/claude-sonnet-4-5"].web_searches == 2
    images = totals["openai/gpt-image-1 [image]"]
    # Priced by the table's tokens (gpt-image-1: $5 in, $40 out per million) when the
    # provider reported no cost.
    assert (images.calls, images.output_tokens, images.unpriced_calls) == (2, 8320, 0)
    assert images.cost == pytest.approx(2 * (12 * 5 + 4160 * 40) / 1e6)
    sketches = totals["acme/sketcher-1 [image]"]
    assert (sketches.calls, sketches.cost, sketches.unpriced_calls) == (1, 0.0, 1)
    video = totals["fal/fal-ai/veo3 [video]"]
    assert (video.calls, video.cost, video.unpriced_calls) == (1, 3.2, 0)


async def test_retention_deletes_only_rows_older_than_the_cutoff(usage: UsageStore) -> None:
    now = time.time()
    await usage.record(SONNET, Caller("main"), Usage(1, 1), at=now - 40 * 86400)
    await usage.record(SONNET, Caller("main"), Usage(1, 1), at=now - 20 * 86400)
    await usage.record(SONNET, Caller("main"), Usage(1, 1), at=now)
    assert await usage.prune(30) == 1
    (total,) = await usage.totals()
    assert total.calls == 2


async def test_legacy_model_choices_are_read_and_forgotten(usage: UsageStore) -> None:
    await usage.db.write(
        lambda conn: conn.execute(
            "INSERT INTO session_models(session, model, set_at) VALUES ('ses_1', 'a/b', 1.0)"
        )
    )
    assert await usage.legacy_session_models() == {"ses_1": "a/b"}
    await usage.forget_legacy_session_models(["ses_1"])
    assert await usage.legacy_session_models() == {}
