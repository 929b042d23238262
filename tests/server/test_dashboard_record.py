"""A recorded message in the dashboard, in headless Chromium (Debian's, driven by
Playwright): the Record button shows only with transcription: configured; a click
records from the microphone with the browser's own MediaRecorder, a second click sends
the recording as the "audio" part of POST /api/chat, the server has it transcribed and
the transcript is the message the agent answers.

The microphone is a WebAudio tone (an init script makes getUserMedia return it), so the
recorder, the Blob and the multipart upload are the browser's real ones.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import mock_config
from tests.helpers import eventually
from tests.server.test_dashboard_browser import browser, sign_in
from tests.voice.transcriber import transcriber

__all__ = ["browser"]

TONE_MICROPHONE = """
Object.defineProperty(navigator, "mediaDevices", {
  value: {
    getUserMedia: async () => {
      const context = new AudioContext();
      const tone = context.createOscillator();
      const microphone = context.createMediaStreamDestination();
      tone.connect(microphone);
      tone.start();
      window.__microphone = microphone.stream;
      return microphone.stream;
    },
  },
});
"""


async def test_the_record_button_shows_only_with_transcription(serve: Any, browser: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    page = await sign_in(browser, served)
    await page.click("nav button[data-view=chat]")
    assert await page.is_hidden("#chat-record")
    async with transcriber([]) as fake:
        configured = await serve(mock_config("- text: hi", extra="http:\n" + fake.config()))
        page = await sign_in(browser, configured)
        await page.click("nav button[data-view=chat]")
        assert await page.is_visible("#chat-record")


async def test_a_recording_is_transcribed_and_answered_as_the_message(
    serve: Any, browser: Any
) -> None:
    async with transcriber(["what is on my board"]) as fake:
        served = await serve(
            mock_config("- text: 'Echo: {input}'", extra="http:\n" + fake.config())
        )
        page = await sign_in(browser, served)
        await page.add_init_script(TONE_MICROPHONE)
        await page.reload()
        await page.wait_for_selector("#shell:not([hidden])")
        await page.click("nav button[data-view=chat]")
        conversation = await page.input_value("#chat-conversation")
        await page.click("#chat-record")
        await page.wait_for_selector("#chat-record.on", timeout=30_000)
        await page.wait_for_function("() => window.__microphone !== undefined")
        async with page.expect_response(lambda r: r.url.endswith("/api/chat")) as posted:
            await page.click("#chat-record")
        response = await posted.value
        assert response.status == 202, await response.text()
        assert (await response.json())["transcript"] == "what is on my board"
        assert await page.evaluate(
            "window.__microphone.getTracks().every((track) => track.readyState === 'ended')"
        )
        await page.wait_for_selector("text=Echo: what is on my board", timeout=30_000)
        assert page.errors == []
    # What reached the transcription endpoint is the browser's own recording (WebM).
    assert len(fake.uploads) == 1
    assert fake.uploads[0][:4] == b"\x1aE\xdf\xa3"
    store = served.server.web_store()

    async def answered() -> bool:
        return "Echo: what is on my board" in [e.text for e in await store.events(conversation)]

    await eventually(answered, what="the reply in the web store")
