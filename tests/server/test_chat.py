"""The web channel: POST /api/chat, the event stream with catch-up, live activity, approvals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import mock_config
from tests.fakes.loopback import serve_on_loopback
from tests.fakes.media_gen import png
from tests.server.conftest import SSEReader

SHOT = png(4, 3)  # a real PNG: attachments are told images by their bytes


def script(release: Path) -> str:
    """Scenarios: "slow" waits for `release` to exist, "tool" lists the workspace."""
    command = f"while [ ! -e {release} ]; do sleep 0.02; done; echo released"
    return f"""
- match: "slow"
  steps:
    - text: "Working on it."
      tool_calls: [{{name: exec, arguments: {{command: "{command}"}}}}]
    - text: "Slow reply done."
- match: "tool"
  steps:
    - text: "Listing."
      tool_calls: [{{name: list_dir, arguments: {{path: "."}}}}]
    - text: "Listed the workspace."
- match: "run"
  steps:
    - tool_calls: [{{name: exec, arguments: {{command: "echo approved-run"}}}}]
    - text: "Ran it."
- steps:
    - text: "Echo: {{input}}"
"""


def two_agents(text: str) -> str:
    """The config `text` with a second agent, ops."""
    return text + "  ops:\n    model: mock/scripted\n    mode: full\n"


async def events_of(served: Any, conversation: str, after: int = 0, **headers: str) -> Any:
    return await served.client.get(
        f"{served.url}/api/chat/{conversation}/events?after={after}",
        headers=served.auth(**headers),
    )


async def test_a_message_queues_a_turn_and_its_reply_streams_in_order(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    sent = await served.post_json("/api/chat", {"conversation": "c1", "text": "hello"})
    assert sent["message"] == "queued"
    assert sent["turn"].startswith("turn_")
    async with await events_of(served, "c1") as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        reader = SSEReader(response)
        first = await reader.until(lambda f: f.get("event") == "message")
        assert first["data"]["role"] == "user"
        assert first["data"]["text"] == "hello"
        assert first["id"] == str(first["data"]["seq"])
        reply = await reader.until(lambda f: f.get("event") == "message")
        assert reply["data"]["role"] == "assistant"
        assert reply["data"]["text"] == "Echo: hello"
        assert reply["data"]["turn"] == sent["turn"]
        assert (reply["data"]["session"], reply["data"]["agent"]) == (sent["session"], "main")
        assert int(reply["id"]) > int(first["id"])


async def test_a_resent_client_id_is_a_no_op(serve: Any, tmp_path: Path) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    body = {"conversation": "c2", "text": "once please", "id": "client-msg-1"}
    first = await served.post_json("/api/chat", body)
    again = await served.post_json("/api/chat", body)
    assert again["turn"] == first["turn"]
    assert again["message"] == "already received"
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(first["turn"]), 30)
    assert outcome.status == "done"
    third = await served.post_json("/api/chat", body)
    assert third["turn"] == first["turn"]
    async with await events_of(served, "c2") as response:
        reader = SSEReader(response)
        frames = [await reader.until(lambda f: f.get("event") == "message") for _ in range(2)]
    assert [f["data"]["role"] for f in frames] == ["user", "assistant"]
    messages = await served.runtime.sessions.messages(outcome.session)
    assert [m.role for m in messages] == ["user", "assistant"]


async def test_the_stream_catches_up_after_a_disconnect(serve: Any, tmp_path: Path) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    first = await served.post_json("/api/chat", {"conversation": "c3", "text": "one"})
    async with await events_of(served, "c3") as response:
        reader = SSEReader(response)
        await reader.until(lambda f: f.get("event") == "message" and f["data"]["seq"] >= 1)
        reply = await reader.until(
            lambda f: f.get("event") == "message" and f["data"]["role"] == "assistant"
        )
    last_seen = reply["id"]
    # While disconnected: another exchange happens.
    second = await served.post_json("/api/chat", {"conversation": "c3", "text": "two"})
    await asyncio.wait_for(served.runtime.turns.wait_turn(second["turn"]), 30)
    assert first["turn"] != second["turn"]
    async with await events_of(served, "c3", **{"Last-Event-ID": last_seen}) as response:
        reader = SSEReader(response)
        missed = [await reader.until(lambda f: f.get("event") == "message") for _ in range(2)]
        assert [f["data"]["text"] for f in missed] == ["two", "Echo: two"]
        # Then live: a new message arrives on the same open stream.
        third = await served.post_json("/api/chat", {"conversation": "c3", "text": "three"})
        live = await reader.until(lambda f: f.get("event") == "message")
        assert live["data"]["text"] == "three"
        assert live["data"]["turn"] == third["turn"]
    # ?after=N is the same catch-up without the header.
    async with await events_of(served, "c3", after=int(missed[1]["id"])) as response:
        reader = SSEReader(response)
        frame = await reader.until(lambda f: f.get("event") == "message")
        assert frame["data"]["text"] == "three"


async def test_typing_events_while_a_turn_runs_and_keepalive_comments(
    serve: Any, tmp_path: Path
) -> None:
    release = tmp_path / "go"
    served = await serve(mock_config(script(release)))
    served.server.keepalive_seconds = 0.2
    served.server.typing_seconds = 0.1
    async with await events_of(served, "c4") as response:
        reader = SSEReader(response)
        sent = await served.post_json("/api/chat", {"conversation": "c4", "text": "slow one"})
        typing = await reader.until(lambda f: f.get("event") == "typing")
        assert typing["data"] == {"turn": sent["turn"], "active": True}
        again = await reader.until(lambda f: f.get("event") == "typing")
        assert again["data"]["active"] is True  # refreshed while the turn runs
        release.touch()
        reply: dict[str, Any] = {}
        stopped = False
        while not (reply and stopped):
            frame = await reader.next()
            if frame.get("event") == "message" and frame["data"]["role"] == "assistant":
                reply = frame
            elif frame.get("event") == "typing" and frame["data"]["active"] is False:
                stopped = True
        assert reply["data"]["text"] == "Slow reply done."
        while "keepalive" not in reader.comments:
            line = await asyncio.wait_for(response.content.readline(), 5)
            if line.startswith(b":"):
                reader.comments.append(line[1:].decode().strip())


async def test_a_conversation_keeps_its_agent_until_a_message_names_another(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(two_agents(mock_config(script(tmp_path / "go"))))
    first = await served.post_json("/api/chat", {"conversation": "c5", "text": "hi"})
    second = await served.post_json("/api/chat", {"conversation": "c5", "text": "again"})
    assert first["session"] == second["session"]
    switched = await served.post_json(
        "/api/chat", {"conversation": "c5", "text": "to ops", "agent": "ops"}
    )
    assert switched["session"] != first["session"]
    stays = await served.post_json("/api/chat", {"conversation": "c5", "text": "still ops"})
    assert stays["session"] == switched["session"]
    assert (await served.runtime.sessions.session(stays["session"])).agent == "ops"
    listed = await served.get_json("/api/chat/conversations")
    assert listed["conversations"][0]["conversation"] == "c5"
    assert listed["conversations"][0]["agent"] == "ops"
    unknown = await served.post_json(
        "/api/chat", {"conversation": "c5", "text": "x", "agent": "ghost"}, status=404
    )
    assert "ghost" in unknown["error"]


async def test_new_starts_a_fresh_session_without_a_turn(serve: Any, tmp_path: Path) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    first = await served.post_json("/api/chat", {"conversation": "c6", "text": "hi"})
    await asyncio.wait_for(served.runtime.turns.wait_turn(first["turn"]), 30)
    new = await served.post_json("/api/chat", {"conversation": "c6", "text": "/new"})
    assert new["turn"] is None
    assert new["session"] != first["session"]
    after = await served.post_json("/api/chat", {"conversation": "c6", "text": "fresh"})
    assert after["session"] == new["session"]
    status = await served.post_json("/api/chat", {"conversation": "c6", "text": "/status"})
    assert new["session"] in status["message"]


async def test_an_upload_that_claims_to_be_an_image_but_is_not_gets_a_note_not_a_block(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    form = aiohttp.FormData()
    form.add_field("conversation", "c8")
    form.add_field("text", "look")
    form.add_field("file", b"not an image at all", filename="fake.png", content_type="image/png")
    headers = served.auth(**{"X-Habakkuk-Client": "test"})
    async with served.client.post(served.url + "/api/chat", data=form, headers=headers) as response:
        assert response.status == 202, await response.text()
        sent = await response.json()
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    first = (await served.runtime.sessions.messages(outcome.session))[0].message
    assert [b for b in first.blocks if b.type == "image"] == []
    assert "inbox/fake.png not shown: it says image/png, but it is not an image" in first.text


async def test_attachments_go_to_the_workspace_inbox(serve: Any, tmp_path: Path) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    form = aiohttp.FormData()
    form.add_field("conversation", "c7")
    form.add_field("text", "see attached")
    form.add_field("id", "upload-1")
    form.add_field("file", b"col1,col2\n1,2\n", filename="../../data.csv", content_type="text/csv")
    form.add_field("file", SHOT, filename="shot.png", content_type="image/png")
    headers = served.auth(**{"X-Habakkuk-Client": "test"})
    async with served.client.post(served.url + "/api/chat", data=form, headers=headers) as response:
        assert response.status == 202, await response.text()
        sent = await response.json()
    workspace = served.runtime.config.agent("main").workspace_path
    assert (workspace / "inbox" / "data.csv").read_bytes() == b"col1,col2\n1,2\n"
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    first = (await served.runtime.sessions.messages(outcome.session))[0].message
    assert "see attached" in first.text
    assert "inbox/data.csv" in first.text
    images = [b for b in first.blocks if b.type == "image"]
    assert [(i.media_type, i.name) for i in images] == [("image/png", "shot.png")]
    assert (workspace / "inbox" / "shot.png").read_bytes() == SHOT
    audio = aiohttp.FormData()
    audio.add_field("conversation", "c7")
    audio.add_field("audio", b"RIFF", filename="a.wav", content_type="audio/wav")
    async with served.client.post(
        served.url + "/api/chat", data=audio, headers=headers
    ) as response:
        assert response.status == 501


async def test_live_activity_shows_tool_cards_of_the_conversation(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go")))
    await served.post_json("/api/chat", {"conversation": "c8", "text": "hello"})
    async with served.client.get(
        served.url + "/api/chat/c8/live", headers=served.auth()
    ) as response:
        reader = SSEReader(response)
        start = await reader.next()
        assert start["event"] == "session"
        sent = await served.post_json("/api/chat", {"conversation": "c8", "text": "use a tool"})
        tool_start = await reader.until(lambda f: f["data"].get("kind") == "tool_start")
        assert tool_start["data"]["tool"] == "list_dir"
        assert '"path"' in tool_start["data"]["input"]
        tool_done = await reader.until(lambda f: f["data"].get("kind") == "tool_done")
        assert tool_done["data"]["id"] == tool_start["data"]["id"]
        assert tool_done["data"]["is_error"] is False
        done = await reader.until(lambda f: f["data"].get("kind") == "turn_done")
        assert done["data"]["text"] == "Listed the workspace."
        assert done["data"]["turn"] == sent["turn"]


async def test_the_dashboard_answers_an_approval_and_the_turn_goes_on(
    serve: Any, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go"), mode="ask"))
    with served.runtime.bus.subscribe(lambda e: e.kind == "approval.pending") as pending:
        sent = await served.post_json("/api/chat", {"conversation": "c9", "text": "run it"})
        await asyncio.wait_for(pending.get(), 30)
    listed = await served.get_json("/api/approvals")
    [approval] = listed["approvals"]
    assert approval["tool"] == "exec"
    assert approval["to"] == {"account": "web", "conversation": "c9", "thread": ""}
    assert approval["session"] == sent["session"]
    missing = await served.post_json("/api/approvals/apr_nope", {"approve": True}, status=404)
    assert "not waiting" in missing["error"]
    await served.post_json(f"/api/approvals/{approval['id']}", {"approve": True}, status=200)
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    assert outcome.reply == "Ran it."
    results = [
        r
        for m in await served.runtime.sessions.messages(outcome.session)
        for r in m.message.tool_results
    ]
    assert "approved-run" in results[0].text
    assert (await served.get_json("/api/approvals"))["approvals"] == []
    again = await served.post_json(
        f"/api/approvals/{approval['id']}", {"approve": False}, status=404
    )
    assert "not waiting" in again["error"]


TWO_RUNS = """
- tool_calls: [{name: exec, arguments: {command: "echo first-run"}}]
- tool_calls: [{name: exec, arguments: {command: "echo second-run"}}]
- text: "Both ran."
"""


async def test_the_dashboard_allows_a_tool_for_the_session_and_the_next_call_is_not_asked(
    serve: Any,
) -> None:
    served = await serve(mock_config(TWO_RUNS, mode="ask"))
    with served.runtime.bus.subscribe(lambda e: e.kind == "approval.pending") as pending:
        sent = await served.post_json("/api/chat", {"conversation": "c12", "text": "run both"})
        await asyncio.wait_for(pending.get(), 30)
        [approval] = (await served.get_json("/api/approvals"))["approvals"]
        path = f"/api/approvals/{approval['id']}"
        refused = await served.post_json(path, {"approve": False, "for_session": True}, status=400)
        assert refused["error"] == "for_session goes with approve: true"
        await served.post_json(path, {"approve": True, "for_session": True}, status=200)
        outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
        assert pending.get_nowait() is None  # the second exec was not asked about
    assert outcome.reply == "Both ran."
    results = [
        r.text
        for m in await served.runtime.sessions.messages(outcome.session)
        for r in m.message.tool_results
    ]
    assert ["first-run" in results[0], "second-run" in results[1]] == [True, True]
    events = await served.server.web_store().events("c12")
    assert "Approved for this session from the dashboard." in [e.text for e in events]


async def test_yes_in_the_chat_answers_the_waiting_approval(serve: Any, tmp_path: Path) -> None:
    served = await serve(mock_config(script(tmp_path / "go"), mode="ask"))
    with served.runtime.bus.subscribe(lambda e: e.kind == "approval.pending") as pending:
        sent = await served.post_json("/api/chat", {"conversation": "c10", "text": "run it"})
        await asyncio.wait_for(pending.get(), 30)
    answer = await served.post_json("/api/chat", {"conversation": "c10", "text": "yes"})
    assert answer["turn"] is None
    assert "Approved" in answer["message"]
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    assert outcome.reply == "Ran it."


async def test_a_reply_to_a_turn_another_process_ran_is_delivered_once(
    serve: Any, runtime_factory: Any, tmp_path: Path
) -> None:
    from habakkuk.channels.sweep import sweep_replies

    text = mock_config(script(tmp_path / "go"))
    served = await serve(text, workers=False)
    sent = await served.post_json("/api/chat", {"conversation": "c11", "text": "later"})
    # Another process without channels runs it: no reply is queued where it ran.
    other = await runtime_factory(served.runtime.home.config_path.read_text())
    other.start_workers(channels=False)
    await asyncio.wait_for(other.turns.wait_turn(sent["turn"]), 30)
    assert await sweep_replies(served.runtime.queue, "turn") == 1
    assert await sweep_replies(served.runtime.queue, "turn") == 0
    async with await events_of(served, "c11") as response:
        reader = SSEReader(response)
        reply = await reader.until(
            lambda f: f.get("event") == "message" and f["data"]["role"] == "assistant"
        )
    assert reply["data"]["text"] == "Echo: later"
    assert reply["data"]["turn"] == sent["turn"]
    events = await served.server.web_store().events("c11")
    assert [e.role for e in events] == ["user", "assistant"]


async def test_a_recording_is_transcribed_and_sent_as_the_message(
    serve: Any, tmp_path: Path
) -> None:
    from aiohttp import web

    answers = [
        web.json_response({"text": "what time is it"}),
        web.json_response({"text": "  "}),
        web.Response(status=500, text="boom"),
    ]
    received: list[str] = []

    async def transcriptions(request: web.Request) -> web.Response:
        form = await request.post()
        received.append(str(form["model"]))
        return answers.pop(0)

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    runner, port = await serve_on_loopback(app)
    try:
        extra = f"transcription:\n  base_url: http://127.0.0.1:{port}/v1\n  key_env: null\n"
        served = await serve(mock_config(script(tmp_path / "go"), extra=extra))
        assert (await served.get_json("/api/app"))["transcription"] is True
        headers = served.auth(**{"X-Habakkuk-Client": "test"})
        statuses = []
        for _ in range(3):
            form = aiohttp.FormData()
            form.add_field("conversation", "voice")
            form.add_field("text", "typed first")
            form.add_field("audio", b"OggS...", filename="memo.ogg", content_type="audio/ogg")
            async with served.client.post(
                served.url + "/api/chat", data=form, headers=headers
            ) as response:
                statuses.append((response.status, await response.json()))
        ok, silent, failed = statuses
        assert ok[0] == 202
        assert ok[1]["transcript"] == "what time is it"
        assert received == ["whisper-1"] * 3
        outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(ok[1]["turn"]), 30)
        assert outcome.reply == "Echo: typed first\nwhat time is it"
        assert silent[0] == 422
        assert failed[0] == 502
    finally:
        await runner.cleanup()
