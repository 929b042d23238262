"""The enforcement itself: periods in the config timezone, a call's worst case, the
ledger's holds and reads, and the budget service's check on a real usage.db (the
router's pre-call hook called as the router calls it)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from habakkuk.engine.config import Config, ModelRef, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.llm.budget import (
    INSTALL,
    BudgetPaused,
    Ledger,
    input_tokens,
    periods_at,
    worst_case,
)
from habakkuk.engine.llm.pricing import Price, PriceTable
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Message, ModelRequest, Usage
from habakkuk.engine.llm.usage import UsageStore
from habakkuk.services.budget import Budget

TORONTO = ZoneInfo("America/Toronto")
REF = ModelRef("mock", "scripted")


def request(text: str = "x" * 4000, max_tokens: int = 1000) -> ModelRequest:
    return ModelRequest("", "", [Message.user_text(text)], max_tokens=max_tokens)


def test_periods_end_at_the_next_local_midnight_even_on_a_dst_day() -> None:
    # 2026-11-01 is the day Toronto leaves daylight time: 25 hours long.
    noon = datetime(2026, 11, 1, 12, tzinfo=TORONTO).timestamp()
    p = periods_at(noon, TORONTO)
    assert (p.day, p.month) == ("2026-11-01", "2026-11")
    assert p.day_end.isoformat() == "2026-11-02T00:00:00-05:00"
    assert (p.day_end.timestamp() - p.day_start.timestamp()) / 3600 == 25
    december = periods_at(datetime(2026, 12, 31, 23, 59, tzinfo=TORONTO).timestamp(), TORONTO)
    assert december.month_end.isoformat() == "2027-01-01T00:00:00-05:00"
    assert december.day_end == december.month_end


def test_the_worst_case_is_the_input_priced_now_plus_every_output_token() -> None:
    price = Price(input=2.0, output=10.0)
    call = request("x" * 4000, max_tokens=1000)
    tokens = input_tokens(call)
    assert 1000 <= tokens <= 1010  # 4000 bytes / 4, and the envelope
    assert worst_case(price, call) == pytest.approx((tokens * 2.0 + 1000 * 10.0) / 1e6)
    thinking = ModelRequest("", "", call.messages, max_tokens=1000, thinking="high")
    assert worst_case(price, thinking) > worst_case(price, call)  # its budget is output too
    tiered = Price(1.0, 1.0, long_prompt=(500, Price(5.0, 5.0)))
    assert worst_case(tiered, call) == pytest.approx((tokens * 5.0 + 1000 * 5.0) / 1e6)


def test_non_ascii_text_is_counted_by_its_bytes() -> None:
    assert input_tokens(request("é" * 4000)) >= 2000


def test_a_read_drops_the_calls_it_already_counted_and_keeps_the_later_ones() -> None:
    ledger = Ledger()
    key = (INSTALL, "2026-11-09")
    first = ledger.hold(1.0, [key], "t1")
    assert ledger.committed(key) == 1.0 and ledger.settled(key) == 0.0
    ledger.settle(first, 0.25)
    mark = ledger.begin_read()  # a read starts: the first call's row is in usage.db
    second = ledger.hold(1.0, [key], "t1")
    ledger.settle(second, 0.5)  # settled while the read ran: its row may be missing
    ledger.load(mark, {key: 0.25})
    assert ledger.settled(key) == pytest.approx(0.75)  # counted once each
    assert ledger.turn_spent("t1") == pytest.approx(0.75)
    third = ledger.hold(2.0, [key], "t1")
    ledger.release(third)
    ledger.release(third)  # twice is once
    assert ledger.committed(key) == pytest.approx(0.75)


async def open_budget(tmp_path: Path, budget: str, *, agent: str = "") -> Budget:
    home = Home(tmp_path / "home")
    home.prepare()
    text = (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n"
        + (f"    budget: {agent}\n" if agent else "")
        + "pricing:\n  scripted: {input: 1.0, output: 1.0}\n"
        + f"budget: {budget}\n"
    )
    config = parse_config(text, home.config_path, home)
    store = await UsageStore.open(tmp_path / "usage.db", PriceTable(config.pricing))
    return Budget(config, store, None)


async def call(budget: Budget, caller: Caller, usage: Usage, call: ModelRequest) -> None:
    """One call as the router makes it: reserve, record the row, settle."""
    settle = await budget.before_call(REF, caller, call)
    assert budget.usage is not None
    await budget.usage.record(REF, caller, usage)
    settle(usage)


async def test_a_call_that_does_not_fit_is_refused_and_the_install_is_paused(
    tmp_path: Path,
) -> None:
    budget = await open_budget(tmp_path, "{daily: 0.01}")
    caller = Caller("main", "s1", turn="t1")
    small = request("x" * 400, max_tokens=1000)  # reserves about $0.0011
    for _ in range(6):
        await call(budget, caller, Usage(input_tokens=100, output_tokens=1000), small)
    assert budget.paused("main") is None
    with pytest.raises(BudgetPaused) as refused:
        await budget.before_call(REF, caller, request(max_tokens=4000))
    assert refused.value.kind == "daily" and refused.value.error_class == "billing"
    assert str(refused.value).startswith("Paused: the daily budget of $0.01 for this install")
    assert budget.paused("main") == refused.value.message
    assert budget.usage is not None
    await budget.usage.close()


async def test_spend_written_by_another_process_is_seen_at_the_next_read(
    tmp_path: Path,
) -> None:
    budget = await open_budget(tmp_path, "{daily: 1}")
    assert budget.usage is not None
    other = await UsageStore.open(tmp_path / "usage.db", budget.usage.prices)
    await other.record(REF, Caller("main"), Usage(output_tokens=2_000_000))  # $2
    await budget.refresh(force=True)
    assert budget.paused("main") is not None
    await other.close()
    await budget.usage.close()


async def test_a_call_waits_for_running_calls_to_settle_when_it_would_fit_after(
    tmp_path: Path,
) -> None:
    budget = await open_budget(tmp_path, "{daily: 1}")
    big = request("", max_tokens=600_000)  # reserves $0.60
    running = await budget.before_call(REF, Caller("main", "s1"), big)
    waiting = asyncio.ensure_future(budget.before_call(REF, Caller("main", "s2"), big))
    await asyncio.sleep(0)  # it checks, and waits: 0.60 + 0.60 > 1 only while one runs
    assert not waiting.done()
    running(Usage(output_tokens=100_000))  # cost $0.10: 0.10 + 0.60 fits
    settle = await asyncio.wait_for(waiting, 5)
    settle(None)
    third = await budget.before_call(REF, Caller("main", "s3"), big)  # $0.10 spent: fits
    with pytest.raises(TimeoutError):  # 0.10 + 0.60 held + 0.60: it waits for the third
        await asyncio.wait_for(budget.before_call(REF, Caller("main", "s4"), big), 0.2)
    third(Usage(output_tokens=500_000))  # $0.60 spent in all: the next one is refused
    with pytest.raises(BudgetPaused):
        await budget.before_call(REF, Caller("main", "s5"), big)
    assert budget.usage is not None
    await budget.usage.close()


async def test_the_per_turn_limit_counts_the_turns_settled_calls(tmp_path: Path) -> None:
    budget = await open_budget(tmp_path, "{per_turn: 0.5}")
    turn = Caller("main", "s1", turn="t1")
    step = request("", max_tokens=200_000)  # reserves $0.20
    await call(budget, turn, Usage(output_tokens=200_000), step)
    await call(budget, turn, Usage(output_tokens=200_000), step)
    with pytest.raises(BudgetPaused) as refused:  # 0.40 spent + 0.20 > 0.50
        await budget.before_call(REF, turn, step)
    assert refused.value.kind == "per_turn"
    await budget.before_call(REF, Caller("main", "s1", turn="t2"), step)  # a new turn
    assert budget.paused("main") is None  # a turn's limit pauses nothing else
    assert budget.usage is not None
    await budget.usage.close()


async def test_no_limit_set_means_no_read_and_no_hold(tmp_path: Path) -> None:
    budget = await open_budget(tmp_path, "{}")
    settle = await budget.before_call(REF, Caller("main"), request(max_tokens=10**9))
    settle(Usage(output_tokens=10))
    assert not budget.ledger.held and not budget.ledger.recent
    assert budget.usage is not None
    await budget.usage.close()


@pytest.mark.parametrize(
    "section,says",
    [
        ("budget: {daily: -5}\n", ":7: budget.daily: must be a dollar amount >= 0"),
        ("budget: {weekly: 5}\n", ":7: budget.weekly: unknown key"),
        ("budget: {unknown_price: maybe}\n", "budget.unknown_price: must be one of allow, deny"),
        ("budget: {daily: .inf}\n", ":7: budget.daily: must be a dollar amount >= 0"),
    ],
)
def test_bad_budget_config_names_the_file_line_and_key(
    tmp_path: Path, section: str, says: str
) -> None:
    home = Home(tmp_path)
    text = (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n" + section
    )
    with pytest.raises(ConfigError) as error:
        parse_config(text, home.config_path, home)
    assert says in str(error.value)


def test_an_agents_budget_takes_only_its_limits(tmp_path: Path) -> None:
    home = Home(tmp_path)
    text = (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n    budget: {unknown_price: deny}\n"
    )
    with pytest.raises(ConfigError) as error:
        parse_config(text, home.config_path, home)
    assert ":7: agents.main.budget.unknown_price: unknown key" in str(error.value)
    ok: Config = parse_config(
        text.replace("unknown_price: deny", "daily: 2, per_turn: 0.5"), home.config_path, home
    )
    assert (ok.agents["main"].budget.daily, ok.agents["main"].budget.per_turn) == (2.0, 0.5)


async def test_calls_through_a_subscription_login_reserve_nothing(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    home.prepare()
    text = (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n"
        "pricing:\n  scripted: {input: 1.0, output: 1.0}\n"
        "budget: {daily: 0.01}\n"
    )
    config = parse_config(text, home.config_path, home)
    # The mock provider counted as a login (as `auth: chatgpt` providers are): $0 a call.
    store = await UsageStore.open(tmp_path / "usage.db", PriceTable(config.pricing))
    store.free = frozenset({REF.provider})
    budget = Budget(config, store, None)
    caller = Caller("main", "s1", turn="t1")
    for _ in range(3):  # each would reserve about $4 at list price
        await call(
            budget,
            caller,
            Usage(input_tokens=100, output_tokens=1000),
            request(max_tokens=4_000_000),
        )
    assert budget.paused("main") is None
    await store.close()


@pytest.mark.parametrize("value", [".nan", ".inf", "-1"])
def test_a_price_that_is_not_a_finite_amount_is_a_config_error(tmp_path: Path, value: str) -> None:
    # a NaN price slipped past `< 0` and made a priced model free of every limit
    home = Home(tmp_path)
    text = (
        "providers:\n  mock:\n    type: mock\n"
        "agents:\n  main:\n    model: mock/scripted\n"
        f"pricing:\n  scripted: {{input: 1.0, output: {value}}}\n"
    )
    with pytest.raises(ConfigError) as error:
        parse_config(text, home.config_path, home)
    assert ":8: pricing.scripted.output: must be >= 0 and finite" in str(error.value)
