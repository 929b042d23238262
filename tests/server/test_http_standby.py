"""Two processes on one home: the second stands by for the HTTP address and takes over."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.conftest import OpenRuntime, mock_config
from tests.processes import free_port


async def test_second_runtime_stands_by_then_takes_over_the_address(
    runtime_factory: OpenRuntime,
) -> None:
    port = free_port()
    config = mock_config(extra=f"http:\n  listen: 127.0.0.1:{port}\n")
    first = await runtime_factory(config)
    second = await runtime_factory(config)
    first_lines: list[str] = []
    second_lines: list[str] = []
    took_over = asyncio.Event()

    def second_report(line: str) -> None:
        second_lines.append(line)
        if line.startswith("HTTP on"):
            took_over.set()

    await first.http.serve(first_lines.append)
    await second.http.serve(second_report, retry_seconds=0.05)
    assert first_lines[0].startswith(f"HTTP on http://127.0.0.1:{port}")
    assert "in use" in second_lines[0] and "standing by" in second_lines[0]
    assert not took_over.is_set()

    await first.http.stop()  # the first process goes away
    await asyncio.wait_for(took_over.wait(), 10)
    async with (
        aiohttp.ClientSession() as client,
        client.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        assert response.status == 200
