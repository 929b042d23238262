"""End to end through a fake Slack (Socket Mode and the Web API): gateway, deliveries,
supervisor and approvals, through a real Runtime."""

from __future__ import annotations

import asyncio
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
from tests.channels.e2e_support import finished, job, rows
from tests.channels.fake_slack import BOT_USER, DM, PERSON, TEAM, FakeSlack, SlackDriver
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually

PHOTO = png(4, 3)
CHANNEL = "C0001"
OpenRuntime = Callable[..., Awaitable[Runtime]]


def channel_yaml(slack: FakeSlack, extra: str = "") -> str:
    return textwrap.dedent(
        f"""
        channels:
          sl:
            type: slack
            app_token_env: SLACK_APP_TOKEN
            bot_token_env: SLACK_BOT_TOKEN
            base_url: {slack.base_url}
            allow_from: ["{PERSON}"]
            silent_limit: 40s
        """
    ) + textwrap.indent(textwrap.dedent(extra), "    ")


@pytest.fixture
def start(runtime_factory: Any, slack: FakeSlack) -> OpenRuntime:
    """Open a runtime with the Slack channel `sl` and a script, and start its workers."""

    async def _start(
        script: str = "- 'echo: {input}'",
        *,
        mode: str = "full",
        extra: str = "",
        channel: str = "",
        **gateway: float,
    ) -> Runtime:
        config = mock_config(script, mode=mode, extra=channel_yaml(slack, channel) + extra)
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        channels = runtime.channels
        assert channels is not None
        for key, value in gateway.items():
            setattr(channels.gateway, key, value)
        await channels.started()
        return runtime

    return _start


def ts_of(envelope: dict[str, Any]) -> str:
    return str(envelope["payload"]["event"]["ts"])


def turns(home: Home) -> list[str]:
    return [r["id"] for r in rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")]


async def test_a_dm_is_answered_once_and_its_envelope_acknowledged(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    envelope = slack.message("hello **there** <!channel>")
    await slack.wait_for(lambda: len(slack.texts()) == 1)
    turn = f"turn:sl:{TEAM}-{DM}:{ts_of(envelope)}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the reply delivery")
    # The model's words come back as mrkdwn; the <!channel> it echoes pings nobody.
    assert slack.texts() == ["echo: hello *there* @channel"]
    assert envelope["envelope_id"] in slack.acks and not slack.pending
    [post] = slack.of("chat.postMessage")
    assert post.params["channel"] == DM and "thread_ts" not in post.params
    row = job(home, turn)
    assert row is not None and row["status"] == "done"


async def test_markdown_goes_out_as_mrkdwn_and_mentions_stay_text(
    start: OpenRuntime, slack: FakeSlack
) -> None:
    await start("- '**Done**: see [the docs](https://e.com/a) <!here> <@U0099> & more'")
    slack.message("go")
    await slack.wait_for(lambda: len(slack.texts()) == 1)
    assert slack.texts() == [
        "*Done*: see <https://e.com/a|the docs> &lt;!here&gt; &lt;@U0099&gt; &amp; more"
    ]


async def test_odd_fields_in_an_event_do_not_stop_the_adapter(
    start: OpenRuntime, slack: FakeSlack
) -> None:
    await start()
    event = {"type": "message", "channel": DM, "user": PERSON, "ts": "soon", "text": "odd"}
    slack.event(event | {"files": "not a list", "channel_type": "im"})
    slack.event({"type": "message", "channel": DM, "user": 42, "text": ["not text"]})
    slack.message("still here?")
    await slack.wait_for(lambda: len(slack.texts()) == 2)
    assert slack.texts() == ["echo: odd", "echo: still here?"]
    await slack.wait_for(lambda: not slack.pending)  # every envelope acknowledged


async def test_a_redelivered_envelope_is_dropped(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    runtime = await start()
    first = slack.message("first")
    await slack.wait_for(lambda: len(slack.texts()) == 1)
    again = slack.replay(first)  # Slack's retry: a new envelope, the same event
    await slack.wait_for(lambda: again["envelope_id"] in slack.acks)
    slack.message("second")
    await slack.wait_for(lambda: len(slack.texts()) == 2)
    assert slack.texts() == ["echo: first", "echo: second"]
    assert len(turns(home)) == 2
    assert len(await runtime.sessions.list_sessions()) == 1


async def test_one_connection_serves_two_workspaces_as_two_conversations(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    runtime = await start()
    slack.message("from the first")
    slack.message("from the second", team="T0002")
    await slack.wait_for(lambda: len(slack.texts()) == 2)
    assert sorted(slack.texts()) == ["echo: from the first", "echo: from the second"]
    conversations = {r["conversation"] for r in rows(home, "SELECT * FROM channel_bindings")}
    assert conversations == {f"sl:{TEAM}-{DM}", f"sl:T0002-{DM}"}
    assert len(await runtime.sessions.list_sessions()) == 2
    assert slack.connections == 1


async def test_a_stranger_is_refused_and_can_pair(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    slack.message("let me in", channel="D0099", user="U0099")
    await slack.wait_for(lambda: len(slack.texts("D0099")) == 1)
    code = re.search(r"habakkuk pair ([A-Z0-9]{8})", slack.texts("D0099")[0])
    assert code is not None, slack.texts("D0099")
    assert turns(home) == []
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 0
    await slack.wait_for(lambda: len(slack.texts("D0099")) == 2)
    assert "You're in" in slack.texts("D0099")[1]
    slack.message("hello again", channel="D0099", user="U0099")
    await slack.wait_for(lambda: len(slack.texts("D0099")) == 3)
    assert slack.texts("D0099")[2] == "echo: hello again"


async def test_a_channel_message_needs_a_mention_and_the_reply_names_its_sender(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    chatter = slack.message("just chatting", channel=CHANNEL, channel_type="channel")
    slack.event({"type": "message", "subtype": "message_changed", "channel": CHANNEL})
    slack.event(
        {"type": "message", "channel": DM, "bot_id": "BBOT", "user": BOT_USER, "text": "mine"}
    )
    asked = slack.message(f"<@{BOT_USER}> what time is it", channel=CHANNEL, channel_type="channel")
    # Slack sends the same message again as an app_mention: one answer, not two.
    mention = dict(asked["payload"]["event"], type="app_mention")
    slack.event(mention)
    await slack.wait_for(lambda: len(slack.texts(CHANNEL)) == 1)
    await slack.wait_for(lambda: not slack.pending)
    assert slack.texts(CHANNEL) == [f"<@{PERSON}> echo: what time is it"]
    assert turns(home) == [f"turn:sl:{TEAM}-{CHANNEL}:{ts_of(asked)}"]
    assert ts_of(chatter) not in "".join(turns(home))
    assert slack.texts() == []  # nothing answered the bot's own message


async def test_a_thread_is_its_own_conversation_and_replies_stay_in_it(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    runtime = await start()
    top = slack.message(f"<@{BOT_USER}> start", channel=CHANNEL, channel_type="channel")
    await slack.wait_for(lambda: len(slack.texts(CHANNEL)) == 1)
    thread = ts_of(top)
    slack.message(
        f"<@{BOT_USER}> in the thread", channel=CHANNEL, channel_type="channel", thread_ts=thread
    )
    await slack.wait_for(lambda: len(slack.texts(CHANNEL)) == 2)
    reply = slack.posted[-1]
    assert reply.thread_ts == thread and reply.text.endswith("echo: in the thread")
    # In a thread the bot started, no mention is needed.
    ours = slack.posted[0].ts
    slack.message(
        "no mention here",
        channel=CHANNEL,
        channel_type="channel",
        thread_ts=ours,
        parent_user_id=BOT_USER,
    )
    await slack.wait_for(lambda: len(slack.texts(CHANNEL)) == 3)
    assert slack.posted[-1].thread_ts == ours
    conversations = {r["conversation"] for r in rows(home, "SELECT * FROM channel_bindings")}
    assert conversations == {
        f"sl:{TEAM}-{CHANNEL}",
        f"sl:{TEAM}-{CHANNEL}:{thread}",
        f"sl:{TEAM}-{CHANNEL}:{ours}",
    }
    assert len(await runtime.sessions.list_sessions()) == 3


APPROVAL_SCRIPT = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""


async def _tool_result(runtime: Runtime) -> str:
    [session] = await runtime.sessions.list_sessions()
    for stored in await runtime.sessions.messages(session.id):
        for result in stored.message.tool_results:
            return result.text
    raise AssertionError("no tool result")


async def test_an_approval_answered_by_button(start: OpenRuntime, slack: FakeSlack) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    slack.message("run the thing")
    await slack.wait_for(lambda: bool(slack.with_buttons()))
    [prompt] = slack.with_buttons()
    assert "exec" in prompt.text and "echo approved-run" in prompt.text
    labels = [label for label, _ in slack.buttons(prompt)]
    assert labels == ["✅ Approve", "❌ Deny", "Allow for this session"]
    approve = slack.buttons(prompt)[0][1]
    assert approve.startswith("fy|") and approve.endswith("|0")
    slack.press(approve, message_ts=prompt.ts)
    await slack.wait_for(lambda: "all done" in slack.texts())
    assert "approved-run" in await _tool_result(runtime)
    await slack.wait_for(lambda: slack.ephemeral == ["Approved"])
    await slack.wait_for(lambda: not slack.with_buttons())  # the buttons were stripped
    assert slack.message_at(DM, prompt.ts) is not None  # the text stays
    slack.press(approve, message_ts=prompt.ts)
    await slack.wait_for(lambda: len(slack.ephemeral) == 2)
    assert "expired" in slack.ephemeral[1]


async def test_an_approval_answered_by_a_typed_yes(start: OpenRuntime, slack: FakeSlack) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    slack.message("run the thing")
    await slack.wait_for(lambda: bool(slack.with_buttons()))
    slack.message("yes")
    await slack.wait_for(lambda: "all done" in slack.texts())
    assert "approved-run" in await _tool_result(runtime)
    assert slack.texts().count("all done") == 1


async def test_files_and_a_voice_note_reach_the_model(
    start: OpenRuntime, slack: FakeSlack, home: Home
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
        slack.message("look", files=[slack.share("chart.png", PHOTO, "image/png")])
        await slack.wait_for(lambda: len(slack.texts()) == 1)
        clip = slack.share("audio_message.webm", b"\x1aE\xdf\xa3 webm", "audio/webm")
        slack.message("", files=[dict(clip, subtype="slack_audio")])
        await slack.wait_for(lambda: len(slack.texts()) == 2)
    finally:
        await runner.cleanup()
    names = sorted(p.name for p in (home.default_workspace("main") / "inbox").iterdir())
    assert len(names) == 2 and any(n.endswith("chart.png") for n in names)
    [session] = await runtime.sessions.list_sessions()
    first = (await runtime.sessions.messages(session.id))[0].message
    image = first.blocks[1]
    assert isinstance(image, ImageBlock) and Path(image.blob).read_bytes() == PHOTO
    assert transcribed == ["whisper-1"]
    assert "buy oat milk" in slack.texts()[1]


async def test_a_slow_chat_does_not_hold_up_another(start: OpenRuntime, slack: FakeSlack) -> None:
    await start()
    slack.hold_downloads()
    slack.message("big file", files=[slack.share("big.bin", b"0" * 64, "application/zip")])
    slack.message("then this", channel="D0042")
    slack.message(f"<@{BOT_USER}> meanwhile", channel=CHANNEL, channel_type="channel")
    await slack.wait_for(lambda: len(slack.texts(CHANNEL)) == 1)
    assert slack.texts() == []  # the DM waits for its download, in order
    slack.release_downloads()
    await slack.wait_for(lambda: len(slack.texts()) == 2)
    assert slack.texts()[0].startswith("echo: big file") and slack.texts()[1] == "echo: then this"


DRIVER_SCRIPT = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt"}
- "sent"
"""


async def test_the_platform_driver_plays_the_person(
    start: OpenRuntime, slack_driver: SlackDriver, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    await start(DRIVER_SCRIPT, mode="workspace")
    await slack_driver.say("run the thing")
    await slack_driver.fake.wait_for(lambda: bool(slack_driver.fake.with_buttons()))
    await slack_driver.press("✅ Approve")
    await slack_driver.fake.wait_for(lambda: "sent" in slack_driver.texts())
    assert slack_driver.files() == [("report.txt", b"numbers\n")]
    assert slack_driver.texts()[0].startswith("Approval needed: exec")


async def test_the_platform_driver_sends_a_file(
    start: OpenRuntime, slack_driver: SlackDriver, home: Home
) -> None:
    await start()
    await slack_driver.send_file("notes.txt", b"plain notes", "text/plain", caption="read")
    await slack_driver.fake.wait_for(lambda: len(slack_driver.texts()) == 1)
    assert slack_driver.texts()[0].startswith("echo: read")
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.name.endswith("notes.txt") and saved.read_bytes() == b"plain notes"


async def test_a_file_slack_will_not_hand_over_is_noted(
    start: OpenRuntime, slack: FakeSlack
) -> None:
    await start()
    shared = slack.share("x.pdf", b"%PDF-1.4", "application/pdf")
    shared["url_private_download"] = "https://evil.example/steal"  # never given the token
    slack.message("see file", files=[shared])
    await slack.wait_for(lambda: len(slack.texts()) == 1)
    assert "x.pdf could not be downloaded: x.pdf: not a Slack file URL" in slack.texts()[0]


SEND_FILE_SCRIPT = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the **report**"}
- "sent"
"""


async def test_the_send_file_tool_uploads_into_the_thread(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    await start(SEND_FILE_SCRIPT)
    top = slack.message(
        f"<@{BOT_USER}> the report please",
        channel=CHANNEL,
        channel_type="channel",
        thread_ts="1700000000.000001",
    )
    await slack.wait_for(lambda: any(t.endswith("sent") for t in slack.texts(CHANNEL)))
    [shared] = slack.shared
    assert (shared.name, shared.data) == ("report.txt", b"numbers\n")
    assert shared.channel == CHANNEL and shared.thread_ts == "1700000000.000001"
    assert shared.comment == "the *report*"
    assert ts_of(top)


async def test_reactions_show_the_work_and_no_typing_is_sent(
    start: OpenRuntime, slack: FakeSlack
) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", channel="reactions: true\n")
    asked = slack.message("react to me")
    await slack.wait_for(lambda: bool(slack.reactions) and bool(slack.with_buttons()))
    assert slack.reactions[0] == ("add", DM, ts_of(asked), "eyes")
    slack.message("yes")
    await slack.wait_for(lambda: "all done" in slack.texts())
    await slack.wait_for(lambda: len(slack.reactions) == 3)
    assert slack.reactions[1:] == [
        ("remove", DM, ts_of(asked), "eyes"),
        ("add", DM, ts_of(asked), "+1"),
    ]
    assert not [c for c in slack.calls if "typing" in c.method]


async def test_a_progress_draft_is_edited_then_removed(
    start: OpenRuntime, slack: FakeSlack
) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", draft_after=0.0, edit_every=0.05)
    slack.message("run the thing")
    await slack.wait_for(lambda: any("exec" in c.params["text"] for c in slack.of("chat.update")))
    assert slack.of("chat.postMessage")[0].params["text"].startswith("⏳")
    slack.message("yes")
    await slack.wait_for(lambda: "all done" in slack.texts())
    await slack.wait_for(lambda: len(slack.of("chat.delete")) == 1)
    assert not any(t.startswith("⏳") for t in slack.texts())


async def test_a_slash_command_runs_the_chat_command(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    slack.command("/habakkuk", "whoami")
    await slack.wait_for(lambda: len(slack.texts()) == 1)
    assert PERSON in slack.texts()[0] and "main" in slack.texts()[0]
    assert turns(home) == []


async def test_a_closed_channel_stops_the_delivery(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    slack.block(DM, "is_archived")
    envelope = slack.message("are you there?")
    turn = f"turn:sl:{TEAM}-{DM}:{ts_of(envelope)}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the delivery to give up")
    delivery = job(home, f"reply:{turn}")
    assert delivery is not None and delivery["status"] == "failed"
    assert delivery["attempts"] == 1 and "is_archived" in delivery["error"]


async def test_the_adapter_reconnects_after_a_drop_and_a_rotation(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    slack.message("before")
    await slack.wait_for(lambda: len(slack.texts()) == 1)
    await slack.drop()
    await slack.wait_for(lambda: slack.connections == 2 and len(slack._sockets) == 1)
    slack.message("after the drop")
    await slack.wait_for(lambda: len(slack.texts()) == 2)
    await slack.disconnect("refresh_requested")
    await slack.wait_for(lambda: slack.connections == 3 and len(slack._sockets) == 1)
    slack.message("after the rotation")
    await slack.wait_for(lambda: len(slack.texts()) == 3)
    assert slack.texts() == ["echo: before", "echo: after the drop", "echo: after the rotation"]
    [status] = rows(home, "SELECT * FROM channel_status WHERE account = 'sl'")
    assert status["state"] == "connected"


async def test_an_envelope_left_unacknowledged_comes_again_after_the_server_returns(
    start: OpenRuntime, slack: FakeSlack, home: Home
) -> None:
    await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'connected'")),
        what="connected",
    )
    await slack.stop()
    await eventually(
        lambda: rows(home, "SELECT state FROM channel_status")[0]["state"] != "connected",
        what="the drop to be noticed",
    )
    slack.message("sent while we were away")  # pending until a socket takes it
    await slack.start()
    await slack.wait_for(lambda: len(slack.texts()) == 1, timeout=30)
    assert slack.texts() == ["echo: sent while we were away"]


async def test_a_refused_app_token_is_fatal_in_habakkuk_channels(
    start: OpenRuntime,
    home: Home,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-WRONG")
    await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the supervisor to give the adapter up for now",
    )
    [status] = rows(home, "SELECT * FROM channel_status")
    assert "apps.connections.open: invalid_auth (check the Slack tokens)" in status["detail"]
    assert "WRONG" not in status["detail"]
    assert await asyncio.to_thread(cli.main, ["channels"]) == 1  # 1: a channel is unhealthy
    out = capsys.readouterr().out
    assert re.search(r"^sl\s+slack\s+fatal", out, re.MULTILINE), out
    assert "WRONG" not in out


def _draft(slack: FakeSlack) -> ChannelConfig:
    config = ChannelConfig(
        type="slack",
        app_token_env="SLACK_APP_TOKEN",
        bot_token_env="SLACK_BOT_TOKEN",
        base_url=slack.base_url,
    )
    config.name = "sl"
    return config


async def test_the_setup_check_names_the_bot_and_refuses_bad_tokens(slack: FakeSlack) -> None:
    check = platform_module("slack").SETUP.check
    good = {"SLACK_APP_TOKEN": slack.app_token, "SLACK_BOT_TOKEN": slack.bot_token}
    assert await check(_draft(slack), good) == "@habakkuk in Fake Team"
    wrong_bot = good | {"SLACK_BOT_TOKEN": "xoxb-nope"}
    with pytest.raises(SetupCheckFailed, match=r"Slack refused the bot token: auth\.test: inv"):
        await check(_draft(slack), wrong_bot)
    swapped = good | {"SLACK_APP_TOKEN": slack.bot_token}
    with pytest.raises(SetupCheckFailed, match="app-level token starts with xapp-"):
        await check(_draft(slack), swapped)
    wrong_app = good | {"SLACK_APP_TOKEN": "xapp-nope"}
    with pytest.raises(SetupCheckFailed, match=r"refused the app-level token: apps\.conn"):
        await check(_draft(slack), wrong_app)
