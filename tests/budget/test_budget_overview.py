"""Where the spend shows: the terminal overview's line of today's spend and each limit,
and the heads-up a chat gets once when 80 % of a limit is spent."""

from __future__ import annotations

from typing import Any

from habakkuk.screens.overview import budget_line
from tests.budget.test_budget_turns import budget_config, spend
from tests.conftest import OpenRuntime
from tests.helpers import eventually
from tests.server.conftest import TOKEN, serve  # noqa: F401  (the fixture)


async def test_the_overview_shows_todays_spend_each_limit_and_the_pause(
    runtime_factory: OpenRuntime,
) -> None:
    runtime = await runtime_factory(
        budget_config("{daily: 5, monthly: 100, per_turn: 1.5}", agent_budget="{daily: 2}")
    )
    await spend(runtime, 4.2)
    view = await runtime.control.overview()
    first, paused = budget_line(view).split("\n")
    assert first == (
        "spent today $4.20 · this install: daily $5.00 (84%), monthly $100.00 (4.2%),"
        " $1.50 a turn · agent main: daily $2.00 (210%)"
    )
    assert paused.startswith("Paused: the daily budget of $2.00 for agent main is used up")


async def test_no_limit_no_budget_line(runtime_factory: OpenRuntime) -> None:
    runtime = await runtime_factory(budget_config("{}"))
    assert budget_line(await runtime.control.overview()) == ""


async def test_a_chat_gets_the_80_percent_heads_up_once(serve: Any) -> None:  # noqa: F811
    served = await serve(budget_config("{daily: 5}"))
    await spend(served.runtime, 4.1)
    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def post(text: str) -> None:
        async with served.client.post(
            f"{served.url}/api/chat", json={"conversation": "w2", "text": text}, headers=headers
        ) as response:
            assert response.status == 202, await response.text()

    async def said() -> list[str]:
        events = await served.server.web_store().events("w2")
        return [e.text for e in events if e.role != "user"]

    await post("first")
    await eventually(lambda: _count(said, "Heads-up"), what="the heads-up")
    await post("second")
    await eventually(lambda: _count(said, "hello", 2), what="the second reply")
    await served.runtime.budget.settled()
    heads_up = [text for text in await said() if "Heads-up" in text]
    assert heads_up == [
        "Heads-up: 82% of today's budget for this install is spent ($4.10 of $5.00)."
    ]


async def _count(said: Any, word: str, at_least: int = 1) -> bool:
    return sum(word in text for text in await said()) >= at_least


async def test_a_chat_shows_the_budget_but_cannot_raise_it(serve: Any) -> None:  # noqa: F811
    served = await serve(budget_config("{daily: 5}"))
    await spend(served.runtime, 5.0)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for text in ("/budget", "/budget raise 100"):
        async with served.client.post(
            f"{served.url}/api/chat", json={"conversation": "w3", "text": text}, headers=headers
        ) as response:
            assert response.status == 202, await response.text()

    async def said() -> list[str]:
        events = await served.server.web_store().events("w3")
        return [e.text for e in events if e.role != "user"]

    await eventually(lambda: _count(said, "Only the owner"), what="the raise refused")
    texts = await said()
    assert any("this install: today $5.00 of $5.00 (100%)" in text for text in texts), texts
    refused = next(text for text in texts if "Only the owner" in text)
    assert "habakkuk run" in refused and "config.yaml" in refused
    status = await served.runtime.budget.status()
    assert status.install.today.limit == 5.0  # nothing was raised
