"""A request body that never arrives: every body read answers 408 within the server's
deadline and the connection closes, for JSON routes, the web chat's multipart form and
/mcp. A raw socket sends the headers and the start of a body, then stalls."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.conftest import mock_config
from tests.server.conftest import TOKEN, Served, ServeFactory

# A chunk that announces 2^56 bytes (hex 100000000000000) and sends a few.
HUGE_CHUNK = b'100000000000000\r\n{"title": '
BOUNDARY = "habakkukstall"


@pytest.fixture
async def served(serve: ServeFactory) -> Served:
    config = mock_config("- text: hi", extra="mcp_server:\n  http: true\n")
    served = await serve(config, workers=False)
    served.server.body_seconds = 0.5  # small here; 30 s by default
    return served


async def stalled(served: Served, path: str, headers: dict[str, str], start: bytes) -> bytes:
    """Send the request line, `headers` and `start` of a body, then nothing: what the
    server answers until it closes the connection (bounded waits: the test fails, not
    hangs, if it never does)."""
    host, port = served.server.host, served.server.port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        head += f"Authorization: Bearer {TOKEN}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        writer.write(head.encode() + b"\r\n" + start)
        await writer.drain()
        async with asyncio.timeout(20):
            return await reader.read()  # to the end: the server closes the connection
    finally:
        writer.close()


def answer(raw: bytes) -> tuple[int, dict[str, str], object]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, json.loads(body) if body else None


async def test_a_json_body_announcing_2_to_the_56_bytes_gets_a_408_and_a_closed_connection(
    served: Served,
) -> None:
    raw = await stalled(
        served,
        "/api/memory/main",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        HUGE_CHUNK,
    )
    status, headers, body = answer(raw)
    assert status == 408 and headers["connection"] == "close"
    assert body == {"error": "the request body did not arrive within 0.5 s"}
    assert (await served.runtime.memory.list_notes("main"))[1] == 0


async def test_a_body_shorter_than_its_content_length_gets_a_408(served: Served) -> None:
    raw = await stalled(
        served,
        "/v1/chat/completions",
        {"Content-Type": "application/json", "Content-Length": "1000"},
        b'{"model": "main", "messages": [',
    )
    status, _, body = answer(raw)
    assert status == 408 and isinstance(body, dict)
    assert body["error"]["message"] == "the request body did not arrive within 0.5 s"


async def test_a_multipart_chat_message_that_stalls_gets_a_408(served: Served) -> None:
    start = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="conversation"\r\n\r\nweb\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        "Content-Type: text/plain\r\n\r\nthe first bytes of a file"
    ).encode()
    chunk = f"{len(start):x}\r\n".encode() + start + b"\r\n" + b"100000000000000\r\nmore"
    raw = await stalled(
        served,
        "/api/chat",
        {
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
            "Transfer-Encoding": "chunked",
            "X-Habakkuk-Client": "test",
        },
        chunk,
    )
    status, _, body = answer(raw)
    assert status == 408 and body == {"error": "the request body did not arrive within 0.5 s"}


async def test_an_mcp_request_that_stalls_gets_a_408(served: Served) -> None:
    raw = await stalled(
        served,
        "/mcp",
        {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Transfer-Encoding": "chunked",
        },
        b'100000000000000\r\n{"jsonrpc": "2.0", ',
    )
    status, _, body = answer(raw)
    assert status == 408 and body == {"error": "the request body did not arrive within 0.5 s"}


async def test_a_whole_body_is_read_as_before(served: Served) -> None:
    created = await served.post_json(
        "/api/memory/main", {"title": "Fine", "content": "arrived"}, status=201
    )
    assert created["slug"] == "fine"
