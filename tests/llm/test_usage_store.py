"""usage.db as older versions left it, and the per-session /model choice through the
runtime (the store's rows and totals on both engines: tests/storage/test_usage_contract.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.agent.turn import session_chain
from habakkuk.engine.config import ModelRef
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.llm.pricing import PriceTable
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Usage
from habakkuk.engine.llm.usage import UsageStore

SONNET = ModelRef("anthropic", "claude-sonnet-4-5")


TWO_MOCKS = """
providers:
  first:
    type: mock
    script:
      - text: "first answers"
  second:
    type: mock
    script:
      - text: "second answers"
agents:
  main:
    model: first/one
    mode: read-only
"""


async def test_session_model_is_tried_first_and_usage_is_recorded(runtime_factory: Any) -> None:
    runtime = await runtime_factory(TWO_MOCKS)
    session = await runtime.sessions.new_session("main")
    other = await runtime.sessions.new_session("main")
    assert await runtime.settings.set_session_model(session.id, "second/two") == ModelRef(
        "second", "two"
    )
    runtime.start_workers()
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hi"))
    assert outcome.reply == "second answers"
    untouched = await runtime.turns.wait_turn(await runtime.turns.submit(other.id, "hi"))
    assert untouched.reply == "first answers"
    # The agent's own chain stays behind the choice as its fallbacks.
    state = await runtime.state.turn_state(session.id)
    chain = session_chain(runtime.config, runtime.config.agent("main"), state)
    assert chain == [ModelRef("second", "two"), ModelRef("first", "one")]
    totals = {(t.model, t.agent): t.calls for t in await runtime.ledger.usage_totals()}
    assert totals == {("second/two", "main"): 1, ("first/one", "main"): 1}
    (mine,) = await runtime.ledger.usage_totals(session=session.id)
    assert mine.model == "second/two"


async def test_clearing_the_session_model_goes_back_to_the_agents_chain(
    runtime_factory: Any,
) -> None:
    runtime = await runtime_factory(TWO_MOCKS)
    session = await runtime.sessions.new_session("main")
    await runtime.settings.set_session_model(session.id, "second/two")
    await runtime.settings.set_session_model(session.id, None)
    assert await runtime.settings.session_model(session.id) is None
    runtime.start_workers()
    outcome = await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hi"))
    assert outcome.reply == "first answers"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nowhere/model", "provider 'nowhere' is not configured (providers: first, second)"),
        ("justamodel", "is not PROVIDER/MODEL"),
    ],
)
async def test_session_model_validation(runtime_factory: Any, text: str, message: str) -> None:
    runtime = await runtime_factory(TWO_MOCKS)
    session = await runtime.sessions.new_session("main")
    with pytest.raises(HabakkukError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await runtime.settings.set_session_model(session.id, text)
    assert await runtime.settings.session_model(session.id) is None


async def test_model_choices_an_older_version_kept_in_usage_db_move_to_state_db(
    runtime_factory: Any, home: Any
) -> None:
    import sqlite3

    legacy = await UsageStore.open(home.db_path("usage"))
    await legacy.db.write(
        lambda conn: conn.executemany(
            "INSERT INTO session_models (session, model, set_at) VALUES (?, ?, ?)",
            [("ses_old", "second/two", 1.0), ("ses_newer", "second/two", 1.0)],
        )
    )
    await legacy.close()
    first = await runtime_factory(TWO_MOCKS)
    # A choice made in state.db since then wins over the old copy.
    await first.state.set_setting("ses_newer", "model", "first/one")
    await first.close()
    with sqlite3.connect(home.db_path("usage")) as conn:
        conn.execute("INSERT INTO session_models VALUES ('ses_newer', 'second/two', 2.0)")
    runtime = await runtime_factory(TWO_MOCKS)
    assert await runtime.settings.session_model("ses_old") == ModelRef("second", "two")
    assert await runtime.settings.session_model("ses_newer") == ModelRef("first", "one")
    assert await runtime.usage.legacy_session_models() == {}


async def test_a_calls_hosted_web_uses_are_counted_and_an_older_usage_db_reads_zero(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "usage.db"
    store = await UsageStore.open(path, PriceTable())
    await store.record(SONNET, Caller("main", "s1"), Usage(10, 1))
    await store.close()
    # As a version 1 database left it: no hosted-tool columns, no migration 2.
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE calls DROP COLUMN web_searches")
    conn.execute("ALTER TABLE calls DROP COLUMN web_fetches")
    conn.execute("DELETE FROM schema_migrations WHERE version = 2")
    conn.commit()
    conn.close()
    store = await UsageStore.open(path, PriceTable())
    try:
        used = Usage(10, 1, web_search_requests=2, web_fetch_requests=1)
        cost = await store.record(SONNET, Caller("main", "s1"), used)
        assert cost == pytest.approx((10 * 3 + 15) / 1e6 + 0.02)
        (total,) = await store.totals(session="s1")
        assert (total.calls, total.web_searches, total.web_fetches) == (2, 2, 1)
    finally:
        await store.close()
