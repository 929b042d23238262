"""Speech and Live mode without tts: or realtime: answer 501 with the API's error body
(spec 001 "Chat" and "Live mode": all but the tool and transcript endpoints, which need
only the web channel), behind the same token and JSON rules as /api."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import mock_config

PATHS = [
    ("GET", "/api/chat/w1/messages/3/speech", "speech is not configured"),
    ("POST", "/api/realtime/session", "Live mode is not configured"),
    ("POST", "/api/realtime/end", "Live mode is not configured"),
]
# These need only the web channel; the token still comes first.
WEB_ONLY = [
    ("POST", "/api/realtime/tool", ""),
    ("POST", "/api/realtime/transcript", ""),
]


@pytest.mark.parametrize(("method", "path", "says"), PATHS, ids=[p for _, p, _ in PATHS])
async def test_speech_and_live_mode_answer_501_when_not_configured(
    serve: Any, method: str, path: str, says: str
) -> None:
    served = await serve(mock_config("- text: hi"))
    app = await served.get_json("/api/app")
    assert (app["speech"], app["realtime"]) == (False, False)
    body = {"conversation": "w1"} if method == "POST" else None
    async with served.client.request(
        method, served.url + path, json=body, headers=served.auth()
    ) as response:
        assert response.status == 501, await response.text()
        answer = await response.json()
    assert list(answer) == ["error"] and says in answer["error"]


@pytest.mark.parametrize(
    ("method", "path", "says"), PATHS + WEB_ONLY, ids=[p for _, p, _ in PATHS + WEB_ONLY]
)
async def test_speech_and_live_mode_need_the_token_first(
    serve: Any, method: str, path: str, says: str
) -> None:
    served = await serve(mock_config("- text: hi"))
    body = {"conversation": "w1"} if method == "POST" else None
    async with served.client.request(method, served.url + path, json=body) as response:
        assert response.status == 401
        assert await response.json() == {"error": "missing or wrong bearer token"}


async def test_live_mode_takes_json_only(serve: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    async with served.client.post(
        served.url + "/api/realtime/session", data="conversation=w1", headers=served.auth()
    ) as response:
        assert response.status == 415


async def test_the_live_tool_and_transcript_work_without_realtime(serve: Any) -> None:
    served = await serve(mock_config("- text: hi"))
    lines = [{"role": "user", "text": "hello"}]
    got = await served.post_json(
        "/api/realtime/transcript", {"conversation": "w2", "lines": lines}, 200
    )
    assert got == {"recorded": 1}
    answer = await served.post_json(
        "/api/realtime/tool", {"conversation": "w2", "request": "hi"}, 200
    )
    assert answer == {"output": "hi"}
