"""The dashboard's board view in headless Chromium (skipped like the other browser tests),
on the real server and board service (no workers, so nothing dispatches)."""

from __future__ import annotations

from typing import Any

from habakkuk.work.board_types import NewCard, attempt_session
from tests.conftest import mock_config
from tests.server.test_dashboard_browser import browser, sign_in  # noqa: F401

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1"> and <b>bold</b>'
TWO_AGENTS = "  ops:\n    model: mock/scripted\n    mode: full\ntimezone: UTC\n"


async def test_the_board_view_shows_columns_and_a_cards_detail_and_acts_on_it(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: hi", extra=TWO_AGENTS), workers=False)
    board = served.runtime.board
    first = await board.create(NewCard("Gather figures", body=HOSTILE, assignee="ops"))
    await board.comment(first.id, "use last quarter")

    page = await sign_in(browser, served)
    await page.locator("#ov-open-cards", has_text="1").wait_for()
    await page.click("nav button[data-view=board]")
    await page.locator(f".board-column.todo .board-card[data-id='{first.id}']").wait_for()

    # Add a card that depends on the first, for main, through the form.
    await page.fill("#board-title", "Write the report")
    await page.select_option("#board-add-to", "main")
    await page.fill("#board-priority", "5")
    await page.fill("#board-deps", first.id)
    await page.click("#board-form button[type=submit]")
    await page.locator("#board-detail h3", has_text="Write the report").wait_for()
    (added,) = [c for c in await board.list_cards() if c.title == "Write the report"]
    assert (added.assignee, added.priority, added.depends_on) == ("main", 5, (first.id,))
    await page.locator("#board-detail .card-dep", has_text=f"{first.id}: todo").wait_for()
    assert await page.locator(".board-column.todo .board-card").count() == 2

    # The dependency's detail: its body stays text, its comment shows; then act on it.
    await page.click("#board-detail .card-dep")
    await page.locator("#board-detail h3", has_text="Gather figures").wait_for()
    body = page.locator("#board-detail .card-body")
    assert await body.text_content() == HOSTILE
    assert await page.locator("#board-detail img, #board-detail b").count() == 0
    assert await page.evaluate("document.body.dataset.owned") is None
    await page.locator("#board-detail .card-comment", has_text="use last quarter").wait_for()

    await page.select_option("#board-detail select.card-assign", "")
    await page.click("#board-detail button.assign")
    await page.locator("#board-detail .card-status", has_text="unassigned").wait_for()
    await page.fill("#board-detail input.card-priority", "9")
    await page.click("#board-detail button.priority")
    await page.locator("#board-detail .card-status", has_text="priority 9").wait_for()
    await page.fill("#board-detail input.card-comment-text", "any news?")
    await page.click("#board-detail button.comment")
    await page.locator("#board-detail .card-comment", has_text="any news?").wait_for()
    await page.click("#board-detail button.cancel")
    await page.locator("#board-detail .card-status", has_text="cancelled").wait_for()
    stored = await board.get(first.id)
    assert (stored.status, stored.assignee, stored.priority) == ("cancelled", "", 9)
    assert [c.text for c in stored.comments] == ["use last quarter", "any news?"]
    await page.locator(f".board-card[data-id='{first.id}']").wait_for(state="detached")
    await page.click("#board-detail button.reopen")
    await page.locator("#board-detail .card-status", has_text="todo").wait_for()
    assert (await board.get(first.id)).status == "todo"

    # Filters: one assignee's cards, then every status.
    await page.select_option("#board-assignee", "main")
    await page.locator(f".board-card[data-id='{first.id}']").wait_for(state="detached")
    assert await page.locator(".board-card").count() == 1
    await page.select_option("#board-assignee", "")
    await page.select_option("#board-status", "cancelled")
    await page.locator("#board-total", has_text="0 card(s)").wait_for()

    # An attempt (claimed as the dispatcher claims it) links to its session.
    running = await board.create(NewCard("Check the figures", assignee="ops"))
    claimed = await board.store.claim(running.id, running.attempt)
    assert claimed is not None
    session = attempt_session(running.id, 1)
    await served.runtime.sessions.new_session("ops", origin="board", session_id=session)
    await page.select_option("#board-status", "open")
    await page.locator(f".board-column.doing .board-card[data-id='{running.id}']").click()
    await page.locator("#board-detail .card-status", has_text="attempt 1").wait_for()
    await page.click(f"#board-detail a.session-link[data-session='{session}']")
    await page.locator("#view-sessions").wait_for()
    await page.locator("#session-detail h3", has_text=session).wait_for()
    assert page.errors == []
