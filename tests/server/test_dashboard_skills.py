"""The dashboard's skills view in headless Chromium (skipped like the other browser tests)."""

from __future__ import annotations

from typing import Any

from tests.conftest import mock_config
from tests.knowledge.skills.conftest import DANGEROUS_FINDINGS, install
from tests.server.test_dashboard_browser import browser, sign_in  # noqa: F401
from tests.server.test_skills_api import make_skill

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1"> and <b>bold</b>'


async def test_the_skills_view_lists_shows_approves_removes_and_restores(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: hi"))
    shared = served.runtime.home.root / "skills"
    make_skill(
        shared, "weekly-report", "Write the weekly report.", HOSTILE, {"template.md": "# W\n"}
    )
    make_skill(shared, "pdf-tools", "Split <b>PDF</b> files.", "Run the script.", {"run.sh": "x\n"})
    install(served.runtime.home, "pdf-tools", verdict="caution")
    skills = served.runtime.skills

    page = await sign_in(browser, served)
    await page.click("nav button[data-view=skills]")
    await page.locator(".skill").nth(1).wait_for()
    pdf = page.locator(".skill[data-name='pdf-tools']")
    assert await pdf.locator(".untrusted").count() == 1
    assert await pdf.locator(".verdict.caution").count() == 1
    assert "github:acme/skills/pdf-tools@main" in await pdf.locator(".meta").text_content()
    assert await page.locator(".skill[data-name='weekly-report'] .untrusted").count() == 0

    await page.click(".skill[data-name='weekly-report']")
    body = page.locator("#skills-detail pre.skill-body")
    await body.wait_for()
    assert HOSTILE in await body.text_content()
    assert await page.locator("#skills-detail img, #skills-detail b").count() == 0
    assert await page.evaluate("document.body.dataset.owned") is None
    assert await page.locator("#skills-detail .skill-files li").all_text_contents() == [
        "template.md"
    ]
    assert await page.locator("#skills-detail button.approve").count() == 0  # trusted

    # Remove asks first: "Keep it" keeps it.
    await page.click("#skills-detail button.remove")
    await page.click("#skills-detail button.remove-no")
    assert await page.locator("#skills-detail .skill-confirm").count() == 0
    assert (shared / "weekly-report").exists()
    await page.click("#skills-detail button.remove")
    await page.click("#skills-detail button.remove-yes")
    await page.locator("#skills-detail .skill-done", has_text="Removed weekly-report").wait_for()
    await page.locator(".skill[data-name='weekly-report']").wait_for(state="detached")
    assert not (shared / "weekly-report").exists()
    await page.click("#skills-detail button.restore")
    await page.locator("#skills-detail .skill-done", has_text="Restored weekly-report").wait_for()
    await page.locator(".skill[data-name='weekly-report']").wait_for()
    assert (shared / "weekly-report" / "template.md").exists()

    await page.click(".skill[data-name='pdf-tools']")
    await page.locator("#skills-detail .skill-caution").wait_for()
    await page.click("#skills-detail button.approve")
    await pdf.locator(".untrusted").wait_for(state="detached")
    assert (await skills.skill("main", "pdf-tools")).summary.trusted
    assert page.errors == []


async def test_a_dangerous_skills_reasons_show_and_approving_asks_first(
    serve: Any,
    browser: Any,  # noqa: F811
) -> None:
    served = await serve(mock_config("- text: hi"))
    shared = served.runtime.home.root / "skills"
    make_skill(shared, "setup-helper", "Set the machine up.", "Run setup.sh.")
    install(served.runtime.home, "setup-helper", verdict="dangerous", findings=DANGEROUS_FINDINGS)
    skills = served.runtime.skills

    page = await sign_in(browser, served)
    await page.click("nav button[data-view=skills]")
    item = page.locator(".skill[data-name='setup-helper']")
    await item.wait_for()
    assert "scan: dangerous (2 finding(s))" in await item.locator(".meta").text_content()
    await item.click()
    reasons = page.locator("#skills-detail .skill-reasons li")
    await reasons.first.wait_for()
    assert await reasons.all_text_contents() == [
        "scripts/setup.sh:2: a download is piped into a shell",
        "SKILL.md:4: fetches a URL",
    ]

    await page.click("#skills-detail button.approve")  # asks; approves nothing yet
    await page.locator("#skills-detail .skill-confirm").wait_for()
    assert not (await skills.skill("main", "setup-helper")).summary.trusted
    await page.click("#skills-detail button.approve-no")
    assert await page.locator("#skills-detail .skill-confirm").count() == 0
    await page.click("#skills-detail button.approve")
    await page.click("#skills-detail button.approve-yes")
    await item.locator(".untrusted").wait_for(state="detached")
    assert (await skills.skill("main", "setup-helper")).summary.trusted
    assert page.errors == []
