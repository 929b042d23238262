"""End to end through a fake Matrix homeserver: gateway, deliveries, supervisor, approvals."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from habakkuk import cli
from habakkuk.channels.matrix_events import encode_id
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ImageBlock
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import finished, job, rows
from tests.channels.fake_matrix import ALICE, BOT, FakeMatrix, MatrixDriver
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually

OpenRuntime = Callable[..., Awaitable[Runtime]]
BOB = "@bob:fake.test"
MALLORY = "@mallory:fake.test"
PHOTO = png(4, 3)

APPROVAL_SCRIPT = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""


def channel_yaml(hs: FakeMatrix, extra: str = "") -> str:
    return textwrap.dedent(
        f"""
        channels:
          mx:
            type: matrix
            homeserver: {hs.base_url}
            user_id: "{BOT}"
            token_env: MATRIX_TOKEN
            allow_from: ["{ALICE}", "{BOB}"]
            poll_timeout: 1
            silent_limit: 20s
        """
    ) + textwrap.indent(textwrap.dedent(extra), "    ")


@pytest.fixture
def start(runtime_factory: Any, hs: FakeMatrix) -> OpenRuntime:
    """Open a runtime with the mx channel and a script, start its workers and wait until
    the adapter has taken its first position."""

    async def _start(
        script: str = "- 'echo: {input}'",
        *,
        mode: str = "full",
        extra: str = "",
        channel: str = "",
        synced: bool = True,
        **gateway: float,
    ) -> Runtime:
        config = mock_config(script, mode=mode, extra=channel_yaml(hs, channel) + extra)
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        channels = runtime.channels
        assert channels is not None
        for key, value in gateway.items():
            setattr(channels.gateway, key, value)
        await channels.started()
        if synced:  # the adapter has taken its position: what comes next is answered
            position = hs.position
            await hs.wait_for(lambda: hs.read_past(position))
        return runtime

    return _start


def turn_of(room: str, event: dict[str, Any]) -> str:
    return f"turn:mx:{encode_id(room)}:{event['event_id']}"


async def test_a_message_is_answered_once_in_html_quoting_it(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start("- '**echo**: {input}'")
    event = hs.say(room, "hello there")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    await eventually(lambda: finished(home, f"reply:{turn_of(room, event)}"), what="the reply")
    [reply] = hs.sent(room)
    content = reply["content"]
    assert content["body"] == "echo: hello there"
    assert content["format"] == "org.matrix.custom.html"
    assert content["formatted_body"] == "<b>echo</b>: hello there"
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": event["event_id"]}}
    assert content["m.mentions"] == {}  # never pings anyone the text names
    row = job(home, turn_of(room, event))
    assert row is not None and row["status"] == "done"


async def test_the_first_start_answers_nothing_already_there(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    hs.say(room, "written while the bot was away")
    await start()
    hs.say(room, "now")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    assert hs.texts(room) == ["echo: now"]
    first, second = hs.of("GET", "/sync")[:2]
    assert "since" not in first.query and first.query["timeout"] == "0"  # takes the position
    assert second.query["since"] == hs.synced[1] and second.query["timeout"] == "1000"
    timeline = json.loads(second.query["filter"])["room"]["timeline"]
    assert "m.room.message" in timeline["types"] and timeline["not_senders"] == [BOT]
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 1


async def test_a_replayed_batch_is_dropped_as_seen(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    runtime = await start()
    first = hs.say(room, "first")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    hs.replay(first)
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position))
    hs.say(room, "second")
    await hs.wait_for(lambda: len(hs.texts(room)) == 2)
    assert hs.texts(room) == ["echo: first", "echo: second"]
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 2
    assert len(await runtime.sessions.list_sessions()) == 1


async def test_the_position_is_saved_after_each_batch(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.say(room, "hi")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position))
    await eventually(
        lambda: (
            rows(home, "SELECT value FROM channel_offsets WHERE account = 'mx'")[0]["value"]
            >= position
        ),
        what="the saved position",
    )


async def test_invites_are_joined_from_allowed_people_only(
    start: OpenRuntime, hs: FakeMatrix
) -> None:
    await start()
    welcome = hs.invite(ALICE)
    stranger = hs.invite(MALLORY)
    await hs.wait_for(lambda: bool(hs.of("POST", "/join/")) and bool(hs.of("POST", "/leave")))
    assert [c.path.rsplit("/", 1)[1] for c in hs.of("POST", "/join/")] == [welcome]
    assert stranger in hs.of("POST", "/leave")[0].path
    assert hs.rooms[stranger].members[BOT] == "leave"
    hs.say(welcome, "thanks for joining")
    await hs.wait_for(lambda: hs.texts(welcome) == ["echo: thanks for joining"])


async def test_a_stranger_is_refused_and_can_pair(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(MALLORY)
    await start()
    hs.say(room, "let me in", sender=MALLORY)
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    code = re.search(r"habakkuk pair ([A-Z0-9]{8})", hs.texts(room)[0])
    assert code is not None, hs.texts(room)
    assert rows(home, "SELECT id FROM jobs WHERE kind = 'turn'") == []
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 0
    await hs.wait_for(lambda: len(hs.texts(room)) == 2)
    assert "You're in" in hs.texts(room)[1]
    hs.say(room, "hello again", sender=MALLORY)
    await hs.wait_for(lambda: len(hs.texts(room)) == 3)
    assert hs.texts(room)[2] == "echo: hello again"
    # a paired person's invite is joined too
    invited = hs.invite(MALLORY)
    await hs.wait_for(lambda: hs.rooms[invited].members[BOT] == "join")


async def test_a_group_message_needs_a_mention_or_a_reply(
    start: OpenRuntime, hs: FakeMatrix
) -> None:
    room = hs.room(ALICE, BOB)
    await start()
    hs.say(room, "just chatting")
    hs.say(room, "Habakkuk: what time is it")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    assert hs.texts(room) == ["echo: what time is it"]
    hs.say(room, "a pill for you", sender=BOB, mentions=[BOT])
    await hs.wait_for(lambda: len(hs.texts(room)) == 2)
    reply = hs.sent(room)[0]
    hs.say(room, "> <@bot:fake.test> echo\n\nand this?", reply_to=reply["event_id"])
    await hs.wait_for(lambda: len(hs.texts(room)) == 3)
    hs.say(room, "still chatting", reply_to=hs.events_of(room, sender=ALICE)[0]["event_id"])
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position))
    assert hs.texts(room)[1:] == ["echo: a pill for you", "echo: and this?"]


async def test_a_thread_is_its_own_conversation_answered_in_the_thread(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    runtime = await start()
    root = hs.say(room, "in the room")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    inside = hs.say(room, "in the thread", thread=root["event_id"])
    await hs.wait_for(lambda: len(hs.texts(room)) == 2)
    threaded = hs.sent(room)[1]["content"]
    assert threaded["body"] == "echo: in the thread"
    assert threaded["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": root["event_id"],
        "is_falling_back": False,
        "m.in_reply_to": {"event_id": inside["event_id"]},
    }
    assert len(await runtime.sessions.list_sessions()) == 2
    conversations = {r["conversation"] for r in rows(home, "SELECT * FROM channel_bindings")}
    assert conversations == {f"mx:{encode_id(room)}", f"mx:{encode_id(room)}:{root['event_id']}"}


async def test_an_approval_is_typed_yes_while_typing_shows(
    start: OpenRuntime, hs: FakeMatrix
) -> None:
    room = hs.room(ALICE)
    await start(APPROVAL_SCRIPT, mode="workspace", channel="reactions: true\n")
    asked = hs.say(room, "run the thing")
    await hs.wait_for(lambda: any("Approval needed" in t for t in hs.texts(room)))
    await hs.wait_for(lambda: room in hs.typing and bool(hs.events_of(room, "m.reaction")))
    [eyes] = hs.events_of(room, "m.reaction")
    relation = {"rel_type": "m.annotation", "event_id": asked["event_id"], "key": "👀"}
    assert eyes["content"]["m.relates_to"] == relation
    hs.say(room, "yes")
    await hs.wait_for(lambda: "all done" in hs.texts(room))
    await hs.wait_for(lambda: len(hs.events_of(room, "m.reaction")) == 2)
    assert hs.events_of(room, "m.reaction")[1]["content"]["m.relates_to"]["key"] == "👍"
    redacted = {e["redacts"] for e in hs.events_of(room, "m.room.redaction")}
    assert eyes["event_id"] in redacted  # the 👀 was taken back


async def test_a_progress_draft_is_a_notice_edited_then_redacted(
    start: OpenRuntime, hs: FakeMatrix
) -> None:
    room = hs.room(ALICE)
    await start(APPROVAL_SCRIPT, mode="workspace", draft_after=0.0, edit_every=0.05)
    hs.say(room, "run the thing")
    await hs.wait_for(lambda: any("Approval needed" in t for t in hs.texts(room)))
    draft = next(e for e in hs.sent(room) if e["content"]["msgtype"] == "m.notice")
    assert "Working" in draft["content"]["body"]

    def edited() -> bool:
        return any(
            e["content"].get("m.relates_to", {}).get("event_id") == draft["event_id"]
            and "exec" in e["content"]["m.new_content"]["body"]
            for e in hs.events_of(room)
        )

    await hs.wait_for(edited)
    edit = next(e for e in hs.events_of(room) if "m.new_content" in e["content"])
    assert edit["content"]["m.new_content"]["msgtype"] == "m.notice"  # still a quiet draft
    assert edit["content"]["body"].startswith("* ")
    hs.say(room, "yes")
    await hs.wait_for(lambda: "all done" in hs.texts(room))
    await hs.wait_for(
        lambda: draft["event_id"] in {e["redacts"] for e in hs.events_of(room, "m.room.redaction")}
    )


async def test_files_and_a_voice_note_reach_the_model(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    transcribed: list[str] = []

    async def transcribe(request: web.Request) -> web.Response:
        form = await request.post()
        transcribed.append(str(form["model"]))
        return web.json_response({"text": "buy oat milk"})

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", transcribe)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    room = hs.room(ALICE)
    try:
        runtime = await start(
            extra=f"transcription:\n  base_url: http://127.0.0.1:{port}/v1\n  key_env: null\n"
        )
        hs.send_file(room, "cat.png", PHOTO, "image/png", msgtype="m.image", caption="look")
        await hs.wait_for(lambda: len(hs.texts(room)) == 1)
        hs.send_file(
            room, "Voice message.ogg", b"OggS fake", "audio/ogg", msgtype="m.audio", voice=True
        )
        await hs.wait_for(lambda: len(hs.texts(room)) == 2)
    finally:
        await runner.cleanup()
    downloads = hs.of("GET", "/_matrix/client/v1/media/download/")
    assert len(downloads) == 2 and all(c.status == 200 for c in downloads)  # with the token
    names = sorted(p.name for p in (home.default_workspace("main") / "inbox").iterdir())
    assert len(names) == 2 and names[0].endswith("-cat.png")
    [session] = await runtime.sessions.list_sessions()
    first_user = (await runtime.sessions.messages(session.id))[0].message
    image = first_user.blocks[1]
    assert isinstance(image, ImageBlock) and Path(image.blob).read_bytes() == PHOTO
    assert hs.texts(room)[0].startswith("echo: look")
    assert transcribed == ["whisper-1"]
    assert "buy oat milk" in hs.texts(room)[1]


SEND_FILE_SCRIPT = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
- "sent"
"""


async def test_the_send_file_tool_uploads_and_posts_the_file(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    room = hs.room(ALICE)
    await start(SEND_FILE_SCRIPT)
    hs.say(room, "send me the report")
    await hs.wait_for(lambda: "sent" in hs.texts(room))
    [upload] = hs.of("POST", "/_matrix/media/v3/upload")
    assert upload.status == 200
    [posted] = [e for e in hs.sent(room) if e["content"]["msgtype"] == "m.file"]
    content = posted["content"]
    assert (content["body"], content["filename"]) == ("the report", "report.txt")
    assert content["info"] == {"mimetype": "text/plain", "size": 8}
    media = content["url"].rsplit("/", 1)[1]
    assert hs.media[media][1] == b"numbers\n"


async def test_a_lost_answer_is_resent_with_the_same_transaction_and_posted_once(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.hold_sends(0, created=True)  # the reply is posted, its answer is lost (502)
    event = hs.say(room, "hello")
    await hs.wait_for(lambda: len(hs.of("PUT", "/send/")) == 1)
    hs.release_sends()
    delivery = f"reply:{turn_of(room, event)}"
    await eventually(lambda: finished(home, delivery), what="the retried delivery")
    assert hs.texts(room) == ["echo: hello"]
    first, second = hs.of("PUT", "/send/")
    assert first.path == second.path  # the same transaction id
    assert hs.deduplicated == 1
    row = job(home, delivery)
    assert row is not None and row["status"] == "done" and row["attempts"] == 2


async def test_rate_limited_sends_are_retried(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.rate_limit("send", 1, retry_after_ms=50)
    event = hs.say(room, "hello")
    await hs.wait_for(lambda: hs.texts(room) == ["echo: hello"])
    await eventually(lambda: finished(home, f"reply:{turn_of(room, event)}"), what="delivery")
    row = job(home, f"reply:{turn_of(room, event)}")
    assert row is not None and row["attempts"] == 2
    assert [c.status for c in hs.of("PUT", "/send/")] == [429, 200]


async def test_a_forbidden_room_is_undeliverable(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.forbid(room)
    event = hs.say(room, "are you there?")
    delivery = f"reply:{turn_of(room, event)}"
    await eventually(lambda: finished(home, delivery), what="the delivery to give up")
    row = job(home, delivery)
    assert row is not None and row["status"] == "failed" and row["attempts"] == 1
    assert "M_FORBIDDEN" in row["error"]


async def test_an_encrypted_room_is_told_once_across_restarts(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    runtime = await start()
    hs.encrypt(room)
    hs.encrypted_message(room)
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    assert "can't read encrypted rooms" in hs.texts(room)[0]
    assert hs.sent(room)[0]["content"]["msgtype"] == "m.notice"
    await runtime.close()
    await start()
    hs.encrypted_message(room)
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position))
    assert len(hs.texts(room)) == 1
    state = json.loads((home.root / "channels" / "matrix-mx.json").read_text())
    assert state == {"encrypted_noticed": [room]}
    assert (home.root / "channels" / "matrix-mx.json").stat().st_mode & 0o777 == 0o600


async def test_the_adapter_resumes_after_the_server_drops(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.say(room, "before")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    await hs.stop()
    await eventually(
        lambda: rows(home, "SELECT state FROM channel_status")[0]["state"] != "connected",
        what="the supervisor to notice the drop",
    )
    hs.say(room, "while away")  # the saved position brings it after the restart
    await hs.start()
    await hs.wait_for(lambda: len(hs.texts(room)) == 2, timeout=30)
    assert hs.texts(room) == ["echo: before", "echo: while away"]
    [status] = rows(home, "SELECT * FROM channel_status")
    assert status["restarts"] >= 1


async def test_a_rejected_token_is_reported_fatal_in_habakkuk_channels(
    start: OpenRuntime,
    hs: FakeMatrix,
    home: Home,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MATRIX_TOKEN", "syt_wrong")
    await start(synced=False)
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the supervisor to give the adapter up for now",
    )
    [status] = rows(home, "SELECT * FROM channel_status")
    assert "M_UNKNOWN_TOKEN" in status["detail"] and "check the access token" in status["detail"]
    assert "syt_wrong" not in status["detail"]
    assert await asyncio.to_thread(cli.main, ["channels"]) == 1  # a channel is down
    out = capsys.readouterr().out
    assert re.search(r"^mx\s+matrix\s+fatal", out, re.MULTILINE), out


async def test_a_token_of_another_user_is_fatal(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    hs.user = "@someone:fake.test"
    await start(synced=False)
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="fatal",
    )
    [status] = rows(home, "SELECT * FROM channel_status")
    assert "belongs to @someone:fake.test, not @bot:fake.test" in status["detail"]


async def test_the_channels_command_reports_it_connected(
    start: OpenRuntime, hs: FakeMatrix, home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'connected'")),
        what="connected",
    )
    assert await asyncio.to_thread(cli.main, ["channels"]) == 0
    assert re.search(r"^mx\s+matrix\s+connected", capsys.readouterr().out, re.MULTILINE)


async def test_a_homeserver_without_authenticated_media_serves_the_old_download(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    hs.legacy_media = True
    room = hs.room(ALICE)
    await start()
    hs.send_file(room, "notes.txt", b"plain notes", "text/plain", caption="read this")
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    assert [c.status for c in hs.of("GET", "/download/")] == [404, 200]
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.read_bytes() == b"plain notes"


async def test_the_platform_driver_plays_alice_in_a_private_room(
    runtime_factory: Any, matrix_driver: MatrixDriver, hs: FakeMatrix
) -> None:
    body = textwrap.indent(matrix_driver.channel_yaml("mx"), "    ")
    config = mock_config("- 'echo: {input}'", extra=f"channels:\n  mx:\n{body}")
    runtime = await runtime_factory(config)
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    position = hs.position
    await hs.wait_for(lambda: hs.read_past(position))
    await matrix_driver.say("hi")
    await hs.wait_for(lambda: matrix_driver.texts() == ["echo: hi"])
    assert matrix_driver.env() == {"MATRIX_TOKEN": hs.token}
    assert matrix_driver.files() == []


async def test_a_file_over_the_homeservers_limit_is_told_in_the_room(
    start: OpenRuntime, hs: FakeMatrix, home: Home, tmp_path: Path
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.upload_limit = 10
    attachment = tmp_path / "huge.pdf"
    attachment.write_bytes(b"%PDF-1.4 pretend this is large")
    to = f"mx:{encode_id(room)}"
    code = await asyncio.to_thread(
        cli.main, ["send", "--to", to, "--file", str(attachment), "the report"]
    )
    assert code == 0
    await hs.wait_for(lambda: len(hs.texts(room)) == 1)
    caption, notice = hs.texts(room)[0].split("\n\n")
    assert caption == "the report"
    assert notice.startswith(
        "Could not send the file huge.pdf here: upload huge.pdf: 413 M_TOO_LARGE"
    )
    assert [e["content"]["msgtype"] for e in hs.sent(room)] == ["m.text"]


async def test_a_rate_limited_sync_waits_and_goes_on_without_a_restart(
    start: OpenRuntime, hs: FakeMatrix, home: Home
) -> None:
    room = hs.room(ALICE)
    await start()
    hs.rate_limit("sync", 2, retry_after_ms=20)

    def limited_then_syncing() -> bool:
        statuses = [c.status for c in hs.of("GET", "/sync")]
        return statuses.count(429) == 2 and statuses[-1] == 0  # a long poll after them

    await hs.wait_for(limited_then_syncing)
    hs.say(room, "still there?")
    await hs.wait_for(lambda: hs.texts(room) == ["echo: still there?"])
    [status] = rows(home, "SELECT * FROM channel_status")
    assert status["state"] == "connected" and status["restarts"] == 0
