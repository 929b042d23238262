"""A fake OpenAI-compatible /audio/transcriptions endpoint for the voice tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


class Transcriber:
    """Answers each upload with the next scripted text ("" past the script); keeps them."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.uploads: list[bytes] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form["file"]
        assert isinstance(upload, web.FileField)
        self.uploads.append(upload.file.read())
        text = self.texts[len(self.uploads) - 1] if len(self.uploads) <= len(self.texts) else ""
        return web.json_response({"text": text})

    def config(self) -> str:
        """The `transcription:` section pointing at it."""
        return f"transcription:\n  base_url: {self.url}\n  key_env: null\n"


@contextlib.asynccontextmanager
async def transcriber(texts: list[str]) -> AsyncIterator[Transcriber]:
    """The fake, serving on a loopback port until the block ends."""
    fake = Transcriber(texts)
    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        yield fake
    finally:
        await runner.cleanup()
