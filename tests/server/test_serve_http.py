"""`habakkuk --serve` with an http section serves the API until SIGTERM (a real process)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.conftest import mock_config
from tests.processes import StartServe, free_port, stop, until_http
from tests.server.conftest import SSEReader

TOKEN = "serve-token-0123456789"


@pytest.mark.timeout(120)
async def test_serve_answers_over_http_and_stops_cleanly(
    tmp_path: Path, serve_process: StartServe
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    extra = f"http:\n  listen: 127.0.0.1:{port}\n  token_env: SERVE_TOKEN\n"
    (home / "config.yaml").write_text(mock_config(extra=extra), encoding="utf-8")
    process = await serve_process(home, SERVE_TOKEN=TOKEN)
    lines = await until_http(process)
    assert f"http://127.0.0.1:{port}" in lines[-1]
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as client:
        async with client.get(url + "/healthz") as response:
            assert response.status == 200
        async with client.get(url + "/api/app") as response:
            assert response.status == 401
        async with client.post(
            url + "/api/chat", json={"conversation": "cli", "text": "ping"}, headers=headers
        ) as response:
            assert response.status == 202
        async with client.get(url + "/api/chat/cli/events", headers=headers) as response:
            reader = SSEReader(response)
            reply = await reader.until(
                lambda f: f.get("event") == "message" and f["data"]["role"] == "assistant"
            )
            assert "ping" in reply["data"]["text"]
    await stop(process)  # exit 0, no traceback
