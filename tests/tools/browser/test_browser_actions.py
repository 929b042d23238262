"""Every browser action against pages on 127.0.0.1, in a real headless Chromium."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from habakkuk.engine.toolkit.registry import ToolError
from tests.tools.browser.conftest import Site, Tools, needs_chromium

pytestmark = [needs_chromium, pytest.mark.timeout(180)]


def ref_of(snapshot: str, line_start: str) -> int:
    """The ref on the first line of `snapshot` that contains `line_start`."""
    for line in snapshot.splitlines():
        if line_start in line:
            found = re.search(r"\[ref=(\d+)\]", line)
            assert found, line
            return int(found.group(1))
    raise AssertionError(f"no line with {line_start!r} in:\n{snapshot}")


async def test_snapshot_refs_are_stable_forgotten_on_navigation_and_never_reused(
    tools: Tools, site: Site, tmp_path: Path
) -> None:
    opened = await tools("browser_navigate", url=site.url("/form"))
    assert "Booking — " in opened.text
    assert opened.text.splitlines()[0].startswith("[page content follows")
    first = (await tools("browser_snapshot")).text
    assert '- heading "Book a table" [level=1]' in first
    assert '- link "Other page" (/other)' in first
    name = ref_of(first, 'textbox "Name"')
    again = (await tools("browser_snapshot")).text
    assert ref_of(again, 'textbox "Name"') == name
    await tools("browser_navigate", url=site.url("/other"))
    with pytest.raises(ToolError, match=f"ref {name} is not on the page any more"):
        await tools("browser_click", ref=name)
    await tools("browser_navigate", url=site.url("/form"))
    fresh = ref_of((await tools("browser_snapshot")).text, 'textbox "Name"')
    assert fresh > name
    profile = tmp_path / "browser" / "main"
    assert stat.S_IMODE(profile.stat().st_mode) == 0o700


async def test_type_select_check_and_submit_a_form(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/form"))
    snap = (await tools("browser_snapshot")).text
    assert 'option "Two people" [selected]' in snap
    await tools("browser_type", ref=ref_of(snap, 'textbox "Name"'), text="Ada Lovelace")
    picked = await tools("browser_select", ref=ref_of(snap, "combobox"), values=["Four people"])
    assert "Four people" in picked.text
    await tools("browser_click", ref=ref_of(snap, 'checkbox "Terrace"'))
    checked = (await tools("browser_snapshot")).text
    assert re.search(r'checkbox "Terrace" \[checked\]', checked)
    done = await tools("browser_click", ref=ref_of(snap, 'button "Book"'))
    assert "still loading" not in done.text
    assert site.posted == [{"name": "Ada Lovelace", "size": "4", "terrace": "on"}]
    result = (await tools("browser_snapshot")).text
    assert "name=Ada Lovelace" in result


async def test_append_and_submit_with_enter(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/form"))
    snap = (await tools("browser_snapshot")).text
    await tools(
        "browser_type", ref=ref_of(snap, 'textbox "Name"'), text=" Smith", append=True, submit=True
    )
    assert site.posted == [{"name": "old Smith", "size": "2"}]


async def test_press_keys_and_combinations(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/keys"))
    snap = (await tools("browser_snapshot")).text
    await tools("browser_click", ref=ref_of(snap, 'textbox "Keys"'))
    await tools("browser_press", key="Enter")
    assert "key Enter" in (await tools("browser_snapshot")).text
    await tools("browser_press", key="Control+a")
    assert "key a ctrl" in (await tools("browser_snapshot")).text
    with pytest.raises(ToolError, match="unknown key"):
        await tools("browser_press", key="Hyper")


async def test_click_a_link_waits_for_the_page_and_back_returns(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/form"))
    snap = (await tools("browser_snapshot")).text
    await tools("browser_click", ref=ref_of(snap, 'link "Other page"'))
    assert "The other page" in (await tools("browser_snapshot")).text
    went = await tools("browser_back")
    assert "Booking" in went.text
    # Restored from the back/forward cache, which fires no load event: still it is loaded.
    assert "still loading" not in went.text


async def test_scroll_wait_and_tabs(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/tall"))
    scrolled = await tools("browser_scroll", dy=1500)
    assert re.search(r"now at [1-9]\d* of", scrolled.text)
    await tools("browser_navigate", url=site.url("/late"))
    waited = await tools("browser_wait", text="Ready now", seconds=10)
    assert "is on the page" in waited.text
    listed = await tools("browser_tabs", action="new", url=site.url("/other"))
    assert re.search(r"\* 1: Other", listed.text)
    picked = await tools("browser_tabs", action="select", index=0)
    assert re.search(r"\* 0: Late", picked.text)
    # Selected is shown: a background tab would hold every click about five seconds.
    shown = await tools("browser_evaluate", expression="document.visibilityState")
    assert shown.text.splitlines()[1] == '"visible"'
    closed = await tools("browser_tabs", action="close", index=1)
    assert "Other" not in closed.text


async def test_acting_on_a_ref_of_another_tab_brings_that_tab_to_the_front(
    tools: Tools, site: Site
) -> None:
    await tools("browser_navigate", url=site.url("/form"))
    link = ref_of((await tools("browser_snapshot")).text, 'link "Other page"')
    await tools("browser_tabs", action="new", url=site.url("/tall"))  # in front now
    await tools("browser_click", ref=link)
    # The link's tab is current and shown: a background tab holds a click about 5 s.
    shown = await tools("browser_evaluate", expression="document.visibilityState")
    assert shown.text.splitlines()[1] == '"visible"'
    assert "The other page" in (await tools("browser_snapshot")).text


async def test_dialogs_are_dismissed_unless_accepted_and_reported(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/dialogs"))
    snap = (await tools("browser_snapshot")).text
    ask = ref_of(snap, 'button "Ask"')
    dismissed = await tools("browser_click", ref=ask)
    assert "[dialog: confirm 'Sure?' was dismissed]" in dismissed.text
    assert "out" and "- text: no" in (await tools("browser_snapshot")).text
    accepted = await tools("browser_click", ref=ask, accept_dialogs=True)
    assert "was accepted" in accepted.text
    assert "- text: yes" in (await tools("browser_snapshot")).text


async def test_a_popup_becomes_the_current_tab(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/popup"))
    snap = (await tools("browser_snapshot")).text
    clicked = await tools("browser_click", ref=ref_of(snap, 'button "Open"'))
    assert "a popup opened" in clicked.text
    assert "The other page" in (await tools("browser_snapshot")).text


async def test_iframes_inline_same_site_and_name_cross_site(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/frames"))
    snap = (await tools("browser_snapshot")).text
    assert 'button "Inner button"' in snap
    assert f'frame "http://127.0.0.3:{site.port}/inner"' in snap
    await tools("browser_click", ref=ref_of(snap, 'button "Inner button"'))


async def test_screenshot_and_pdf_land_in_the_workspace(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/form"))
    shot = await tools("browser_screenshot", path="shots/form.png", full_page=True)
    saved = tools.ctx.workspace / "shots" / "form.png"
    assert saved.read_bytes().startswith(b"\x89PNG")
    assert shot.media and shot.media[0].media_type == "image/png"
    await tools("browser_pdf", path="form.pdf")
    assert (tools.ctx.workspace / "form.pdf").read_bytes().startswith(b"%PDF")
    with pytest.raises(ToolError, match="outside the workspace"):
        await tools("browser_screenshot", path="/tmp/escape.png")


async def test_downloads_by_url_and_by_click(tools: Tools, site: Site) -> None:
    by_url = await tools("browser_download", url=site.url("/file/report.csv"))
    assert "downloads/report.csv" in by_url.text
    assert (tools.ctx.workspace / "downloads" / "report.csv").read_bytes() == b"a,b\n1,2\n"
    await tools("browser_navigate", url=site.url("/downloads"))
    snap = (await tools("browser_snapshot")).text
    clicked = await tools(
        "browser_download", ref=ref_of(snap, 'link "Get the report"'), path="got/r.csv"
    )
    assert "got/r.csv" in clicked.text
    assert (tools.ctx.workspace / "got" / "r.csv").read_bytes() == b"a,b\n1,2\n"


async def test_evaluate_returns_json_framed_as_page_content(tools: Tools, site: Site) -> None:
    await tools("browser_navigate", url=site.url("/form"))
    out = await tools("browser_evaluate", expression="({title: document.title, n: 1 + 1})")
    lines = out.text.splitlines()
    assert lines[0].startswith("[page content follows")
    assert lines[1] == '{"title": "Booking", "n": 2}'
    with pytest.raises(ToolError, match="the script threw"):
        await tools("browser_evaluate", expression="null.x")


async def test_a_long_page_is_cut_with_the_offset_to_continue(tools: Tools, site: Site) -> None:
    rows = "".join(f"<li>Item number {i} of the long list</li>" for i in range(2000))
    await tools("browser_navigate", url=f"data:text/html,<title>Long</title><ul>{rows}</ul>")
    first = (await tools("browser_snapshot")).text
    assert len(first) < 24_500 and "Item number 1999" not in first
    parts, text = 1, first
    while found := re.search(r"call browser_snapshot with offset=(\d+) for the rest", text):
        text = (await tools("browser_snapshot", offset=int(found.group(1)))).text
        assert len(text) < 24_500
        parts += 1
    assert parts > 2 and "Item number 1999" in text


async def test_a_page_still_loading_at_the_deadline_is_reported_not_failed(
    tools: Tools, site: Site
) -> None:
    out = await tools("browser_navigate", url=site.url("/slow"), timeout_seconds=6)
    assert not out.is_error
    assert site.url("/slow") in out.text and "[the page is still loading]" in out.text
    assert "Half there" in (await tools("browser_snapshot")).text
