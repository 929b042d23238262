"""End to end through a fake signal-cli HTTP daemon: gateway, deliveries, supervisor."""

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
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ImageBlock
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_signal import (
    ALICE_NUMBER,
    ALICE_UUID,
    BOT_NUMBER,
    GROUP_ID,
    FakeSignal,
    SignalDriver,
)
from tests.channels.platform_driver import PlatformDriver
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually

PHOTO = png(4, 3)
MALLORY_UUID = "3a110000-0000-4000-8000-000000000099"
MALLORY_NUMBER = "+4917000000099"
OpenRuntime = Callable[..., Awaitable[Runtime]]


def channel_yaml(
    signal: FakeSignal, extra: str = "", account: str = BOT_NUMBER, allow: str = ALICE_NUMBER
) -> str:
    return textwrap.dedent(
        f"""
        channels:
          sig:
            type: signal
            base_url: {signal.base_url}
            account: "{account}"
            allow_from: ["{allow}"]
        """
    ) + textwrap.indent(textwrap.dedent(extra), "    ")


@pytest.fixture
def start(runtime_factory: Any, signal_cli: FakeSignal) -> OpenRuntime:
    """Open a runtime with the sig channel and a script, and start its workers."""

    async def _start(
        script: str = "- 'echo: {input}'",
        *,
        mode: str = "full",
        extra: str = "",
        channel: str = "",
        account: str = BOT_NUMBER,
        allow: str = ALICE_NUMBER,
        connected: bool = True,
        **gateway: float,
    ) -> Runtime:
        config = mock_config(
            script, mode=mode, extra=channel_yaml(signal_cli, channel, account, allow) + extra
        )
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        channels = runtime.channels
        assert channels is not None
        for key, value in gateway.items():
            setattr(channels.gateway, key, value)
        await channels.started()
        if connected:
            await signal_cli.wait_for(lambda: bool(signal_cli.streams))
        return runtime

    return _start


def finished(home: Home, job_id: str) -> bool:
    found = rows(home, "SELECT status FROM jobs WHERE id = ?", (job_id,))
    return bool(found) and found[0]["status"] in ("done", "failed", "cancelled")


def turn_of(envelope: dict[str, Any], chat: str = ALICE_UUID) -> str:
    stamp = envelope["dataMessage"]["timestamp"]
    return f"turn:sig:{chat}:{stamp}@{envelope['sourceUuid']}"


async def test_a_message_is_answered_once_quoting_it_with_styles(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start("- 'Sure, **milk** and `eggs` 😀 _now_'")
    envelope = signal_cli.message("shopping?")
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
    await eventually(lambda: finished(home, f"reply:{turn_of(envelope)}"), what="the reply")
    [reply] = signal_cli.messages()
    assert reply.text == "Sure, milk and eggs 😀 now"
    # offsets in UTF-16 units: the emoji counts two
    assert sorted(reply.styles) == ["15:4:MONOSPACE", "23:3:ITALIC", "6:4:BOLD"]
    assert reply.quote == (envelope["timestamp"], ALICE_UUID)
    [send] = signal_cli.of("send")
    assert send.params["recipient"] == [ALICE_UUID] and send.params["account"] == BOT_NUMBER


async def test_the_same_envelope_pushed_again_is_dropped(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start()
    envelope = signal_cli.message("first")
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
    signal_cli.push(envelope)
    signal_cli.message("second")
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 2)
    assert signal_cli.texts() == ["echo: first", "echo: second"]
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 2


async def test_an_event_that_is_not_json_is_skipped_and_the_stream_goes_on(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start()
    signal_cli.push_data("{not json")
    signal_cli.push_data(json.dumps({"account": BOT_NUMBER}))  # no envelope: nothing to do
    signal_cli.message("still here")
    await signal_cli.wait_for(lambda: signal_cli.texts() == ["echo: still here"])
    assert signal_cli.connections == 1
    [status] = rows(home, "SELECT restarts FROM channel_status")
    assert status["restarts"] == 0


async def test_a_single_account_daemon_serving_another_number_is_fatal(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    signal_cli.single_account = True  # it ignores ?account= and serves BOT_NUMBER
    await start(account="+4915199999999")
    signal_cli.message("hello")
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the mismatch to be reported fatal",
    )
    [status] = rows(home, "SELECT detail FROM channel_status")
    assert f"serves {BOT_NUMBER}, not +4915199999999" in status["detail"]
    assert signal_cli.of("send") == []


async def test_receipts_typing_sync_and_reactions_start_nothing(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start()
    signal_cli.other("typingMessage", {"action": "STARTED", "timestamp": 1})
    signal_cli.other("receiptMessage", {"when": 1, "isDelivery": True, "timestamps": [1]})
    signal_cli.other("syncMessage", {"sentMessage": {"timestamp": 2, "message": "from phone"}})
    signal_cli.message(reaction={"emoji": "👍", "targetAuthorUuid": BOT_NUMBER})
    signal_cli.message("only this")
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
    assert signal_cli.texts() == ["echo: only this"]
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 1


async def test_a_stranger_is_refused_pairs_by_uuid_and_then_talks(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start()
    signal_cli.message("let me in", uuid=MALLORY_UUID, number=MALLORY_NUMBER, name="Mallory")
    await signal_cli.wait_for(lambda: len(signal_cli.texts(MALLORY_UUID)) == 1)
    code = re.search(r"habakkuk pair ([A-Z0-9]{8})", signal_cli.texts(MALLORY_UUID)[0])
    assert code is not None
    assert rows(home, "SELECT id FROM jobs WHERE kind = 'turn'") == []
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 0
    await signal_cli.wait_for(lambda: len(signal_cli.texts(MALLORY_UUID)) == 2)
    signal_cli.message("hello again", uuid=MALLORY_UUID, number=MALLORY_NUMBER)
    await signal_cli.wait_for(lambda: len(signal_cli.texts(MALLORY_UUID)) == 3)
    assert signal_cli.texts(MALLORY_UUID)[2] == "echo: hello again"


async def test_allow_from_matches_the_uuid_or_the_number_the_envelope_names(
    start: OpenRuntime, signal_cli: FakeSignal
) -> None:
    await start(allow=ALICE_UUID)
    signal_cli.message("by uuid")
    await signal_cli.wait_for(lambda: signal_cli.texts() == ["echo: by uuid"])


async def test_a_sender_without_the_allowed_number_is_a_stranger(
    start: OpenRuntime, signal_cli: FakeSignal
) -> None:
    await start()  # Alice is allowed by her number
    signal_cli.message("number hidden", number=None)
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
    assert "habakkuk pair" in signal_cli.texts()[0]


async def test_a_group_message_needs_a_mention_or_a_quote_and_is_its_own_conversation(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    runtime = await start()
    signal_cli.message("just chatting", group=GROUP_ID)
    mention = [{"name": BOT_NUMBER, "number": BOT_NUMBER, "uuid": None, "start": 0, "length": 1}]
    other = {"name": ALICE_NUMBER, "number": ALICE_NUMBER, "uuid": ALICE_UUID}
    text = "\ufffc what time is it, ask \ufffc"
    signal_cli.message(
        text, group=GROUP_ID, mentions=[*mention, {**other, "start": len(text) - 1, "length": 1}]
    )
    await signal_cli.wait_for(lambda: len(signal_cli.texts(GROUP_ID)) == 1)
    assert signal_cli.texts(GROUP_ID) == [f"echo: what time is it, ask @{ALICE_NUMBER}"]
    [ours] = signal_cli.messages(GROUP_ID)
    assert signal_cli.of("send")[0].params["groupId"] == GROUP_ID
    quote = {"id": ours.timestamp, "authorNumber": BOT_NUMBER, "authorUuid": None, "text": "x"}
    signal_cli.message("and tomorrow?", group=GROUP_ID, quote=quote)
    await signal_cli.wait_for(lambda: len(signal_cli.texts(GROUP_ID)) == 2)
    signal_cli.message("private words")
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 3  # not the chat
    sessions = await runtime.sessions.list_sessions()
    assert len(sessions) == 2  # the group and the private chat


APPROVAL_SCRIPT = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""


async def test_an_approval_is_typed_while_typing_and_reactions_show(
    start: OpenRuntime, signal_cli: FakeSignal
) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", channel="reactions: true\n")
    envelope = signal_cli.message("run the thing")
    await signal_cli.wait_for(lambda: any("Approval needed" in t for t in signal_cli.texts()))
    await signal_cli.wait_for(lambda: bool(signal_cli.of("sendTyping")))
    assert signal_cli.of("sendTyping")[0].params["recipient"] == [ALICE_UUID]
    [eyes] = signal_cli.of("sendReaction")
    assert eyes.params["emoji"] == "👀"
    assert eyes.params["targetAuthor"] == ALICE_UUID
    assert eyes.params["targetTimestamp"] == envelope["timestamp"]
    prompt = next(t for t in signal_cli.texts() if "Approval needed" in t)
    assert "Reply yes or no" in prompt and "**" not in prompt  # Markdown became styles
    signal_cli.message("yes")
    await signal_cli.wait_for(lambda: "all done" in signal_cli.texts())
    await signal_cli.wait_for(lambda: len(signal_cli.of("sendReaction")) == 2)
    assert signal_cli.of("sendReaction")[1].params["emoji"] == "👍"


async def test_a_progress_draft_is_edited_then_deleted(
    start: OpenRuntime, signal_cli: FakeSignal
) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", draft_after=0.0, edit_every=0.05)
    signal_cli.message("run the thing")
    await signal_cli.wait_for(
        lambda: any("exec" in m.text for m in signal_cli.messages() if m.edits)
    )
    draft = next(m for m in signal_cli.messages() if m.text.startswith("⏳"))
    assert not draft.urgent  # no push notification for the draft
    await signal_cli.wait_for(lambda: any("Approval needed" in t for t in signal_cli.texts()))
    signal_cli.message("yes")
    await signal_cli.wait_for(lambda: "all done" in signal_cli.texts())
    await signal_cli.wait_for(lambda: draft.deleted)
    [delete] = signal_cli.of("remoteDelete")
    assert delete.params["targetTimestamp"] == draft.timestamp


async def test_a_photo_reaches_the_model_and_a_voice_note_is_transcribed(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
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
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        runtime = await start(
            extra=f"transcription:\n  base_url: http://127.0.0.1:{port}/v1\n  key_env: null\n"
        )
        photo = signal_cli.attachment(PHOTO, "image/png", "shelf.png")
        signal_cli.message("look", attachments=[photo])
        await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
        voice = signal_cli.attachment(b"\x00\x00\x00 fake aac", "audio/aac")  # no file name
        signal_cli.message(attachments=[voice])
        await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 2)
    finally:
        await runner.cleanup()
    assert [c.params["id"] for c in signal_cli.of("getAttachment")] == [photo["id"], voice["id"]]
    assert signal_cli.of("getAttachment")[0].params["recipient"] == ALICE_UUID
    [session] = await runtime.sessions.list_sessions()
    stored = await runtime.sessions.messages(session.id)
    image = stored[0].message.blocks[1]
    assert isinstance(image, ImageBlock)
    inbox = home.default_workspace("main") / "inbox"
    assert any(p.name.endswith("shelf.png") for p in inbox.iterdir())
    assert transcribed == ["whisper-1"]
    assert "buy oat milk" in signal_cli.texts()[1]


SEND_FILE_SCRIPT = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report; v2.txt", caption: "the **report**"}
- "sent"
"""


async def test_a_file_goes_out_as_a_data_uri_with_its_name(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report; v2.txt").write_text("numbers\n")
    await start(SEND_FILE_SCRIPT)
    signal_cli.message("send me the report")
    await signal_cli.wait_for(lambda: "sent" in signal_cli.texts())
    [with_file] = [m for m in signal_cli.messages() if m.files]
    [sent] = with_file.files
    assert (sent.name, sent.content_type, sent.data) == (
        "report; v2.txt",
        "text/plain",
        b"numbers\n",
    )
    assert with_file.text == "the report" and with_file.styles == ["4:6:BOLD"]


async def test_a_file_signal_cli_refuses_is_told_in_the_chat_once(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home, tmp_path: Path
) -> None:
    await start()
    signal_cli.refused_files = "Attachment too big"
    attachment = tmp_path / "huge.pdf"
    attachment.write_bytes(b"%PDF-1.4 pretend this is large")
    code = await asyncio.to_thread(
        cli.main, ["send", "--to", f"sig:{ALICE_UUID}", "--file", str(attachment), "the report"]
    )
    assert code == 0
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 1)
    caption, notice = signal_cli.texts()[0].split("\n\n")
    assert caption == "the report"
    assert notice.startswith("Could not send the file huge.pdf here: send: -32603 Failed")
    assert "Attachment too big" in notice
    failed_sql = "SELECT * FROM jobs WHERE kind = 'delivery:sig' AND status = 'failed'"
    await eventually(lambda: rows(home, failed_sql), what="the delivery to fail for good")
    assert rows(home, failed_sql)[0]["attempts"] == 1


async def test_an_unregistered_recipient_fails_once_and_a_rate_limit_is_waited_out(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start()
    signal_cli.unregistered.add(ALICE_UUID)
    envelope = signal_cli.message("are you there?")
    reply = f"reply:{turn_of(envelope)}"
    await eventually(lambda: finished(home, reply), what="the delivery to give up")
    [failed] = rows(home, "SELECT * FROM jobs WHERE id = ?", (reply,))
    assert (failed["status"], failed["attempts"]) == ("failed", 1)
    assert "Failed to send message" in failed["error"]

    signal_cli.unregistered.clear()
    signal_cli.rate_limited = 1
    assert await asyncio.to_thread(cli.main, ["send", "--to", f"sig:{ALICE_UUID}", "later"]) == 0
    await signal_cli.wait_for(lambda: signal_cli.texts() == ["later"], timeout=30)
    assert len(signal_cli.of("send", answered=None)) == 3  # the reply, refused; twice "later"
    await eventually(
        lambda: rows(home, "SELECT 1 FROM jobs WHERE kind = 'delivery:sig' AND status = 'done'"),
        what="the retried delivery to finish",
    )
    [later] = rows(home, "SELECT * FROM jobs WHERE kind = 'delivery:sig' AND id != ?", (reply,))
    assert (later["status"], later["attempts"]) == ("done", 2)


async def test_the_stream_is_reopened_after_the_daemon_drops_it_or_goes_down(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start()
    signal_cli.drop_streams()
    await signal_cli.wait_for(lambda: signal_cli.connections == 2 and bool(signal_cli.streams))
    envelope = signal_cli.message("after a drop")
    await signal_cli.wait_for(lambda: signal_cli.texts() == ["echo: after a drop"])
    # (the answer to that send must reach the bot before the daemon goes: else the send
    # is retried, and Signal has no idempotency key to drop the second copy)
    await eventually(lambda: finished(home, f"reply:{turn_of(envelope)}"), what="the reply")
    await signal_cli.stop()
    await eventually(
        lambda: rows(home, "SELECT state FROM channel_status")[0]["state"] != "connected",
        what="the supervisor to notice the daemon is gone",
    )
    signal_cli.message("while down")  # kept for the next stream (on-connection mode)
    await signal_cli.start()
    await signal_cli.wait_for(lambda: len(signal_cli.texts()) == 2, timeout=30)
    assert signal_cli.texts()[1] == "echo: while down"


async def test_keepalives_keep_the_channel_up(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home
) -> None:
    await start(channel="poll_timeout: 1\nsilent_limit: 8s\n")  # the supervisor looks each 2 s

    def last_beat() -> float:
        found = rows(home, "SELECT last_beat FROM channel_status")
        return float(found[0]["last_beat"] or 0) if found else 0.0

    await eventually(lambda: last_beat() > 0, what="a first beat to be recorded")
    first = last_beat()
    # Nothing is said; only the daemon's `:` comments arrive, once a second.
    await eventually(lambda: last_beat() > first, what="a keepalive to be recorded as a beat")
    [status] = rows(home, "SELECT state, restarts FROM channel_status")
    assert (status["state"], status["restarts"]) == ("connected", 0)


async def test_an_account_the_daemon_lacks_is_fatal_in_habakkuk_channels(
    start: OpenRuntime, signal_cli: FakeSignal, home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    await start(account="+4915199999999", connected=False)
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the account to be reported fatal",
    )
    assert await asyncio.to_thread(cli.main, ["channels"]) == 1  # a channel is down
    out = capsys.readouterr().out
    assert re.search(r"^sig\s+signal\s+fatal", out, re.MULTILINE), out
    assert "has no account +4915199999999" in out


def _config(signal: FakeSignal, account: str = BOT_NUMBER, base: str = "") -> ChannelConfig:
    config = ChannelConfig(type="signal", base_url=base or signal.base_url, account=account)
    config.name = "sig"
    return config


async def test_setup_check_names_the_account_or_what_is_wrong(signal_cli: FakeSignal) -> None:
    check = platform_module("signal").SETUP.check
    assert await check(_config(signal_cli), {}) == f"{BOT_NUMBER} on signal-cli 0.13.99-fake"
    with pytest.raises(
        SetupCheckFailed, match=rf"has no account \+4915199999999 .*{re.escape(BOT_NUMBER)}"
    ):
        await check(_config(signal_cli, "+4915199999999"), {})
    with pytest.raises(SetupCheckFailed, match=r"cannot reach http://127\.0\.0\.1:9"):
        await check(_config(signal_cli, base="http://127.0.0.1:9"), {})
    signal_cli.single_account = True
    said = await check(_config(signal_cli), {})
    assert said.endswith("(single-account daemon)")


async def test_the_driver_plays_alice_through_a_runtime(
    runtime_factory: Any, signal_cli: FakeSignal, signal_driver: SignalDriver, home: Home
) -> None:
    driver: PlatformDriver = signal_driver
    assert driver.env() == {} and not driver.has_buttons
    body = textwrap.indent(driver.channel_yaml("sig"), "    ")
    runtime: Runtime = await runtime_factory(
        mock_config("- 'echo: {input}'", extra=f"channels:\n  sig:\n{body}")
    )
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    await signal_cli.wait_for(lambda: bool(signal_cli.streams))
    await driver.say("hi")
    await signal_cli.wait_for(lambda: driver.texts() == ["echo: hi"])
    await driver.send_file("notes.txt", b"abc", "text/plain", "read this")
    await signal_cli.wait_for(lambda: len(driver.texts()) == 2)
    assert driver.texts()[1].startswith("echo: read this")
    assert driver.files() == []
    inbox = home.default_workspace("main") / "inbox"
    assert [p.read_bytes() for p in inbox.iterdir()] == [b"abc"]
