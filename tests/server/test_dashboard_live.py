"""Live mode in the dashboard, in headless Chromium (Debian's, driven by Playwright):
the Live button shows only with realtime: configured, and when the call's data channel
reports an ask_habakkuk call the page posts it to /api/realtime/tool and sends the
answer back as a function_call_output with a response.create. There is no WebRTC peer
here: an init script replaces RTCPeerConnection and getUserMedia with fakes that record
what the page sends; the offer goes to a fake of the provider's /realtime/calls.

Skipped when Playwright or /usr/bin/chromium is missing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import mock_config
from tests.fakes.realtime_api import KEY, FakeRealtime
from tests.server.test_dashboard_browser import browser, sign_in

__all__ = ["browser"]

FAKE_WEBRTC = """
window.__sent = [];
class FakeChannel extends EventTarget {
  constructor(label) { super(); this.label = label; this.readyState = "open"; }
  send(data) { window.__sent.push(JSON.parse(data)); }
  close() { this.readyState = "closed"; }
}
class FakePeer {
  constructor() { this.closed = false; window.__peer = this; }
  addTrack() {}
  createDataChannel(label) { window.__channel = new FakeChannel(label); return window.__channel; }
  async createOffer() { return { type: "offer", sdp: "v=0\\r\\ns=fake offer\\r\\n" }; }
  async setLocalDescription(description) { this.local = description; }
  async setRemoteDescription(description) { this.remote = description; }
  close() { this.closed = true; }
}
window.RTCPeerConnection = FakePeer;
Object.defineProperty(navigator, "mediaDevices", {
  value: { getUserMedia: async () => ({ getTracks: () => [] }) },
});
"""

REPORT = """(call) => window.__channel.dispatchEvent(
  new MessageEvent("message", { data: JSON.stringify(call) }))"""


def realtime(url: str) -> str:
    # "http:" on its own line: the serve fixture puts the token under it (a URL's "http:"
    # would otherwise hide that the config has no http section).
    return f"http:\nrealtime:\n  base_url: {url}/v1\n  key_env: RT_KEY\n"


async def test_the_live_button_shows_only_with_realtime(serve: Any, browser: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    assert await page.is_hidden("#chat-live")
    configured = await serve(mock_config("- text: hi", extra=realtime("http://127.0.0.1:9")))
    page = await sign_in(browser, configured)
    await page.click("nav button[data-view=chat]")
    assert await page.is_visible("#chat-live")


async def test_the_page_posts_an_ask_habakkuk_call_and_answers_the_voice_model(
    serve: Any, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RT_KEY", KEY)
    async with FakeRealtime() as fake:
        served = await serve(mock_config("- text: 'Echo: {input}'", extra=realtime(fake.url)))
        page = await sign_in(browser, served)
        await page.add_init_script(FAKE_WEBRTC)
        await page.reload()
        await page.wait_for_selector("#shell:not([hidden])")
        await page.click("nav button[data-view=chat]")
        conversation = await page.input_value("#chat-conversation")
        await page.click("#chat-live")
        await page.wait_for_selector("#chat-live.on", timeout=30_000)
        assert fake.offers == ["v=0\r\ns=fake offer\r\n"]
        assert await page.evaluate("window.__channel.label") == "oai-events"
        call = {
            "type": "response.function_call_arguments.done",
            "call_id": "call_browser_1",
            "name": "ask_habakkuk",
            "arguments": json.dumps({"request": "what is on my board"}),
        }
        await page.evaluate(REPORT, call)
        await page.wait_for_function("() => window.__sent.length >= 2", timeout=30_000)
        sent = await page.evaluate("window.__sent")
        heard = {"type": "conversation.item.input_audio_transcription.completed",
                 "transcript": "thanks, bye"}  # fmt: skip
        await page.evaluate(REPORT, heard)
        # Hanging up posts the line heard before it, then /end.
        async with page.expect_response(lambda r: r.url.endswith("/api/realtime/end")) as ended:
            await page.click("#chat-live")
        assert (await ended.value).status == 200
        await page.wait_for_selector("#chat-live:not(.on)")
        assert await page.evaluate("window.__peer.closed") is True
        assert page.errors == []
    assert sent == [
        {
            "type": "conversation.item.create",
            "item": {
                "type": "function_call_output",
                "call_id": "call_browser_1",
                "output": "Echo: what is on my board",
            },
        },
        {"type": "response.create"},
    ]
    store = served.server.web_store()
    texts = [e.text for e in await store.events(conversation)]
    assert "(voice) what is on my board" in texts
    assert "(voice) thanks, bye" in texts
