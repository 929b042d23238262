"""The dashboard's memory view in headless Chromium (skipped like the other browser tests)."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.knowledge.memory_types import ProposalCreated, Provenance
from tests.conftest import mock_config
from tests.server.test_dashboard_browser import browser, sign_in  # noqa: F401

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1"> and <b>bold</b>'
USER = Provenance(by="user", tool="test")
TAINTED = Provenance(by="agent", session="ses_web", tool="memory_save", tainted=True)


async def test_the_memory_view_searches_reads_trusts_forgets_and_restores(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: hi"))
    memory = served.runtime.memory
    coffee = (await memory.save("main", "Coffee preference", HOSTILE, provenance=USER)).note
    build = (await memory.save("main", "Build server", "At build.example.org.",
                               provenance=TAINTED)).note  # fmt: skip
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=memory]")
    await page.locator(".memory-note").nth(1).wait_for()
    marked = page.locator(f".memory-note[data-slug='{build.slug}'] .untrusted")
    assert await marked.count() == 1
    assert await page.locator(f".memory-note[data-slug='{coffee.slug}'] .untrusted").count() == 0

    await page.fill("#memory-q", "coffee")
    await page.press("#memory-q", "Enter")
    await page.locator(".memory-note", has_text="Build server").wait_for(state="detached")
    await page.click(f".memory-note[data-slug='{coffee.slug}']")
    body = page.locator("#memory-detail pre.note-body")
    await body.wait_for()
    assert HOSTILE in await body.text_content()
    assert await page.locator("#memory-detail img, #memory-detail b").count() == 0
    assert await page.evaluate("document.body.dataset.owned") is None

    await page.click("#memory-detail button.forget")
    await page.locator("#memory-detail .memory-done", has_text="Forgot").wait_for()
    assert (await memory.list_notes("main"))[1] == 1
    await page.click("#memory-history-all")
    deleted = page.locator(".change", has_text=f"deleted note {coffee.slug}")
    await deleted.wait_for()
    await deleted.click()
    await page.locator("#memory-detail .diff .del").first.wait_for()
    await page.click("#memory-detail button.restore-before")
    await page.locator("#memory-detail .memory-done", has_text="Restored").wait_for()
    assert (await memory.read("main", coffee.slug)).body.strip() == HOSTILE

    await page.fill("#memory-q", "")
    await page.press("#memory-q", "Enter")
    await page.click(f".memory-note[data-slug='{build.slug}']")
    await page.click("#memory-detail button.trust")
    await page.locator(f".memory-note[data-slug='{build.slug}']").wait_for()
    await marked.wait_for(state="detached")
    assert (await memory.read("main", build.slug)).trust == "trusted"
    assert await page.is_hidden("#memory-proposals-box")  # none open
    review = Provenance(by="review", session="ses_r", tool="memory_nightly")
    with pytest.raises(ProposalCreated):
        await memory.forget("main", build.slug, provenance=review)
    await page.click("nav button[data-view=overview]")
    await page.click("nav button[data-view=memory]")
    proposal = page.locator(".proposal", has_text=f"forget {build.slug}")
    await proposal.wait_for()
    assert await page.text_content("#proposal-count") == "1"
    await proposal.locator("button.apply").click()
    await page.locator("#memory-proposals-box").wait_for(state="hidden")
    await page.locator(f".memory-note[data-slug='{build.slug}']").wait_for(state="detached")
    assert [n.slug for n in (await memory.list_notes("main"))[0]] == [coffee.slug]
    assert page.errors == []
