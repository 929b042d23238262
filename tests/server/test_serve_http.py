"""`habakkuk --serve` with an http section serves the API until SIGTERM (a real process)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import mock_config
from tests.server.conftest import SSEReader

TOKEN = "serve-token-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timeout(120)
async def test_serve_answers_over_http_and_stops_cleanly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    extra = f"http:\n  listen: 127.0.0.1:{port}\n  token_env: SERVE_TOKEN\n"
    (home / "config.yaml").write_text(mock_config(extra=extra), encoding="utf-8")
    env = {**os.environ, "HABAKKUK_HOME": str(home), "SERVE_TOKEN": TOKEN}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "habakkuk.cli", "--serve",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    try:
        while not any("HTTP on" in line for line in lines):
            line = await asyncio.wait_for(process.stderr.readline(), 60)
            assert line, "serve exited: " + "".join(lines)
            lines.append(line.decode())
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
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(process.communicate(), 60)
    text = "".join(lines) + rest.decode(errors="replace")
    assert process.returncode == 0, text
    assert "Traceback" not in text
