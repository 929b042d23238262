"""The dashboard's Nodes view in headless Chromium: a pairing code for a device, this
browser paired as a node (it serves from the dashboard), and a revoke.

Skipped when Playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from habakkuk.protocols.nodes.hub import NodeHub
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.protocols.nodes.conftest import NODES
from tests.server.conftest import ServeFactory

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.async_api")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)


@pytest.mark.timeout(120)
async def test_the_dashboard_pairs_a_device_and_itself_and_revokes(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    hub = served.runtime.devices
    assert isinstance(hub, NodeHub) and served.token is not None
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            context = await browser.new_context(
                permissions=["geolocation"], geolocation={"latitude": 1.0, "longitude": 2.0}
            )
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(served.url + "/app/")
            await page.wait_for_selector("#login:not([hidden])")
            await page.fill("#token", served.token)
            await page.click("#login-button")
            await page.wait_for_selector("#shell:not([hidden])")
            await page.click("nav button[data-view=nodes]")
            await page.click("#nodes-new-code")
            await page.wait_for_selector("#nodes-pairing:not([hidden])")
            code = await page.text_content("#nodes-code")
            assert code is not None and len(code) == 10
            assert (await page.get_attribute("#nodes-link", "href") or "").endswith(
                f"/app/pair.html#{code}"
            )
            await page.fill("#nodes-browser-name", "dash")
            await page.uncheck("#nodes-browser-notify")
            await page.check("#nodes-browser-location")
            await page.click("#nodes-browser-form button[type=submit]")
            await eventually(lambda: "dash" in hub.live, what="the dashboard's browser node")
            result = await hub.invoke("dash", "location.get", {}, timeout=30)
            assert not result.error and '"latitude":1' in result.text
            await page.click("nav button[data-view=nodes]")
            await page.wait_for_selector("li.node-item[data-name=dash] .node-online")
            await page.click("li.node-item[data-name=dash] .node-revoke")
            await eventually(lambda: "dash" not in hub.live, what="the node revoked")
            await page.wait_for_selector("#nodes-list >> text=No device is paired yet.")
            assert errors == []
        finally:
            await browser.close()
