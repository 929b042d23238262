"""A platform's file comes whole however the network splits it, and not at all past the cap
(the download every connection adapter uses: ntfy, Zulip, Rocket.Chat, Mattermost)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from habakkuk.channels.adapter import SendError, Undeliverable
from habakkuk.channels.http_download import download_capped
from habakkuk.engine.http_read import read_upto

FILE = bytes(range(256)) * 12_000  # about 3 MB, sent in 64 KB pieces


async def streamed(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    for start in range(0, len(FILE), 65536):
        await response.write(FILE[start : start + 65536])
    await response.write_eof()
    return response


async def gone(request: web.Request) -> web.Response:
    return web.Response(status=404)


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/file", streamed)
    app.router.add_get("/gone", gone)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_file_sent_in_many_pieces_arrives_whole(server: str) -> None:
    async with aiohttp.ClientSession() as session:
        data = await download_capped(session, f"{server}/file", 10 * 1024 * 1024, "big.bin")
    assert data == FILE


async def test_a_file_past_the_cap_is_refused_and_a_missing_one_is_retried(server: str) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(Undeliverable, match=r"big\.bin is over 1 MB"):
            await download_capped(session, f"{server}/file", 1024 * 1024, "big.bin")
        with pytest.raises(SendError, match="HTTP 404"):
            await download_capped(session, f"{server}/gone", 1024 * 1024, "gone.bin")


async def test_a_capped_read_of_any_body_takes_every_piece_up_to_its_bound(server: str) -> None:
    # What the voice, image-generation, Home Assistant and login clients read their
    # answers with: a single StreamReader.read(n) gave back one network chunk of it.
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server}/file") as response:
            assert await read_upto(response.content, len(FILE) + 1) == FILE
        async with session.get(f"{server}/file") as response:
            assert await read_upto(response.content, 1_000_001) == FILE[:1_000_001]
