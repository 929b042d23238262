"""The dashboard's usage and config views in headless Chromium (skipped like the other
browser tests): days, models, agents, the cache hit rate, unpriced calls, spend against
limits when the server has it, and the effective config with its secrets redacted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from habakkuk.engine.config import ModelRef
from habakkuk.engine.llm.router import Caller
from habakkuk.engine.llm.types import Usage
from tests.conftest import mock_config
from tests.server.test_dashboard_browser import browser, sign_in  # noqa: F401
from tests.server.test_usage_config_api import ZONE, record_calls

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1">'

# Spec 001's example answer of GET /api/budget (the budget helper's endpoint).
BUDGET = {
    "timezone": "America/Toronto",
    "day": "2026-11-09",
    "month": "2026-11",
    "unknown_price": "allow",
    "install": {
        "today": {"spent": 4.2, "limit": 5, "percent": 84, "resets": "2026-11-10T00:00:00-05:00"},
        "month": {
            "spent": 31.5,
            "limit": 100,
            "percent": 31.5,
            "resets": "2026-12-01T00:00:00-05:00",
        },
        "per_turn": 1.5,
    },
    "agents": [
        {
            "agent": "main",
            "today": {"spent": 4.2, "resets": "2026-11-10T00:00:00-05:00"},
            "month": {"spent": 31.5, "resets": "2026-12-01T00:00:00-05:00"},
            "paused": "Paused: the daily budget of $5.00 for this install is used up; " + HOSTILE,
        }
    ],
}


async def open_usage(browser: Any, served: Any) -> Any:  # noqa: F811
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=usage]")
    await page.locator("#usage-models tr[data-key]").first.wait_for()
    return page


async def test_the_usage_view_shows_days_models_agents_cache_and_unpriced_calls(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config(extra=f"timezone: {ZONE}\n"), workers=False)
    await record_calls(served.runtime)
    await served.runtime.usage.record(
        ModelRef("mock", HOSTILE), Caller("main", "s9"), Usage(input_tokens=1)
    )

    page = await open_usage(browser, served)

    assert await page.text_content("#usage-cost") == "$15.63"
    assert await page.text_content("#usage-calls") == "6"
    assert await page.text_content("#usage-unpriced") == "3"
    assert "3 call(s) went to models with no known price" in (
        await page.text_content("#usage-unpriced-note")
    )
    # cache_read / (input + cache_read) = 100,000 / (200,018 + 100,000)
    assert await page.text_content("#usage-cache") == "33.3%"
    # Thirty days by default, zero days included; the busy days have bars.
    days = page.locator("#usage-days-chart .usage-day")
    assert await days.count() == 30
    heights = await page.eval_on_selector_all(
        "#usage-days-chart .usage-day-fill", "fills => fills.map(f => f.style.height)"
    )
    assert heights[-1] != "0%" and heights[-3] == "100%"
    assert heights.count("0%") == 28
    assert "unpriced" in (await days.nth(29).get_attribute("title") or "")

    models = page.locator("#usage-models tr[data-key]")
    assert await models.evaluate_all("rows => rows.map(r => r.dataset.key)") == [
        "anthropic/claude-sonnet-4-5",
        "mock/scripted",
        f"mock/{HOSTILE}",
    ]
    scripted = page.locator("#usage-models tr[data-key='mock/scripted']")
    assert await scripted.get_attribute("class") == "unpriced"
    assert await scripted.locator("td[data-column=cost]").text_content() == "unpriced"
    sonnet = page.locator("#usage-models tr[data-key='anthropic/claude-sonnet-4-5']")
    assert await sonnet.locator("td[data-column=cost]").text_content() == "$15.63"
    assert await sonnet.locator("td[data-column='cache hits']").text_content() == "33.3%"
    agents = page.locator("#usage-agents tr[data-key]")
    assert await agents.evaluate_all("rows => rows.map(r => r.dataset.key)") == ["main", "ops"]
    main_cost = page.locator("#usage-agents tr[data-key=main] td[data-column=cost]")
    assert await main_cost.text_content() == "$15.30 *"  # some of its calls are unpriced
    assert await page.locator("#view-usage img").count() == 0
    assert await page.evaluate("document.body.dataset.owned") is None

    # The period picker asks again: a week has seven bars.
    await page.select_option("#usage-days", "7")
    await days.nth(7).wait_for(state="detached")  # the 30 bars are replaced by 7
    assert await days.count() == 7
    # This server sets no spending limits: the panel shows the spend with no limit.
    panel = page.locator("#usage-budget")
    await panel.wait_for()
    assert "(no limit)" in (await panel.text_content() or "")
    assert page.errors == []


async def test_an_agent_picked_shows_only_its_usage(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(
        mock_config(extra=f"  ops:\n    model: mock/scripted\ntimezone: {ZONE}\n"),
        workers=False,
    )
    await record_calls(served.runtime)
    page = await open_usage(browser, served)
    await page.select_option("#usage-agent", "ops")
    await page.locator("#usage-agents tr[data-key=main]").wait_for(state="detached")
    assert await page.text_content("#usage-calls") == "1"
    keys = page.locator("#usage-agents tr[data-key]")
    assert await keys.evaluate_all("rows => rows.map(r => r.dataset.key)") == ["ops"]
    assert await page.text_content("#usage-cost") == "$0.33"
    assert await page.is_hidden("#usage-unpriced-note")
    assert page.errors == []


async def test_spend_against_limits_shows_when_the_server_answers_budget(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config(extra=f"timezone: {ZONE}\n"), workers=False)
    await record_calls(served.runtime)
    page = await sign_in(browser, served)
    asked: list[str] = []

    async def budget(route: Any) -> None:
        asked.append(route.request.url)
        await route.fulfill(status=200, content_type="application/json", body=json.dumps(BUDGET))

    # The budget endpoint as spec 001 shapes it, whichever branch lands it first.
    await page.route("**/api/budget*", budget)
    await page.click("nav button[data-view=usage]")
    panel = page.locator("#usage-budget")
    await panel.wait_for()
    install = page.locator(".budget-scope[data-scope=install]")
    lines = await install.locator(".budget-spent").all_text_contents()
    assert lines == ["$4.20 of $5.00 (84%)", "$31.50 of $100.00 (32%)"]
    assert await install.locator(".budget-fill.near").count() == 1  # 84 %: near the limit
    assert "at most $1.50 per turn" in await install.text_content()
    main = page.locator(".budget-scope[data-scope=main]")
    assert await main.locator(".budget-spent").all_text_contents() == [
        "$4.20 (no limit)",
        "$31.50 (no limit)",
    ]
    paused = await main.locator(".budget-paused").text_content()
    assert paused is not None and paused.endswith(HOSTILE)
    assert await page.locator("#usage-budget img").count() == 0
    assert "allow" in await page.text_content("#usage-budget-meta")
    assert asked and asked[-1].endswith("/api/budget")
    assert page.errors == []


@pytest.mark.parametrize("status", [404, 501])
async def test_the_limits_panel_hides_when_budget_is_not_there(
    serve: Any,
    browser: Any,  # noqa: F811
    status: int,
) -> None:
    served = await serve(mock_config(extra=f"timezone: {ZONE}\n"), workers=False)
    await record_calls(served.runtime)
    page = await sign_in(browser, served)
    answered: list[int] = []

    async def budget(route: Any) -> None:
        if answered:
            await route.fulfill(
                status=status, content_type="application/json", body='{"error": "no"}'
            )
        else:
            await route.fulfill(
                status=200, content_type="application/json", body=json.dumps(BUDGET)
            )
        answered.append(status)

    await page.route("**/api/budget*", budget)
    await page.click("nav button[data-view=usage]")
    await page.locator("#usage-budget").wait_for()
    await page.click("#usage-reload")  # now the server has none: the panel goes
    await page.locator("#usage-budget").wait_for(state="hidden")
    assert page.errors == []


async def test_the_config_view_shows_the_effective_config_without_a_secret(
    serve: Any,
    browser: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MOCK_KEY", "sk-supersecretvalue123456")
    text = mock_config(extra=f"timezone: {ZONE}\n").replace(
        "    type: mock\n",
        "    type: mock\n    key_env: MOCK_KEY\n"
        "    base_url: https://user:pa55word@models.example/v1\n",
    )
    text = text.replace(
        "    mode: full\n",
        f"    mode: full\n    instructions: 'Key sk-supersecretvalue123456. {HOSTILE}'\n",
    )
    served = await serve(text, workers=False)
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=config]")
    providers = page.locator(".config-section[data-section=providers]")
    await providers.wait_for()

    page_text = await page.evaluate("document.body.innerText + document.body.textContent")
    assert "supersecretvalue" not in page_text
    assert "pa55word" not in page_text
    shown = await providers.locator("pre").text_content()
    assert shown is not None
    assert "key_env: MOCK_KEY" in shown  # the variable's name stays readable
    assert "base_url: https://user:[redacted]@models.example/v1" in shown
    assert "mock:\n  type: mock\n" in shown  # nested YAML-style
    assert await providers.get_attribute("open") is not None
    settings = await page.locator(".config-section[data-section=settings] pre").text_content()
    assert f"timezone: {ZONE}" in (settings or "")
    agents = await page.locator(".config-section[data-section=agents] pre").text_content()
    assert "[redacted]" in (agents or "") and HOSTILE in (agents or "")
    assert await page.locator("#view-config img").count() == 0
    assert await page.evaluate("document.body.dataset.owned") is None
    assert await page.text_content("#config-home") == str(served.runtime.home.root)
    await page.locator("#config-doctor li[data-name=config]").wait_for()
    assert page.errors == []
