"""/app/pair.html in headless Chromium (Debian's, driven by Playwright): a phone opens the
QR code's address, pairs with the code in it, and serves as a browser node over the
event stream; the server's invoke of location.get reaches it and its answer comes back.

Skipped when Playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from habakkuk.protocols.nodes.hub import NodeHub
from tests.conftest import mock_config
from tests.helpers import eventually
from tests.protocols.nodes.conftest import NODES
from tests.protocols.nodes.helpers import new_code
from tests.server.conftest import ServeFactory

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.async_api")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed", allow_module_level=True)


@pytest.mark.timeout(120)
async def test_a_phone_pairs_on_the_pair_page_and_answers_an_invoke(serve: ServeFactory) -> None:
    served = await serve(mock_config(extra=NODES))
    hub = served.runtime.devices
    assert isinstance(hub, NodeHub)
    code = await new_code(served)
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            context = await browser.new_context(
                permissions=["geolocation"], geolocation={"latitude": 6.5, "longitude": 3.4}
            )
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(f"{served.url}/app/pair.html#{code}")
            assert await page.input_value("#pair-code") == code
            await page.fill("#pair-name", "phone")
            await page.uncheck("#cap-notify")
            await page.check("#cap-location")
            await page.click("#pair-button")
            await page.wait_for_selector("#paired:not([hidden])")
            await eventually(lambda: "phone" in hub.live, what="the browser node connected")
            assert hub.live["phone"].caps == ("location.get",)
            assert await page.evaluate("location.hash") == ""  # the used code left the address
            result = await hub.invoke("phone", "location.get", {}, timeout=30)
            assert not result.error, result.error
            where = json.loads(result.text)
            assert (where["latitude"], where["longitude"]) == (6.5, 3.4)
            assert errors == []
        finally:
            await browser.close()
