"""Live mode's endpoints through the real aiohttp app (spec 001 "Live mode"): a client
secret minted from a fake of OpenAI's /realtime/client_secrets, ask_habakkuk calls as
turns of the web conversation with the mock model (approvals answered by a yes call,
the same call id attaching), the transcript kept for the agent, and the end of a call
noted in the session (202 while a turn runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import mock_config
from tests.fakes.realtime_api import KEY, SECRET, FakeRealtime
from tests.helpers import eventually
from tests.server.test_chat import script


def realtime(url: str, extra: str = "") -> str:
    # "http:" on its own line: the serve fixture puts the token under it (a URL's "http:"
    # would otherwise hide that the config has no http section).
    section = f"realtime:\n  base_url: {url}/v1\n  key_env: RT_KEY\n  voice: cedar\n  ttl: 2m\n"
    return "http:\n" + section + extra


async def user_texts(served: Any, session: str) -> list[str]:
    return [
        m.message.text
        for m in await served.runtime.sessions.messages(session)
        if m.message.role == "user" and m.message.text  # not a message of tool results
    ]


async def test_a_session_mints_a_client_secret_with_the_one_tool(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RT_KEY", KEY)
    async with FakeRealtime() as fake:
        served = await serve(mock_config("- text: hi", extra=realtime(fake.url)))
        assert (await served.get_json("/api/app"))["realtime"] is True
        body = await served.post_json("/api/realtime/session", {"conversation": "r1"}, 200)
        [sent] = fake.seen
    assert body["client_secret"] == SECRET
    assert body["calls_url"] == f"{fake.url}/v1/realtime/calls"
    assert (body["model"], body["voice"], body["tool"]) == (
        "gpt-realtime-2.1", "cedar", "ask_habakkuk",
    )  # fmt: skip
    assert sent["expires_after"] == {"anchor": "created_at", "seconds": 120}
    session = sent["session"]
    assert session["audio"]["output"]["voice"] == "cedar"
    assert session["audio"]["input"]["transcription"]["model"] == "gpt-transcribe"
    assert [t["name"] for t in session["tools"]] == ["ask_habakkuk"]
    assert session["tools"][0]["parameters"]["required"] == ["request"]


async def test_the_dashboard_may_connect_to_the_provider_only_with_realtime(serve: Any) -> None:
    on = await serve(mock_config("- text: hi", extra=realtime("http://127.0.0.1:9")))
    off = await serve(mock_config("- text: hi"))
    policies = []
    for served in (on, off):
        async with served.client.get(served.url + "/app/") as response:
            policies.append(response.headers["Content-Security-Policy"])
    assert "connect-src 'self' http://127.0.0.1:9;" in policies[0]
    assert "connect-src 'self';" in policies[1]


async def test_a_session_is_503_without_the_key_and_502_with_the_providers_refusal(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RT_KEY", raising=False)
    async with FakeRealtime() as fake:
        served = await serve(mock_config("- text: hi", extra=realtime(fake.url)))
        unset = await served.post_json("/api/realtime/session", {"conversation": "r2"}, 503)
        assert "RT_KEY is not set" in unset["error"]
        monkeypatch.setenv("RT_KEY", "sk-wrong")
        refused = await served.post_json("/api/realtime/session", {"conversation": "r2"}, 502)
    assert "Incorrect API key provided" in refused["error"]
    assert "sk-wrong" not in refused["error"]


async def test_a_tool_call_is_a_turn_of_the_conversation_with_the_unseen_lines_in_front(
    serve: Any,
) -> None:
    served = await serve(mock_config("- text: 'Echo: {input}'", extra=realtime("http://x")))
    lines = [
        {"role": "user", "text": "I moved the meeting to Friday"},
        {"role": "assistant", "text": "Got it."},
    ]
    got = await served.post_json(
        "/api/realtime/transcript", {"conversation": "r3", "lines": lines}, 200
    )
    assert got == {"recorded": 2}
    answer = await served.post_json(
        "/api/realtime/tool",
        {"conversation": "r3", "call_id": "call_1", "request": "what is on my board?"},
        200,
    )
    assert "I moved the meeting to Friday" in answer["output"]
    assert "what is on my board?" in answer["output"]
    log = [(e.role, e.text) for e in await served.server.web_store().events("r3")]
    assert log[:3] == [
        ("user", "(voice) I moved the meeting to Friday"),
        ("assistant", "(voice) Got it."),
        ("user", "(voice) what is on my board?"),
    ]
    # The lines went to the agent once: the next request carries none.
    again = await served.post_json(
        "/api/realtime/tool", {"conversation": "r3", "request": "thanks"}, 200
    )
    assert again["output"] == "Echo: thanks"


async def test_the_same_call_id_attaches_to_the_first_calls_turn(serve: Any) -> None:
    served = await serve(mock_config("- text: 'Echo: {input}'", extra=realtime("http://x")))
    call = {"conversation": "r4", "call_id": "call_same", "request": "hello"}
    first, second = await asyncio.gather(
        served.post_json("/api/realtime/tool", call, 200),
        served.post_json("/api/realtime/tool", call, 200),
    )
    assert first == second == {"output": "Echo: hello"}
    session = (await served.server.web_store().conversation("r4")).session
    assert await user_texts(served, session) == ["hello"]


async def test_an_approval_is_answered_by_a_yes_call_and_the_turn_goes_on(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(
        mock_config(script(tmp_path / "go"), mode="ask", extra=realtime("http://x"))
    )
    asked = await served.post_json(
        "/api/realtime/tool", {"conversation": "r5", "call_id": "c1", "request": "run it"}, 200
    )
    assert "needs approval to run exec" in asked["output"]
    assert "echo approved-run" in asked["output"]
    # Anything but yes or no is told the approval still waits (not queued behind it).
    other = await served.post_json(
        "/api/realtime/tool", {"conversation": "r5", "request": "what will it do?"}, 200
    )
    assert other == asked
    done = await served.post_json(
        "/api/realtime/tool", {"conversation": "r5", "call_id": "c2", "request": "yes"}, 200
    )
    assert done["output"] == "Ran it."
    session = (await served.server.web_store().conversation("r5")).session
    results = [
        r for m in await served.runtime.sessions.messages(session) for r in m.message.tool_results
    ]
    assert "approved-run" in results[0].text
    assert await user_texts(served, session) == ["run it"]


async def test_a_long_turn_says_the_answer_will_appear_in_the_chat(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go"), extra=realtime("http://x")))
    served.server.live.answer_seconds = 0.2
    later = await served.post_json(
        "/api/realtime/tool", {"conversation": "r6", "request": "slow one"}, 200
    )
    assert "will appear in the chat" in later["output"]
    (tmp_path / "go").touch()
    store = served.server.web_store()

    async def replied() -> bool:
        return any(e.text == "Slow reply done." for e in await store.events("r6"))

    await eventually(replied, what="the slow reply in the chat")


async def test_the_end_of_a_call_notes_the_lines_after_the_running_turn(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go"), extra=realtime("http://x")))
    served.server.live.answer_seconds = 0.1
    await served.post_json("/api/realtime/tool", {"conversation": "r7", "request": "slow"}, 200)
    lines = [{"role": "user", "text": "also buy milk"}, {"role": "assistant", "text": "Sure."}]
    await served.post_json("/api/realtime/transcript", {"conversation": "r7", "lines": lines}, 200)
    ended = await served.post_json("/api/realtime/end", {"conversation": "r7"}, 202)
    assert ended["noted"] == 2
    (tmp_path / "go").touch()

    async def noted() -> bool:
        texts = [m.message.text for m in await served.runtime.sessions.messages(ended["session"])]
        return bool(texts) and texts[-1] == "Noted what was said on the call."

    await eventually(noted, what="the call's note after the slow turn")
    texts = [m.message.text for m in await served.runtime.sessions.messages(ended["session"])]
    assert "user: also buy milk\nassistant: Sure." in texts[-2]
    assert texts[-3] == "Slow reply done."


async def test_the_end_of_a_call_that_never_asked_starts_a_session(serve: Any) -> None:
    served = await serve(mock_config("- text: hi", extra=realtime("http://x")))
    lines = [{"role": "user", "text": "just thinking aloud"}]
    await served.post_json("/api/realtime/transcript", {"conversation": "r8", "lines": lines}, 200)
    ended = await served.post_json("/api/realtime/end", {"conversation": "r8"}, 200)
    assert ended["noted"] == 1 and ended["session"].startswith("ses_")
    assert await user_texts(served, ended["session"]) == [
        "[What was said on a live voice call]\nuser: just thinking aloud"
    ]
    empty = await served.post_json("/api/realtime/end", {"conversation": "r8"}, 200)
    assert empty == {"noted": 0, "session": ended["session"]}


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("tool", {"conversation": "r9"}, "request is required"),
        ("tool", {"conversation": "r9", "request": 5}, "request must be"),
        ("tool", {"conversation": "r9", "request": "x", "call_id": "c" * 151}, "call_id"),
        ("transcript", {"conversation": "r9", "lines": []}, "lines is required"),
        ("transcript", {"conversation": "r9", "lines": [{"role": "x", "text": "a"}]}, "role"),
        ("transcript", {"conversation": "r9", "lines": [{"role": "user"}] * 51}, "at most 50"),
        ("transcript", {"lines": [{"role": "user", "text": "a"}]}, "conversation is required"),
        ("end", {"conversation": "r9", "extra": 1}, "extra"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    serve: Any, path: str, body: dict[str, Any], says: str
) -> None:
    served = await serve(mock_config("- text: hi", extra=realtime("http://x")))
    answer = await served.post_json(f"/api/realtime/{path}", body, 400)
    assert says in answer["error"] and "\n" not in answer["error"]
