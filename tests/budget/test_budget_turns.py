"""Spending limits through the real runtime: a turn over the limit ends paused with the
spec's message, /budget shows the spend, the owner's /budget raise lifts the pause, a
chat is told once per period, a schedule's run is skipped with the reason and a card
waits, GET /api/budget answers 001's shape, and `habakkuk run` exits 1 with the message.

The model is the offline mock provider; its price is config `pricing:` (dollars per
million tokens), so every cost is known. Spend already made today is a usage.db row
written through the usage store, as a model call records it."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.conversation.commands import dispatch
from habakkuk.conversation.run import RunConversation
from habakkuk.engine.config import ModelRef
from habakkuk.engine.exit_codes import EXIT_FAILED
from habakkuk.engine.home import Home
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Usage
from habakkuk.runtime import Runtime
from habakkuk.work.schedule_types import NewSchedule
from tests.conftest import OpenRuntime, WriteConfig, mock_config
from tests.helpers import eventually
from tests.server.conftest import TOKEN, serve  # noqa: F401  (the fixture)

# $1 per million input and output tokens: a million tokens is a dollar.
PRICED = "pricing:\n  scripted: {input: 1.0, output: 1.0}\n"


def budget_config(budget: str, *, agent_budget: str = "", extra: str = "") -> str:
    agent = f"    budget: {agent_budget}\n" if agent_budget else ""
    return mock_config("- text: hello", extra=agent + PRICED + f"budget: {budget}\n" + extra)


async def spend(runtime: Runtime, dollars: float, agent: str = "main") -> None:
    """A call of `dollars` recorded today (output tokens at $1 a million)."""
    tokens = round(dollars * 1_000_000)
    assert runtime.usage is not None
    await runtime.usage.record(
        ModelRef("mock", "scripted"), Caller(agent, "ses_x"), Usage(output_tokens=tokens)
    )


async def one_turn(runtime: Runtime, text: str = "hi", **submit: Any) -> Any:
    runtime.start_workers(channels=False)
    session = await runtime.sessions.new_session("main")
    turn = await runtime.turns.submit(session.id, text, **submit)
    return await runtime.turns.wait_turn(turn)


async def test_a_turn_over_the_daily_limit_ends_with_the_paused_message_and_no_call(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(budget_config("{daily: 5}"))
    await spend(runtime, 5.0)
    calls_before = await runtime.ledger.usage_totals()
    outcome = await one_turn(runtime)
    assert outcome.status == "failed"
    assert outcome.error.startswith("Paused: the daily budget of $5.00 for this install is used up")
    assert "/budget raise AMOUNT" in outcome.error and "budget.daily" in outcome.error
    assert await runtime.ledger.usage_totals() == calls_before  # no model call was made


async def test_the_owner_raise_lifts_the_pause_for_today_and_the_turn_runs(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(budget_config("{daily: 5}"))
    await spend(runtime, 5.0)
    conv = RunConversation(runtime, None, None)
    shown = await dispatch("/budget", conv)
    assert shown is not None and "today $5.00 of $5.00 (100%)" in shown.text
    assert "Paused: the daily budget" in shown.text
    raised = await dispatch("/budget raise 2", conv)
    assert raised is not None and not raised.error, raised
    assert "now $7.00" in raised.text
    outcome = await one_turn(runtime)
    assert outcome.status == "done", outcome.error
    status = await runtime.budget.status()
    assert status.install.today.limit == 7.0 and not status.install.paused


async def test_budget_raise_refuses_a_limit_that_is_not_set_and_a_bad_amount(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(budget_config("{daily: 5}"))
    conv = RunConversation(runtime, None, None)
    monthly = await dispatch("/budget raise monthly 3", conv)
    assert monthly is not None and monthly.error and "no monthly limit" in monthly.text
    bad = await dispatch("/budget raise lots", conv)
    assert bad is not None and bad.error and "positive number" in bad.text


async def test_an_agents_own_limit_pauses_that_agent_only(runtime_factory: OpenRuntime) -> None:
    runtime = await runtime_factory(budget_config("{monthly: 100}", agent_budget="{daily: 1}"))
    await spend(runtime, 1.5)
    outcome = await one_turn(runtime)
    assert outcome.status == "failed"
    assert outcome.error.startswith("Paused: the daily budget of $1.00 for agent main")
    status = await runtime.budget.status()
    assert status.install.month.spent == pytest.approx(1.5)
    assert status.install.month.percent == 1.5


async def test_a_turn_whose_call_does_not_fit_the_per_turn_limit_stops(
    runtime_factory: OpenRuntime,
) -> None:
    # The call reserves its 8192 output tokens at $100 a million: $0.82, over $0.50.
    config = mock_config(
        "- text: finished",
        extra="pricing:\n  scripted: {input: 1.0, output: 100.0}\nbudget: {per_turn: 0.5}\n",
    )
    runtime = await runtime_factory(config)
    outcome = await one_turn(runtime)
    assert outcome.status == "failed"
    assert outcome.error.startswith("Stopped: this turn used up the per-turn budget of $0.50")


async def test_an_unpriced_model_is_refused_with_deny_and_let_through_with_allow(
    runtime_factory: OpenRuntime,
) -> None:
    denied = await runtime_factory(
        mock_config("- text: hi", extra="budget: {daily: 5, unknown_price: deny}\n")
    )
    outcome = await one_turn(denied)
    assert outcome.status == "failed" and "has no known price" in outcome.error
    await denied.close()
    allowed = await runtime_factory(mock_config("- text: hi", extra="budget: {daily: 5}\n"))
    assert (await one_turn(allowed)).status == "done"


async def test_a_schedule_run_is_skipped_with_the_reason_while_paused(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(budget_config("{daily: 5}"))
    await spend(runtime, 6.0)
    runtime.start_workers(channels=False)
    schedule = await runtime.schedules.add(
        NewSchedule(agent="main", name="digest", when="@daily", prompt="summarise"), by="owner"
    )
    job = await runtime.schedules.run_now(schedule.id)
    rows: list[Any] = []

    async def settled() -> bool:
        rows[:] = [
            r
            for r in await runtime.schedules.runs(schedule.id)
            if r.job == job and r.status not in ("queued", "running")
        ]
        return bool(rows)

    await eventually(settled, what="the slot to settle")
    assert rows[0].status == "skipped"
    assert rows[0].reason.startswith("Paused: the daily budget of $5.00 for this install")
    assert (await runtime.schedules.get(schedule.id)).last_status.startswith("skipped: Paused")


async def test_a_card_waits_todo_while_its_assignee_is_paused_then_runs(
    runtime_factory: OpenRuntime,
) -> None:
    from habakkuk.work.board_dispatch import Dispatcher
    from habakkuk.work.board_store import BoardStore
    from habakkuk.work.board_types import NewCard

    runtime = await runtime_factory(budget_config("{daily: 5}"))
    await spend(runtime, 6.0)
    runtime.start_workers(channels=False)
    dispatcher = Dispatcher(
        BoardStore(runtime.queue.db),
        runtime.queue,
        runtime.turns,
        lambda: runtime.outbox,
        runtime.home.root,
        interval=600.0,
        budget=runtime.budget,
    )
    card = await runtime.board.create(NewCard(title="write it", assignee="main"), by="owner")
    report = await dispatcher.look()
    assert report.dispatched == 0
    waiting = await runtime.board.get(card.id)
    assert waiting.status == "todo" and waiting.attempt == 0
    await runtime.budget.raise_limit("daily", 10)  # the owner lifts it: the card goes
    assert (await dispatcher.look()).dispatched == 1

    async def ended() -> bool:
        return (await runtime.board.get(card.id)).status != "doing"

    await eventually(ended, what="the card's attempt to end")
    # It ran (the mock never calls board_complete): blocked by its turn, not by the budget.
    after = await runtime.board.get(card.id)
    assert "Paused" not in after.blocked_reason


async def test_a_chat_is_told_of_the_pause_once_per_period(serve: Any) -> None:  # noqa: F811
    served = await serve(budget_config("{daily: 5}"))
    runtime = served.runtime
    await spend(runtime, 5.0)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for n in range(3):
        async with served.client.post(
            f"{served.url}/api/chat",
            json={"conversation": "w1", "text": f"hello {n}"},
            headers=headers,
        ) as response:
            assert response.status in (200, 202), await response.text()

    async def told() -> list[str]:
        events = await served.server.web_store().events("w1")
        return [e.text for e in events if e.role != "user" and "Paused" in e.text]

    await eventually(lambda: _failed_turns(runtime, 3), what="three paused turns", timeout=30)
    await runtime.budget.settled()
    await eventually(told, what="the pause told in the chat")
    said = await told()
    assert len(said) == 1, said
    assert said[0].startswith("Paused: the daily budget of $5.00 for this install")


async def _failed_turns(runtime: Runtime, count: int) -> bool:
    failures = await runtime.turns.recent_failures(20)
    return sum(1 for job in failures if "Paused" in (job.error or "")) >= count


async def test_api_budget_answers_the_shape_of_001(serve: Any) -> None:  # noqa: F811
    served = await serve(
        budget_config(
            "{daily: 5, monthly: 100, per_turn: 1.5}", extra="timezone: America/Toronto\n"
        )
    )
    await spend(served.runtime, 4.2)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with served.client.get(f"{served.url}/api/budget", headers=headers) as response:
        assert response.status == 200
        body = await response.json()
    assert set(body) == {"timezone", "day", "month", "unknown_price", "install", "agents"}
    assert body["timezone"] == "America/Toronto" and body["unknown_price"] == "allow"
    assert len(body["day"]) == 10 and body["month"] == body["day"][:7]
    today = body["install"]["today"]
    assert today["spent"] == pytest.approx(4.2) and today["limit"] == 5
    assert today["percent"] == 84 and today["resets"].endswith(("-05:00", "-04:00"))
    assert today["resets"].startswith(body["day"][:8]) or today["resets"][8:10] == "01"
    month = body["install"]["month"]
    assert month["limit"] == 100 and month["percent"] == 4.2
    assert month["resets"][8:19] == "01T00:00:00"
    assert body["install"]["per_turn"] == 1.5
    (agent,) = body["agents"]
    assert agent["agent"] == "main" and agent["paused"] is None
    assert agent["today"]["spent"] == pytest.approx(4.2)
    await spend(served.runtime, 1.0)
    async with served.client.get(
        f"{served.url}/api/budget?agent=main", headers=headers
    ) as response:
        paused = (await response.json())["agents"][0]["paused"]
    assert paused.startswith("Paused: the daily budget of $5.00 for this install is used up;")
    async with served.client.get(
        f"{served.url}/api/budget?agent=ghost", headers=headers
    ) as response:
        assert response.status == 404


def test_habakkuk_run_prints_the_pause_and_exits_1(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(budget_config("{daily: 0.5}"))
    import asyncio

    from habakkuk.engine.config import load_config

    async def spent() -> None:
        runtime = await Runtime.open(home, load_config(home))
        try:
            await spend(runtime, 0.75)
        finally:
            await runtime.close()

    asyncio.run(spent())
    assert main(["run", "hello"]) == EXIT_FAILED == 1
    err = capsys.readouterr().err
    assert "Paused: the daily budget of $0.50 for this install is used up" in err
    assert "Traceback" not in err


def test_a_negative_limit_is_a_config_error_naming_the_line(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(budget_config("{daily: 5}", agent_budget="{monthly: -1}"))
    assert main(["usage"]) != 0
    err = capsys.readouterr().err
    assert "config.yaml:10: agents.main.budget.monthly: must be a dollar amount >= 0" in err


def test_usage_shows_spend_against_the_limits(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(budget_config("{daily: 5}"))
    import asyncio

    from habakkuk.engine.config import load_config

    async def spent() -> None:
        runtime = await Runtime.open(home, load_config(home))
        try:
            await spend(runtime, 1.25)
        finally:
            await runtime.close()

    asyncio.run(spent())
    assert main(["usage"]) == 0
    out = capsys.readouterr().out
    assert "this install: today $1.25 of $5.00 (25%)" in out


async def test_raising_the_limit_in_config_yaml_lifts_the_pause_without_a_restart(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    from habakkuk.services.hot_reload import HotReload

    text = budget_config("{daily: 5}")
    runtime = await runtime_factory(text)
    await spend(runtime, 5.0)
    assert (await one_turn(runtime)).status == "failed"
    home.config_path.write_text(text.replace("{daily: 5}", "{daily: 8}"), encoding="utf-8")
    await HotReload(runtime).reload_config()
    assert runtime.control.config_state.restart == ()  # applied, nothing waits a restart
    assert (await one_turn(runtime)).status == "done"
