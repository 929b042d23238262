"""The dashboard in headless Chromium (Debian's, driven by Playwright; no browser download).

Skipped when Playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import mock_config

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.async_api")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)

SCRIPT = """
- match: "tool"
  steps:
    - text: "Let me look."
      tool_calls: [{name: list_dir, arguments: {path: "."}}]
    - text: "Listed the workspace."
- match: "run"
  steps:
    - tool_calls: [{name: exec, arguments: {command: "echo from-the-browser"}}]
    - text: "Ran it after approval."
- steps:
    - text: "Echo: {input}"
"""


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def sign_in(browser: Any, served: Any) -> Any:
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(served.url + "/app/")
    await page.wait_for_selector("#login:not([hidden])")
    await page.fill("#token", served.token)
    await page.click("#login-button")
    await page.wait_for_selector("#shell:not([hidden])")
    page.errors = errors
    return page


async def test_sign_in_chat_and_see_the_reply_and_a_tool_card(serve: Any, browser: Any) -> None:
    served = await serve(mock_config(SCRIPT))
    page = await sign_in(browser, served)
    assert await page.evaluate("localStorage.getItem('habakkuk.token')") == served.token
    assert await page.is_visible("#logout")
    await page.click("nav button[data-view=chat]")
    await page.fill("#chat-input", "use a tool please")
    await page.press("#chat-input", "Enter")
    reply = page.locator(".msg.assistant[data-seq]", has_text="Listed the workspace.")
    await reply.wait_for(timeout=30_000)
    card = page.locator(".tool-card", has_text="list_dir")
    await card.wait_for(timeout=30_000)
    await page.wait_for_selector(".tool-card.done", timeout=30_000)
    assert await page.locator(".msg.user").first.text_content() == "use a tool please"
    # Reload: the token is remembered and the conversation replays from web.db.
    await page.reload()
    await page.wait_for_selector("#shell:not([hidden])")
    await page.click("nav button[data-view=chat]")
    await page.locator(".msg.assistant[data-seq]", has_text="Listed the workspace.").wait_for(
        timeout=30_000
    )
    assert page.errors == []


async def test_a_wrong_token_is_asked_for_again(serve: Any, browser: Any) -> None:
    served = await serve(mock_config(SCRIPT))
    page = await browser.new_page()
    await page.goto(served.url + "/app/")
    await page.fill("#token", "wrong")
    await page.click("#login-button")
    await page.wait_for_selector("#login-error:has-text('not accepted')")
    assert await page.is_hidden("#shell")


async def test_an_approval_is_answered_from_the_dashboard(serve: Any, browser: Any) -> None:
    served = await serve(mock_config(SCRIPT, mode="ask"))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    await page.fill("#chat-input", "run it")
    await page.press("#chat-input", "Enter")
    await page.locator(".msg.notice", has_text="Approval needed").wait_for(timeout=30_000)
    await page.click("nav button[data-view=approvals]")
    await page.locator(".approval", has_text="exec").wait_for(timeout=30_000)
    await page.click(".approval button.approve")
    await page.click("nav button[data-view=chat]")
    await page.locator(".msg.assistant[data-seq]", has_text="Ran it after approval.").wait_for(
        timeout=30_000
    )
    assert page.errors == []


async def test_an_approval_in_the_chat_is_a_card_whose_approve_button_continues_the_turn(
    serve: Any, browser: Any
) -> None:
    served = await serve(mock_config(SCRIPT, mode="ask"))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    await page.fill("#chat-input", "run it")
    await page.press("#chat-input", "Enter")
    card = page.locator(".approval-card", has_text="exec")
    await card.locator("button.approve").wait_for(timeout=30_000)
    assert await card.locator("button.deny").is_visible()
    await card.locator("button.approve").click()
    await page.locator(".msg.assistant[data-seq]", has_text="Ran it after approval.").wait_for(
        timeout=30_000
    )
    await card.locator(".approval-outcome", has_text="Approved").wait_for(timeout=30_000)
    assert await card.locator("button").count() == 0
    assert await served.runtime.approvals.waiting() == []
    # Replayed after a reload, the answered card offers no buttons.
    await page.reload()
    await page.wait_for_selector("#shell:not([hidden])")
    await page.click("nav button[data-view=chat]")
    replayed = page.locator(".approval-card", has_text="exec")
    await replayed.locator(".approval-outcome").wait_for(timeout=30_000)
    assert await replayed.locator("button").count() == 0
    assert page.errors == []


async def test_without_a_token_the_dashboard_opens_with_no_sign_out(
    serve: Any, browser: Any
) -> None:
    served = await serve(mock_config(SCRIPT), token=False)
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(served.url + "/app/")
    await page.wait_for_selector("#shell:not([hidden])")
    await page.locator("#ov-queue", has_text="queued").wait_for(timeout=30_000)
    assert await page.is_hidden("#logout")
    assert await page.is_hidden("#login")
    assert errors == []


def shown_view(page: Any) -> Any:
    """The view the page shows: the one section not hidden."""
    return page.evaluate(
        "Array.from(document.querySelectorAll('.view')).filter(s => !s.hidden).map(s => s.id)"
    )


async def test_each_view_has_its_own_address_that_a_reload_and_back_follow(
    serve: Any, browser: Any
) -> None:
    served = await serve(mock_config(SCRIPT))
    page = await sign_in(browser, served)
    await page.wait_for_url("**/app/#/overview")
    assert await shown_view(page) == ["view-overview"]
    # Opened directly (a bookmark, a link) by the signed-in browser: a fresh load.
    tab = page
    await tab.goto("about:blank")
    await tab.goto(served.url + "/app/#/schedules")
    await tab.wait_for_selector("#view-schedules:not([hidden])")
    assert await shown_view(tab) == ["view-schedules"]
    assert await tab.get_attribute("nav button.active", "data-view") == "schedules"
    await tab.click("nav button[data-view=board]")
    await tab.wait_for_url("**/app/#/board")
    await tab.wait_for_selector("#view-board:not([hidden])")
    await tab.click("nav button[data-view=memory]")
    await tab.wait_for_url("**/app/#/memory")
    await tab.go_back()
    await tab.wait_for_url("**/app/#/board")
    await tab.wait_for_selector("#view-board:not([hidden])")
    assert await shown_view(tab) == ["view-board"]
    await tab.go_back()
    await tab.wait_for_url("**/app/#/schedules")
    await tab.wait_for_selector("#view-schedules:not([hidden])")
    await tab.reload()
    await tab.wait_for_selector("#shell:not([hidden])")
    await tab.wait_for_selector("#view-schedules:not([hidden])")
    assert await shown_view(tab) == ["view-schedules"]
    await tab.go_forward()
    await tab.wait_for_selector("#view-board:not([hidden])")
    # An address that names no view is the overview.
    await tab.goto(served.url + "/app/#/nowhere")
    await tab.wait_for_selector("#view-overview:not([hidden])")
    assert page.errors == []


TWO_RUNS = """
- match: "both"
  steps:
    - tool_calls: [{name: exec, arguments: {command: "echo first-run"}}]
    - tool_calls: [{name: exec, arguments: {command: "echo second-run"}}]
    - text: "Both ran, one approval."
- steps:
    - text: "Echo: {input}"
"""


async def test_approve_for_this_session_in_the_approvals_view_covers_the_next_call(
    serve: Any, browser: Any
) -> None:
    served = await serve(mock_config(TWO_RUNS, mode="ask"))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    await page.fill("#chat-input", "run both")
    await page.press("#chat-input", "Enter")
    await page.locator(".msg.notice", has_text="Approval needed").wait_for(timeout=30_000)
    await page.click("nav button[data-view=approvals]")
    approval = page.locator(".approval", has_text="first-run")
    await approval.wait_for(timeout=30_000)
    await approval.locator("button.approve-session").click()
    await page.click("nav button[data-view=chat]")
    await page.locator(".msg.assistant[data-seq]", has_text="Both ran, one approval.").wait_for(
        timeout=30_000
    )
    await page.locator(".msg.notice", has_text="Approved for this session").wait_for(timeout=30_000)
    # The second exec ran without a second question.
    assert await page.locator(".approval-card").count() == 1
    assert await served.runtime.approvals.waiting() == []
    session = (await served.runtime.sessions.list_sessions())[0].id
    results = [
        r.text
        for m in await served.runtime.sessions.messages(session)
        for r in m.message.tool_results
    ]
    assert "first-run" in results[0] and "second-run" in results[1]
    assert page.errors == []


async def test_the_sessions_view_shows_board_and_sub_agent_sessions_when_asked(
    serve: Any, browser: Any
) -> None:
    from habakkuk.engine.sessions import BOARD_ORIGIN

    served = await serve(mock_config(SCRIPT))
    sessions = served.runtime.sessions
    await sessions.new_session(None, origin="web", session_id="ses_mine")
    await sessions.new_session(None, origin=BOARD_ORIGIN, session_id="ses_card")
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=sessions]")
    await page.locator("#sessions-list li", has_text="ses_mine").wait_for(timeout=30_000)
    assert await page.locator("#sessions-list li", has_text="ses_card").count() == 0
    await page.check("#sessions-all")
    await page.locator("#sessions-list li", has_text="ses_card").wait_for(timeout=30_000)
    assert page.errors == []


# Notes which views' loaders (each in its own deferred script) are still undefined when
# the page makes its first API call.
FIRST_CALL_PROBE = """
const probedFetch = window.fetch;
window.missingAtFirstCall = null;
window.fetch = function (...args) {
  if (window.missingAtFirstCall === null) {
    window.missingAtFirstCall = ["loadMemory", "loadSkills", "loadSchedules", "loadBoard"]
      .filter((name) => typeof window[name] !== "function");
  }
  return probedFetch.apply(this, args);
};
"""


async def test_the_first_api_call_waits_for_every_views_script(serve: Any, browser: Any) -> None:
    # A reload on #/schedules whose first call was answered before schedules.js had run
    # threw "loadSchedules is not defined" and showed an empty view.
    served = await serve(mock_config(SCRIPT))
    page = await browser.new_page()
    await page.add_init_script(FIRST_CALL_PROBE)
    await page.goto(served.url + "/app/#/schedules")
    await page.wait_for_function("window.missingAtFirstCall !== null")
    assert await page.evaluate("window.missingAtFirstCall") == []


FILES_SCRIPT = """
- match: "picture"
  steps:
    - tool_calls: [{name: send_file, arguments: {path: "chart.png", caption: "your chart"}}]
    - text: "Sent the chart."
- match: "notes"
  steps:
    - tool_calls: [{name: send_file, arguments: {path: "notes.txt"}}]
    - text: "Sent the notes."
- steps:
    - text: "Echo: {input}"
"""


def _png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (24, 16), (20, 160, 90)).save(out, "PNG")
    return out.getvalue()


async def test_the_chat_uploads_a_file_and_shows_sent_images_inline_and_other_files_as_links(
    serve: Any, browser: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(FILES_SCRIPT))
    workspace = served.runtime.home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "chart.png").write_bytes(_png())
    (workspace / "notes.txt").write_text("buy milk\n")
    upload = tmp_path / "photo.png"
    upload.write_bytes(_png())
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")

    # An upload goes through POST /api/chat as multipart, with the typed text.
    await page.set_input_files("#chat-file", str(upload))
    await page.locator("#chat-files", has_text="photo.png").wait_for(timeout=30_000)
    await page.fill("#chat-input", "look at this")
    await page.press("#chat-input", "Enter")
    mine = page.locator(".msg.user", has_text="photo.png")
    await mine.wait_for(timeout=30_000)
    assert "look at this" in (await mine.text_content() or "")
    await page.locator(".msg.assistant[data-seq]", has_text="Echo: look at this").wait_for(
        timeout=30_000
    )
    inbox = workspace / "inbox" / "photo.png"
    assert inbox.read_bytes() == upload.read_bytes()

    # A file the agent sends: an image shows inline (fetched with the token)...
    await page.fill("#chat-input", "a picture please")
    await page.press("#chat-input", "Enter")
    image = page.locator(".msg.file img[src^='blob:']")
    await image.wait_for(timeout=30_000)
    await page.wait_for_function(
        "() => { const i = document.querySelector('.msg.file img');"
        " return i && i.complete && i.naturalWidth === 24; }",
        timeout=30_000,
    )
    assert await page.locator(".msg.file .file-caption").text_content() == "your chart"

    # ... and another file is a link that saves it.
    await page.fill("#chat-input", "the notes")
    await page.press("#chat-input", "Enter")
    link = page.locator(".msg.file a.file-link", has_text="notes.txt")
    await link.wait_for(timeout=30_000)
    async with page.expect_download(timeout=30_000) as waiting:
        await link.click()
    download = await waiting.value
    assert download.suggested_filename == "notes.txt"
    saved = tmp_path / "saved.txt"
    await download.save_as(str(saved))
    assert saved.read_text() == "buy milk\n"
    assert page.errors == []


async def test_the_overview_shows_each_channel_accounts_health(serve: Any, browser: Any) -> None:
    extra = "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n"
    served = await serve(mock_config(SCRIPT, extra=extra), token=False, workers=False)
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(served.url + "/app/")
    line = page.locator("#ov-channels", has_text="tg: never started")
    await line.wait_for(timeout=30_000)
    assert await line.text_content() == "tg: never started · in never · out never"
    assert errors == []


async def test_a_reply_is_read_aloud_from_the_chat_when_tts_is_configured(
    serve: Any, browser: Any
) -> None:
    served = await serve(mock_config(SCRIPT, extra="tts:\n  provider: espeak\n"))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    await page.fill("#chat-input", "hello")
    await page.press("#chat-input", "Enter")
    reply = page.locator(".msg.assistant[data-seq]", has_text="Echo: hello")
    await reply.wait_for(timeout=30_000)
    assert await page.locator(".msg.user .read-aloud").count() == 0  # only replies
    async with page.expect_response(lambda r: r.url.endswith("/speech")) as answer:
        await reply.locator("button.read-aloud").click()
    response = await answer.value
    assert response.status == 200
    assert response.headers["content-type"] == "audio/ogg"
    # played from its blob URL (the page's CSP lets media come from blob:)
    button = reply.locator("button.read-aloud:not([disabled])")
    await button.wait_for(timeout=30_000)
    assert await button.get_attribute("title") == "Read aloud"
    assert page.errors == []


async def test_an_arabic_reply_is_a_right_to_left_bubble_and_an_english_one_is_not(
    serve: Any, browser: Any
) -> None:
    """dir="auto": the browser orders and aligns each bubble by its own text."""
    served = await serve(mock_config('- text: "مرحبا، قلت: {input}"'))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    assert await page.get_attribute("#chat-input", "dir") == "auto"
    await page.fill("#chat-input", "hello")
    await page.press("#chat-input", "Enter")
    reply = page.locator(".msg.assistant[data-seq]", has_text="مرحبا")
    await reply.wait_for(timeout=30_000)
    direction = "node => getComputedStyle(node).direction"
    assert await reply.evaluate(direction) == "rtl"
    assert await page.locator(".msg.user").first.evaluate(direction) == "ltr"
    assert page.errors == []


async def test_the_overview_shows_the_security_audit(serve: Any, browser: Any) -> None:
    # mock_config's agent runs in full mode: open to anyone on Telegram, that is critical
    extra = "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n    allow_from: '*'\n"
    served = await serve(mock_config(SCRIPT, extra=extra), token=False, workers=False)
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(served.url + "/app/")
    finding = page.locator("#ov-audit li", has_text="CRITICAL agents.main")
    await finding.wait_for(timeout=30_000)
    assert "fix: set agents.main.mode: workspace" in (await finding.text_content() or "")
    assert "1 critical" in (await page.locator("#ov-audit-counts").text_content() or "")
    assert errors == []
