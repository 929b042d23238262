"""The dashboard's schedules view in headless Chromium (skipped like the other browser
tests), on the real server and schedules service, its clock fixed."""

from __future__ import annotations

from typing import Any

from habakkuk.work.schedule_types import NewSchedule
from tests.conftest import mock_config
from tests.fakes.schedules import NOW
from tests.server.test_dashboard_browser import browser, sign_in  # noqa: F401

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1"> and <b>bold</b>'


async def test_the_schedules_view_adds_lists_pauses_runs_and_deletes(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: hi", extra="timezone: UTC\n"), workers=False)
    schedules = served.runtime.schedules
    schedules.clock = lambda: NOW
    await schedules.add(NewSchedule("main", "hostile", "@daily", HOSTILE), by="owner")

    page = await sign_in(browser, served)
    await page.locator("#ov-schedules", has_text="1 of 1 enabled").wait_for()
    await page.click("nav button[data-view=schedules]")
    await page.locator(".schedule").first.wait_for()

    # A `when` that could be read two ways is refused with the reading it could mean.
    await page.fill("#schedules-name", "inbox")
    await page.fill("#schedules-when", "30m")
    await page.fill("#schedules-prompt", "Summarise my inbox")
    await page.click("#schedules-form button[type=submit]")
    await page.locator("#schedules-error", has_text="@every 30m").wait_for()
    await page.fill("#schedules-when", "0 8 * * 1-5")
    await page.click("#schedules-form button[type=submit]")
    await page.locator("#schedules-detail h3", has_text="inbox").wait_for()
    assert await page.locator(".schedule").count() == 2
    (added,) = [s for s in await schedules.list_schedules() if s.name == "inbox"]
    assert (added.spec, added.prompt, added.command) == ("0 8 * * 1-5", "Summarise my inbox", None)

    await page.click(f".schedule[data-id='{added.id}']")
    await page.click("#schedules-detail button.pause")
    await page.locator("#schedules-detail button.resume").wait_for()
    assert not (await schedules.get(added.id)).enabled
    await page.click("#schedules-detail button.resume")
    await page.locator("#schedules-detail button.pause").wait_for()
    await page.click("#schedules-detail button.run")
    await page.locator("#schedules-detail .slot", has_text="(run now)").wait_for()
    assert [r.extra for r in await schedules.runs(added.id)] == [True]

    (hostile,) = [s for s in await schedules.list_schedules() if s.name == "hostile"]
    await page.click(f".schedule[data-id='{hostile.id}']")
    # The detail is replaced when the schedule's data arrives: wait for it, not for the
    # previous schedule's prompt that is still shown.
    await page.locator("#schedules-detail h3", has_text="hostile").wait_for()
    prompt = page.locator("#schedules-detail .schedule-prompt")
    await prompt.wait_for()
    assert await prompt.text_content() == HOSTILE
    assert await page.locator("#schedules-detail img, #schedules-detail b").count() == 0
    assert await page.evaluate("document.body.dataset.owned") is None

    await page.click("#schedules-detail button.delete")
    await page.click("#schedules-detail button.delete-no")
    assert await page.locator("#schedules-detail .schedule-confirm").count() == 0
    await page.click("#schedules-detail button.delete")
    await page.click("#schedules-detail button.delete-yes")
    await page.locator(f".schedule[data-id='{hostile.id}']").wait_for(state="detached")
    assert [s.id for s in await schedules.list_schedules()] == [added.id]
    assert page.errors == []
