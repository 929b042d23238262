"""End to end through a real Runtime, with WhatsApp faked at the library's event boundary.

WhatsApp's wire is end-to-end encrypted to WhatsApp's own servers, so there is no wire
to fake; tests/channels/fake_whatsapp.py stands in for the library instead, producing
neonize's real protobuf events and reading back the protobufs the adapter built.
WhatsApp has no threads (a community's groups are chats of their own) and no buttons for
a linked device, so those rows of the checklist have no WhatsApp form here.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from neonize.proto.Neonize_pb2 import ConnectFailureReason, LoggedOut
from neonize.utils.enum import ChatPresence

from habakkuk import cli
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ImageBlock
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_whatsapp import GROUP, ME, PERSON, FakeWhatsApp, WhatsAppDriver
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually

PHOTO = png(4, 3)
OpenRuntime = Callable[..., Awaitable[Runtime]]
DM = f"{PERSON}@s.whatsapp.net"
STRANGER = "4917000000099"

APPROVAL_SCRIPT = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""

SEND_FILE_SCRIPT = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
- "sent"
"""


def channel_yaml(extra: str = "") -> str:
    return textwrap.dedent(
        f"""
        channels:
          wa:
            type: whatsapp
            allow_from: ["+{PERSON}"]
        """
    ) + textwrap.indent(textwrap.dedent(extra), "    ")


@pytest.fixture
def start(runtime_factory: Any, wa: FakeWhatsApp) -> OpenRuntime:
    """Open a runtime with the wa channel and a script, and start its workers."""

    async def _start(
        script: str = "- 'echo: {input}'", *, mode: str = "full", extra: str = "", channel: str = ""
    ) -> Runtime:
        config = mock_config(script, mode=mode, extra=channel_yaml(channel) + extra)
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        assert runtime.channels is not None
        await runtime.channels.started()
        await wa.connected()
        return runtime

    return _start


def finished(home: Home, job_id: str) -> bool:
    found = rows(home, "SELECT status FROM jobs WHERE id = ?", (job_id,))
    return bool(found) and found[0]["status"] in ("done", "failed", "cancelled")


async def test_a_message_is_answered_once_quoting_it(
    start: OpenRuntime, wa: FakeWhatsApp, home: Home
) -> None:
    await start()
    event = await wa.message("hello there")
    await wa.wait_for(lambda: len(wa.texts()) == 1)
    turn = f"turn:wa:{DM}:{event.Info.ID}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the reply delivered")
    assert wa.texts() == ["echo: hello there"]
    [reply] = wa.sent
    quote = reply.message.extendedTextMessage.contextInfo
    assert quote.stanzaID == event.Info.ID
    assert quote.participant == DM
    assert quote.quotedMessage.conversation == "hello there"


async def test_a_redelivered_message_is_dropped(
    start: OpenRuntime, wa: FakeWhatsApp, home: Home
) -> None:
    await start()
    first = await wa.message("first")
    await wa.wait_for(lambda: len(wa.texts()) == 1)
    await wa.replay(first)
    second = await wa.message("second")
    await wa.wait_for(lambda: len(wa.texts()) == 2)
    await eventually(
        lambda: finished(home, f"reply:turn:wa:{DM}:{second.Info.ID}"), what="second reply"
    )
    assert wa.texts() == ["echo: first", "echo: second"]
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 2


async def test_a_stranger_is_refused_and_can_pair(
    start: OpenRuntime, wa: FakeWhatsApp, home: Home
) -> None:
    await start()
    chat = f"{STRANGER}@s.whatsapp.net"
    await wa.message("let me in", sender=STRANGER)
    await wa.wait_for(lambda: len(wa.texts(chat)) == 1)
    code = re.search(r"habakkuk pair ([A-Z0-9]{8})", wa.texts(chat)[0])
    assert code is not None, wa.texts(chat)
    assert rows(home, "SELECT id FROM jobs WHERE kind = 'turn'") == []
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 0
    await wa.wait_for(lambda: len(wa.texts(chat)) == 2)
    await wa.message("hello again", sender=STRANGER)
    await wa.wait_for(lambda: len(wa.texts(chat)) == 3)
    assert wa.texts(chat)[2] == "echo: hello again"


async def test_a_person_addressed_by_lid_is_allowed_by_phone_number(
    start: OpenRuntime, wa: FakeWhatsApp
) -> None:
    await start()
    await wa.message("via lid", lid=True)
    await wa.wait_for(lambda: len(wa.texts()) == 1)
    assert wa.texts() == ["echo: via lid"]
    # the reply quotes its author by phone number, as WhatsApp's own clients do
    assert wa.sent[0].message.extendedTextMessage.contextInfo.participant == DM


async def test_group_messages_need_a_mention_or_a_reply(
    start: OpenRuntime, wa: FakeWhatsApp
) -> None:
    await start()
    await wa.message("just chatting", chat=GROUP)
    await wa.message(f"@{ME} what time is it", chat=GROUP, mentions=[f"{ME}@s.whatsapp.net"])
    await wa.wait_for(lambda: len(wa.texts(GROUP)) == 1)
    await wa.message("and tomorrow?", chat=GROUP, quote=wa.sent[-1].id)
    await wa.wait_for(lambda: len(wa.texts(GROUP)) == 2)
    assert wa.texts(GROUP) == ["echo: what time is it", "echo: and tomorrow?"]


async def test_an_approval_answered_by_typing_yes(start: OpenRuntime, wa: FakeWhatsApp) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    await wa.message("run the thing")
    await wa.wait_for(lambda: any("echo approved-run" in t for t in wa.texts()))
    prompt = next(t for t in wa.texts() if "echo approved-run" in t)
    assert "yes" in prompt.lower()  # typed: WhatsApp has no buttons for a linked device
    await wa.message("Yes!")
    await wa.wait_for(lambda: "all done" in wa.texts())
    [session] = await runtime.sessions.list_sessions()
    results = [
        r.text for m in await runtime.sessions.messages(session.id) for r in m.message.tool_results
    ]
    assert any("approved-run" in r for r in results)
    assert wa.texts().count("all done") == 1


async def test_typing_and_reactions_while_a_turn_runs(start: OpenRuntime, wa: FakeWhatsApp) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", channel="reactions: true\n")
    event = await wa.message("react to me")
    await wa.wait_for(
        lambda: bool(wa.presences) and any(s.message.HasField("reactionMessage") for s in wa.sent)
    )
    assert wa.presences[0] == (DM, ChatPresence.CHAT_PRESENCE_COMPOSING)
    eyes = next(s for s in wa.sent if s.message.HasField("reactionMessage")).message
    assert eyes.reactionMessage.key.ID == event.Info.ID
    assert eyes.reactionMessage.key.remoteJID == DM
    assert eyes.reactionMessage.text == "👀"
    await wa.wait_for(lambda: any("echo approved-run" in t for t in wa.texts()))
    await wa.message("yes")
    await wa.wait_for(lambda: "all done" in wa.texts())


async def test_files_in_reach_the_model_and_voice_notes_are_transcribed(
    start: OpenRuntime, wa: FakeWhatsApp, home: Home
) -> None:
    transcribed: list[bytes] = []

    async def transcribe(request: web.Request) -> web.Response:
        form = await request.post()
        upload = form["file"]
        assert isinstance(upload, web.FileField)
        transcribed.append(upload.file.read())
        return web.json_response({"text": "buy oat milk"})

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", transcribe)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        runtime = await start(
            extra=f"transcription:\n  base_url: http://127.0.0.1:{port}/v1\n  key_env: null\n"
        )
        await wa.file("photo.png", PHOTO, "image/png", caption="look")
        await wa.wait_for(lambda: len(wa.texts()) == 1)
        await wa.file("voice.ogg", b"OggS fake voice", "audio/ogg; codecs=opus")
        await wa.wait_for(lambda: len(wa.texts()) == 2)
    finally:
        await runner.cleanup()
    assert transcribed == [b"OggS fake voice"]
    assert "buy oat milk" in wa.texts()[1]
    [session] = await runtime.sessions.list_sessions()
    first_user = (await runtime.sessions.messages(session.id))[0].message
    image = next(b for b in first_user.blocks if isinstance(b, ImageBlock))
    assert Path(image.blob).read_bytes() == PHOTO


async def test_the_send_file_tool_uploads_and_sends_a_document_first(
    start: OpenRuntime, wa: FakeWhatsApp, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    await start(SEND_FILE_SCRIPT)
    await wa.message("send me the report")
    await wa.wait_for(lambda: "sent" in wa.texts())
    assert wa.files() == [("report.txt", b"numbers\n")]
    document = next(s for s in wa.sent if s.message.HasField("documentMessage")).message
    assert document.documentMessage.caption == "the report"
    assert document.documentMessage.mimetype == "text/plain"
    order = [s.message.HasField("documentMessage") for s in wa.sent]
    assert order.index(True) < len(order) - 1  # the file came before the reply


async def test_the_adapter_reconnects_after_the_connection_drops(
    start: OpenRuntime, wa: FakeWhatsApp, home: Home
) -> None:
    await start()
    await wa.message("before")
    await wa.wait_for(lambda: len(wa.texts()) == 1)
    first = wa.client
    await wa.drop()
    # A message sent while the device is offline waits on WhatsApp's side.
    await wa.message("while down")
    await eventually(lambda: any(c.connected and c is not first for c in wa.clients), what="up")
    await wa.wait_for(lambda: len(wa.texts()) == 2)
    assert wa.texts()[1] == "echo: while down"
    [status] = rows(home, "SELECT * FROM channel_status WHERE account = 'wa'")
    assert status["restarts"] >= 1


async def test_an_unlinked_device_is_reported_fatal_in_habakkuk_channels(
    runtime_factory: Any, wa: FakeWhatsApp, home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    wa.refusal = LoggedOut(OnConnect=True, Reason=ConnectFailureReason.Value("LOGGED_OUT"))
    runtime = await runtime_factory(mock_config("- 'x'", extra=channel_yaml()))
    runtime.start_workers()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the supervisor to give the adapter up",
        ignore=(sqlite3.OperationalError,),  # before the supervisor's first record
    )
    [status] = rows(home, "SELECT * FROM channel_status")
    assert "unlinked" in status["detail"]
    assert await asyncio.to_thread(cli.main, ["channels"]) == 1  # 1: a channel is unhealthy
    assert re.search(r"^wa\s+whatsapp\s+fatal", capsys.readouterr().out, re.MULTILINE)


async def test_after_a_restart_a_redelivery_is_dropped_and_a_missed_message_answered(
    runtime_factory: Any, wa: FakeWhatsApp, home: Home
) -> None:
    """The restart half of exactly-once: WhatsApp redelivers what was not acknowledged
    when the device reconnects; the seen keys in control.db drop what was answered."""
    config = mock_config("- 'echo: {input}'", extra=channel_yaml())
    runtime = await runtime_factory(config)
    runtime.start_workers()
    await wa.connected()
    answered = await wa.message("answered before the restart")
    await wa.wait_for(lambda: len(wa.texts()) == 1)
    await eventually(
        lambda: finished(home, f"reply:turn:wa:{DM}:{answered.Info.ID}"), what="delivered"
    )
    await runtime.close()
    # Down: the answered message comes again (its ack was lost) and a new one waits.
    wa.pending.append(answered)
    missed = await wa.message("sent while down")
    again = await runtime_factory(config)
    again.start_workers()
    await wa.wait_for(lambda: len(wa.texts()) == 2)
    await eventually(
        lambda: finished(home, f"reply:turn:wa:{DM}:{missed.Info.ID}"), what="delivered"
    )
    assert wa.texts() == ["echo: answered before the restart", "echo: sent while down"]
    assert not wa.pending


async def test_the_platform_driver_talks_and_reads_back(
    runtime_factory: Any, wa_driver: WhatsAppDriver, home: Home
) -> None:
    """The driver the cross-platform table uses: its channel entry, words and files."""
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    channel = "channels:\n  wa:\n" + textwrap.indent(wa_driver.channel_yaml("wa"), "    ")
    runtime = await runtime_factory(mock_config(SEND_FILE_SCRIPT, extra=channel))
    runtime.start_workers()
    assert wa_driver.env() == {} and not wa_driver.has_buttons
    await wa_driver.send_file("notes.txt", b"some notes", "text/plain", caption="read this")
    await eventually(lambda: "sent" in wa_driver.texts(), what="the reply")
    assert wa_driver.files() == [("report.txt", b"numbers\n")]
