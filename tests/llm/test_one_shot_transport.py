"""A one-shot run's model client sends through httpx2's own transport (sdk_http.py): the
same requests reach the model, and its failures are the same errors as through aiohttp.

Each case runs the openai adapter in a fresh interpreter (send_one_shot is a process's
choice) against the fake model server, once per transport, and compares what came back.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.fakes.model_server import Fail, FakeModelServer, Reply
from tests.helpers import python_in

CALL = (
    "import asyncio, sys\n"
    "from habakkuk.engine.llm.adapters.sdk_http import send_one_shot\n"
    "from habakkuk.engine.llm.adapters.openai_chat import OpenAIChatProvider\n"
    "from habakkuk.engine.llm.provider import ProviderError\n"
    "from habakkuk.engine.llm.types import Message, ModelRequest, TextBlock, TextDelta\n"
    "from habakkuk.engine.config import ProviderConfig\n"
    "if sys.argv[-1] == 'one-shot':\n    send_one_shot()\n"
    "async def main():\n"
    "    config = ProviderConfig(type='openai', base_url=URL)\n"
    "    config.name = 'remote'\n"
    "    provider = OpenAIChatProvider(config)\n"
    "    request = ModelRequest(model='gpt-fake', system='be brief',\n"
    "        messages=[Message(role='user', blocks=[TextBlock(text='hi')])], api_key='sk-test')\n"
    "    text = ''\n"
    "    try:\n"
    "        async for event in provider.stream(request):\n"
    "            if isinstance(event, TextDelta):\n"
    "                text += event.text\n"
    "        print('TEXT', text)\n"
    "    except ProviderError as exc:\n"
    "        print('ERROR', exc.error_class, exc.status)\n"
    "    await provider.aclose()\n"
    "    print('AIOHTTP', 'aiohttp' in sys.modules)\n"
    "asyncio.run(main())\n"
)


async def _both(
    url: str, tmp_path: Path, server: FakeModelServer | None, reply: Reply | Fail | None
) -> dict[str, str]:
    """What the call printed, per transport."""
    seen: dict[str, str] = {}
    for mode in ("serving", "one-shot"):
        if server is not None and reply is not None:
            server.script(reply)
        code = f"URL = {url!r}\n" + CALL.replace("sys.argv[-1]", repr(mode))
        status, out, err = await python_in(code, tmp_path)
        assert status == 0, err
        seen[mode] = out
    return seen


def _line(out: str, label: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(label))


async def test_a_one_shot_client_gets_the_same_reply_without_aiohttp(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    seen = await _both(f"{model_server.base_url}/v1", tmp_path, model_server, Reply(text="hello"))
    assert _line(seen["serving"], "TEXT") == _line(seen["one-shot"], "TEXT") == "TEXT hello"
    assert _line(seen["serving"], "AIOHTTP") == "AIOHTTP True"
    assert _line(seen["one-shot"], "AIOHTTP") == "AIOHTTP False"
    first, second = model_server.requests[-2:]
    assert first.json == second.json  # the same body went out either way


@pytest.mark.parametrize("status", [429, 500, 401])
async def test_a_one_shot_client_fails_as_the_serving_one_does(
    model_server: FakeModelServer, tmp_path: Path, status: int
) -> None:
    seen = await _both(f"{model_server.base_url}/v1", tmp_path, model_server, Fail(status=status))
    assert _line(seen["serving"], "ERROR") == _line(seen["one-shot"], "ERROR")
    assert _line(seen["one-shot"], "ERROR").startswith("ERROR ")


async def test_a_refused_connection_is_the_same_network_error_either_way(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    seen = await _both(f"http://127.0.0.1:{port}/v1", tmp_path, None, None)
    assert _line(seen["serving"], "ERROR") == _line(seen["one-shot"], "ERROR")
    assert _line(seen["one-shot"], "ERROR").split()[1] == "network"
