"""End to end through the fake Discord: gateway, deliveries, supervisor, approvals, files."""

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
from habakkuk.channels.discord import check_setup
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ImageBlock
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_discord import (
    BOT,
    BOT_TOKEN,
    DM_CHANNEL,
    GUILD,
    GUILD_CHANNEL,
    USER_ID,
    DiscordDriver,
    FakeDiscord,
)
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually

PHOTO = png(4, 3)
OpenRuntime = Callable[..., Awaitable[Runtime]]
THREAD = "400000000000000777"


def channel_yaml(dc: FakeDiscord, extra: str = "") -> str:
    return textwrap.dedent(
        f"""
        channels:
          dc:
            type: discord
            token_env: DISCORD_TOKEN
            base_url: {dc.base_url}
            allow_from: ["{USER_ID}", "@carol"]
            silent_limit: 40s
        """
    ) + textwrap.indent(textwrap.dedent(extra), "    ")


@pytest.fixture
def start(runtime_factory: Any, dc: FakeDiscord) -> OpenRuntime:
    """Open a runtime with the dc channel and a script, and start its workers."""

    async def _start(
        script: str = "- 'echo: {input}'",
        *,
        mode: str = "full",
        extra: str = "",
        channel: str = "",
        **gateway: float,
    ) -> Runtime:
        config = mock_config(script, mode=mode, extra=channel_yaml(dc, channel) + extra)
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        channels = runtime.channels
        assert channels is not None
        for key, value in gateway.items():
            setattr(channels.gateway, key, value)
        await channels.started()
        return runtime

    return _start


def finished(home: Home, job_id: str) -> bool:
    found = rows(home, "SELECT status FROM jobs WHERE id = ?", (job_id,))
    return bool(found) and found[0]["status"] in ("done", "failed", "cancelled")


def turns(home: Home) -> list[str]:
    return [r["id"] for r in rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")]


async def test_a_message_is_answered_once_quoting_it_and_pinging_nobody(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    await start()
    sent = dc.message("hello @everyone")
    await dc.wait_for(lambda: len(dc.texts()) == 1)
    turn = f"turn:dc:{DM_CHANNEL}:{sent['id']}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the reply delivery")
    assert dc.texts() == ["echo: hello @everyone"]
    [post] = dc.posts()
    assert post.body["allowed_mentions"] == {"parse": []}
    assert post.body["message_reference"]["message_id"] == sent["id"]
    assert post.body["enforce_nonce"] is True and 0 < len(post.body["nonce"]) <= 25


async def test_the_same_message_delivered_again_is_dropped(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    runtime = await start()
    first = dc.message("first")
    await dc.wait_for(lambda: len(dc.texts()) == 1)
    dc.replay(first)
    second = dc.message("second")
    await dc.wait_for(lambda: len(dc.texts()) == 2)
    await eventually(
        lambda: finished(home, f"reply:turn:dc:{DM_CHANNEL}:{second['id']}"), what="the reply"
    )
    assert dc.texts() == ["echo: first", "echo: second"]
    assert len(turns(home)) == 2
    assert len(await runtime.sessions.list_sessions()) == 1


async def test_a_stranger_is_refused_and_can_pair(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    await start()
    stranger = "200000000000000099"
    dc.message("let me in", channel=stranger, user="100000000000000099", username="mallory")
    await dc.wait_for(lambda: len(dc.texts(stranger)) == 1)
    code = re.search(r"habakkuk pair ([A-Z0-9]{8})", dc.texts(stranger)[0])
    assert code is not None
    assert turns(home) == []
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 0
    await dc.wait_for(lambda: len(dc.texts(stranger)) == 2)
    assert "You're in" in dc.texts(stranger)[1]
    dc.message("hello again", channel=stranger, user="100000000000000099", username="mallory")
    await dc.wait_for(lambda: len(dc.texts(stranger)) == 3)
    assert dc.texts(stranger)[2] == "echo: hello again"


async def test_allow_from_matches_a_username(start: OpenRuntime, dc: FakeDiscord) -> None:
    await start()
    carol = "200000000000000007"
    dc.message("hi from carol", channel=carol, user="100000000000000007", username="carol")
    await dc.wait_for(lambda: len(dc.texts(carol)) == 1)
    assert dc.texts(carol) == ["echo: hi from carol"]


async def test_a_server_message_needs_a_mention_or_a_reply_to_the_bot(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    await start()
    dc.message("just chatting", channel=GUILD_CHANNEL, guild=GUILD)
    dc.message("what time is it", channel=GUILD_CHANNEL, guild=GUILD, mention=True)
    await dc.wait_for(lambda: len(dc.texts(GUILD_CHANNEL)) == 1)
    assert dc.texts(GUILD_CHANNEL) == ["echo: what time is it"]  # the mention is taken out
    answer = dc.message_with("echo: what time is it", GUILD_CHANNEL)
    dc.message("and tomorrow?", channel=GUILD_CHANNEL, guild=GUILD, reply_to=answer["id"])
    await dc.wait_for(lambda: len(dc.texts(GUILD_CHANNEL)) == 2)
    assert dc.texts(GUILD_CHANNEL)[1] == "echo: and tomorrow?"
    dc.message("a bot says hi", channel=GUILD_CHANNEL, guild=GUILD, mention=True, bot=True)
    dc.message("ping", channel=GUILD_CHANNEL, guild=GUILD, mention=True)
    await dc.wait_for(lambda: len(dc.texts(GUILD_CHANNEL)) == 3)
    assert dc.texts(GUILD_CHANNEL)[2] == "echo: ping"  # other bots are never answered
    assert len(turns(home)) == 3


async def test_a_thread_is_its_own_conversation(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    runtime = await start()
    dc.message("in the channel", channel=GUILD_CHANNEL, guild=GUILD, mention=True)
    await dc.wait_for(lambda: len(dc.texts(GUILD_CHANNEL)) == 1)
    dc.message("in the thread", channel=THREAD, guild=GUILD, mention=True)
    await dc.wait_for(lambda: len(dc.texts(THREAD)) == 1)
    assert dc.texts(THREAD) == ["echo: in the thread"]
    assert dc.texts(GUILD_CHANNEL) == ["echo: in the channel"]
    assert len(await runtime.sessions.list_sessions()) == 2
    conversations = {r["conversation"] for r in rows(home, "SELECT * FROM channel_bindings")}
    assert conversations == {f"dc:{GUILD_CHANNEL}", f"dc:{THREAD}"}


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


def _prompt(dc: FakeDiscord) -> Any:
    return next(c for c in dc.posts() if c.body.get("components"))


async def test_an_approval_answered_by_button(start: OpenRuntime, dc: FakeDiscord) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    dc.message("run the thing")
    await dc.wait_for(lambda: any(c.body.get("components") for c in dc.posts()))
    prompt = _prompt(dc)
    assert "echo approved-run" in prompt.body["content"]
    assert prompt.body["allowed_mentions"] == {"parse": []}
    [row, second_row] = prompt.body["components"]
    approve = row["components"][0]
    assert (row["type"], approve["type"], approve["style"]) == (1, 2, 3)
    assert approve["label"] == "✅ Approve" and re.fullmatch(r"fy\|\w+\|0", approve["custom_id"])
    assert second_row["components"][0]["label"] == "Allow for this session"
    prompt_id = dc.message_with("echo approved-run")["id"]
    dc.press(approve["custom_id"], message_id=prompt_id)
    await dc.wait_for(lambda: "all done" in dc.texts())
    assert "approved-run" in await _tool_result(runtime)
    [ack] = dc.of("interaction_callback")
    assert ack.body["type"] == 4  # an ephemeral notice only the presser sees
    assert ack.body["data"] == {
        "content": "Approved",
        "flags": 64,
        "allowed_mentions": {"parse": []},
    }
    assert "Authorization" not in ack.path
    await dc.wait_for(lambda: not dc.message_with("echo approved-run").get("components"))
    assert any(c.body == {"components": []} for c in dc.of("edit_message"))


async def test_an_approval_answered_by_a_typed_yes(start: OpenRuntime, dc: FakeDiscord) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    dc.message("run the thing")
    await dc.wait_for(lambda: any(c.body.get("components") for c in dc.posts()))
    dc.message("yes")
    await dc.wait_for(lambda: "all done" in dc.texts())
    assert "approved-run" in await _tool_result(runtime)
    assert dc.texts().count("all done") == 1


async def test_typing_and_reactions_while_a_turn_runs(start: OpenRuntime, dc: FakeDiscord) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", channel="reactions: true\n")
    sent = dc.message("react to me")
    await dc.wait_for(lambda: bool(dc.of("typing")) and bool(dc.of("react")))
    assert dc.of("typing")[0].channel == DM_CHANNEL
    [eyes] = dc.of("react")
    assert eyes.path == f"/channels/{DM_CHANNEL}/messages/{sent['id']}/reactions/👀/@me"
    await dc.wait_for(lambda: any(c.body.get("components") for c in dc.posts()))
    dc.message("yes")
    await dc.wait_for(lambda: "all done" in dc.texts())
    await dc.wait_for(lambda: len(dc.of("react")) == 2 and len(dc.of("unreact")) == 1)
    assert dc.of("unreact")[0].path.endswith("/👀/@me")  # 👀 replaced by 👍
    assert dc.of("react")[1].path.endswith("/👍/@me")


async def test_a_progress_draft_is_edited_then_deleted(start: OpenRuntime, dc: FakeDiscord) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", draft_after=0.0, edit_every=0.05)
    dc.message("run the thing")
    await dc.wait_for(lambda: any(c.body.get("flags") == 4096 for c in dc.posts()))
    draft = next(c for c in dc.posts() if c.body.get("flags") == 4096)  # no notification
    assert "Working" in draft.body["content"]
    await dc.wait_for(
        lambda: any("exec" in str(c.body.get("content")) for c in dc.of("edit_message"))
    )
    await dc.wait_for(lambda: any(c.body.get("components") for c in dc.posts()))
    dc.message("yes")
    await dc.wait_for(lambda: "all done" in dc.texts())
    await dc.wait_for(lambda: len(dc.of("delete_message")) == 1)


SEND_FILE_SCRIPT = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
    - name: poll
      arguments: {question: "Lunch?", options: ["pizza", "salad"]}
- "sent"
"""


async def test_send_file_and_poll_tools(start: OpenRuntime, dc: FakeDiscord, home: Home) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    await start(SEND_FILE_SCRIPT)
    dc.message("send me the report")
    await dc.wait_for(lambda: "sent" in dc.texts())
    assert dc.files() == [("report.txt", b"numbers\n")]
    [upload] = [c for c in dc.posts() if c.files]
    assert upload.body["content"] == "the report"
    assert upload.body["attachments"] == [{"id": 0, "filename": "report.txt"}]
    assert upload.body["allowed_mentions"] == {"parse": []}
    [poll] = [c.body["poll"] for c in dc.posts() if "poll" in c.body]
    assert poll["question"] == {"text": "Lunch?"}
    assert [a["poll_media"]["text"] for a in poll["answers"]] == ["pizza", "salad"]


async def test_habakkuk_send_to_a_user_id_lands_in_their_dm(
    start: OpenRuntime, dc: FakeDiscord, home: Home, tmp_path: Path
) -> None:
    await start()
    bob = "100000000000000077"
    dc.add_user(bob, "bob")
    assert await asyncio.to_thread(cli.main, ["send", "--to", f"dc:{bob}", "hello", "bob"]) == 0
    await dc.wait_for(lambda: bool(dc.of("open_dm")))
    [opened] = dc.of("open_dm")
    assert opened.body == {"recipient_id": bob}
    bob_dm = dc.dms[bob]
    await dc.wait_for(lambda: dc.texts(bob_dm) == ["hello bob"])
    assert [c.status for c in dc.of("create_message", answered=None)] == [404, 200]
    # the DM channel is remembered: a file to the same address goes straight there
    attachment = tmp_path / "a.txt"
    attachment.write_bytes(b"numbers\n")
    code = await asyncio.to_thread(
        cli.main, ["send", "--to", f"dc:{bob}", "--file", str(attachment), "see", "this"]
    )
    assert code == 0
    await dc.wait_for(lambda: dc.files(bob_dm) == [("a.txt", b"numbers\n")])
    assert len(dc.of("open_dm")) == 1
    assert [c.channel for c in dc.of("create_message", answered=None)][2:] == [bob_dm]
    assert turns(home) == []


@pytest.mark.parametrize(
    ("who", "says", "code"),
    [
        ("100000000000000099", "100000000000000099 is neither a channel nor a user", "10013"),
        ("100000000000000088", "user 100000000000000088 takes no direct messages", "50007"),
    ],
)
async def test_habakkuk_send_to_an_unknown_user_fails_for_good(
    start: OpenRuntime, dc: FakeDiscord, home: Home, who: str, says: str, code: str
) -> None:
    await start()
    dc.add_user("100000000000000088", "dora", dms=False)
    assert await asyncio.to_thread(cli.main, ["send", "--to", f"dc:{who}", "anyone?"]) == 0
    failed_sql = "SELECT * FROM jobs WHERE kind = 'delivery:dc' AND status = 'failed'"
    await eventually(lambda: rows(home, failed_sql), what="the delivery to fail for good")
    [failed] = rows(home, failed_sql)
    assert failed["attempts"] == 1  # undeliverable: never retried
    assert failed["error"].startswith(f"undeliverable: Discord: {says}")
    assert failed["error"].endswith(f"(code {code}))") and "\n" not in failed["error"]
    assert [c.status for c in dc.of("create_message", answered=None)] == [404]
    assert len(dc.of("open_dm", answered=None)) == 1


async def test_a_file_and_a_voice_message_reach_the_model(
    start: OpenRuntime, dc: FakeDiscord, home: Home
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
        photo = dc.add_attachment("photo.png", PHOTO, "image/png")
        dc.message("look", attachments=[photo])
        await dc.wait_for(lambda: len(dc.texts()) == 1)
        voice = dc.add_attachment("voice-message.ogg", b"OggS fake voice", "audio/ogg")
        dc.message("", attachments=[voice], flags=8192)
        await dc.wait_for(lambda: len(dc.texts()) == 2)
    finally:
        await runner.cleanup()
    names = sorted(p.name for p in (home.default_workspace("main") / "inbox").iterdir())
    assert any(n.endswith("photo.png") for n in names)
    [session] = await runtime.sessions.list_sessions()
    first_user = (await runtime.sessions.messages(session.id))[0].message
    image = first_user.blocks[1]
    assert isinstance(image, ImageBlock) and Path(image.blob).read_bytes() == PHOTO
    assert transcribed == ["whisper-1"]
    assert "buy oat milk" in dc.texts()[1]


async def test_a_long_reply_is_chunked_under_2000_with_code_blocks_intact(
    start: OpenRuntime, dc: FakeDiscord
) -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(300))
    reply = "Here it is:\n\n```python\n" + code + "\n```\n\n" + "done " * 100
    await start("- " + __import__("json").dumps(reply))
    dc.message("the code please")
    await dc.wait_for(lambda: any("done" in t for t in dc.texts()))
    texts = dc.texts()
    assert len(texts) >= 3 and all(len(t) <= 2000 for t in texts)
    for text in texts:
        assert text.count("```") % 2 == 0  # every chunk opens and closes its fences
    lines = [ln for t in texts for ln in t.splitlines() if ln.startswith("line_")]
    assert lines == code.splitlines()


async def test_the_adapter_resumes_after_the_fake_drops_the_socket(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    await start()
    dc.message("before")
    await dc.wait_for(lambda: len(dc.texts()) == 1)
    await dc.drop(code=None)
    dc.message("while dropped")
    await dc.wait_for(lambda: len(dc.texts()) == 2)
    assert dc.texts() == ["echo: before", "echo: while dropped"]
    assert len(dc.identifies) == 1 and len(dc.resumes) == 1


async def test_the_supervisor_restarts_the_adapter_after_the_server_went_away(
    start: OpenRuntime, dc: FakeDiscord, home: Home
) -> None:
    await start()
    dc.message("before")
    await dc.wait_for(lambda: len(dc.texts()) == 1)
    await dc.stop()
    await eventually(
        lambda: rows(home, "SELECT state FROM channel_status")[0]["state"] != "connected",
        what="the drop noticed",
    )
    dc.message("while down")  # kept in the session: the resume replays it
    await dc.start()
    await dc.wait_for(lambda: len(dc.texts()) == 2, timeout=30)
    assert dc.texts()[1] == "echo: while down"
    assert len(dc.identifies) == 1
    [status] = rows(home, "SELECT * FROM channel_status WHERE account = 'dc'")
    assert status["restarts"] >= 1


async def test_a_rejected_token_is_reported_fatal_in_habakkuk_channels(
    start: OpenRuntime,
    dc: FakeDiscord,
    home: Home,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "not-the-token")
    await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the adapter given up",
    )
    assert await asyncio.to_thread(cli.main, ["channels"]) == 1  # a fatal channel fails it
    out = capsys.readouterr().out
    assert re.search(r"^dc\s+discord\s+fatal", out, re.MULTILINE), out
    assert "check the bot token" in out and "not-the-token" not in out


async def test_commands_answer_in_the_chat(start: OpenRuntime, dc: FakeDiscord, home: Home) -> None:
    await start()
    dc.message("/whoami")
    await dc.wait_for(lambda: len(dc.texts()) == 1)
    assert USER_ID in dc.texts()[0] and "main" in dc.texts()[0]
    dc.message("/new")
    await dc.wait_for(lambda: len(dc.texts()) == 2)
    assert "New session" in dc.texts()[1]
    assert turns(home) == []


# -- setup ---------------------------------------------------------------------------


def _config(dc: FakeDiscord) -> ChannelConfig:
    return ChannelConfig(type="discord", token_env="DISCORD_BOT_TOKEN", base_url=dc.base_url)


async def test_the_setup_check_names_the_bot(dc: FakeDiscord) -> None:
    name = await check_setup(_config(dc), {"DISCORD_BOT_TOKEN": BOT_TOKEN})
    assert name == f"@{BOT['username']}"


async def test_the_setup_check_refuses_a_bad_token_in_one_line(dc: FakeDiscord) -> None:
    with pytest.raises(SetupCheckFailed, match=r"^Discord refused the token: 401: Unauthorized$"):
        await check_setup(_config(dc), {"DISCORD_BOT_TOKEN": "wrong"})
    await dc.stop()
    with pytest.raises(SetupCheckFailed, match=r"^cannot reach http://127\.0\.0\.1"):
        await check_setup(_config(dc), {"DISCORD_BOT_TOKEN": BOT_TOKEN})


async def test_the_platform_driver_plays_the_person(
    start: OpenRuntime, discord_driver: DiscordDriver, home: Home
) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    assert "type: discord" in discord_driver.channel_yaml("dc")
    assert discord_driver.env() == {"DISCORD_TOKEN": BOT_TOKEN}
    await discord_driver.say("run the thing")
    await discord_driver.fake.wait_for(lambda: any("Approval" in t for t in discord_driver.texts()))
    await discord_driver.press("✅ Approve")
    await discord_driver.fake.wait_for(lambda: "all done" in discord_driver.texts())
    assert "approved-run" in await _tool_result(runtime)
    await discord_driver.send_file("notes.txt", b"remember the milk", "text/plain", "my notes")
    inbox = home.default_workspace("main") / "inbox"
    await eventually(lambda: inbox.is_dir() and any(inbox.iterdir()), what="the file saved")
    assert [p.read_bytes() for p in inbox.iterdir()] == [b"remember the milk"]
    assert discord_driver.files() == []
