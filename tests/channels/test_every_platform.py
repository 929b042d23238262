"""One conversation, many surfaces: the same table of conversations held on every chat
platform, each through its fake's driver (tests/channels/platform_driver.py).

A person says hello and gets one reply; `/new` starts a session that has no memory of
the last; `/stop` cancels a turn waiting on an approval, with nothing said after the
stop notice; an approval is answered yes and no (by button where the platform has
buttons, else by typing); a file from the person reaches the model, and the send_file
tool brings a file to the person; a reply is also read aloud as a voice note
(voice_replies: always), and the speak tool sends one. Every row runs on every driver
in DRIVERS: a platform joins the table with its `<kind>_driver` fixture
(tests/channels/conftest.py) and one line here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.platform_driver import PlatformDriver, ServedDriver, WebhookDriver
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

# Each platform's driver fixture; the lead appends one line per platform.
DRIVERS = [
    "telegram_driver",
    "slack_driver",
    "signal_driver",
    "matrix_driver",
    "discord_driver",
    "wa_driver",
    "email_driver",
    "irc_driver",
    "twitch_driver",
    "ntfy_driver",
    "sms_driver",
    "feishu_driver",
    "dingtalk_driver",
    "wecom_driver",
    "whatsappcloud_driver",
    "messenger_driver",
    "instagram_driver",
    "whatsappagent_driver",
    "line_driver",
    "bluebubbles_driver",
    "teams_driver",
    "googlechat_driver",
    "zulip_driver",
    "nextcloud_driver",
    "rocketchat_driver",
    "mattermost_driver",
    "web_driver",
]
# The platforms that carry no files: a file to the person becomes a notice saying so, a
# reply is text alone, and a person cannot send one (that row is not run there).
# whatsappagent takes files in and sends none; Google Chat lets an app upload no file
# (media.upload needs a user's authorization): it takes files from the person
# (tests/channels/test_googlechat.py) but sends none; a Nextcloud Talk bot can neither
# upload nor fetch files.
FILELESS = {"irc", "twitch", "whatsappagent", "googlechat", "nextcloud"}
FILELESS_DRIVERS = {f"{kind}_driver" for kind in FILELESS}
# The platforms a person sends files on but whose bots send none but images (LINE's
# Messaging API): a file or voice note to the person becomes a notice saying so.
NO_FILES_OUT = FILELESS | {"line"}
# The platforms whose files carry no name (an MMS is its media's type and bytes): a file
# from the person is saved under the platform's media id with its type's suffix, and a
# file to the person arrives as its type and bytes.
# kind: what report.txt arrives as there (Instagram's files come and go by URL)
NAMELESS = {"sms": "text/plain", "instagram": "text/plain"}
# The platforms whose file messages carry no caption (Feishu's and DingTalk's file
# message is the file alone): the person's file comes alone, and the reply names where it was saved.
CAPTIONLESS = {"feishu", "dingtalk"}
# The platforms that bring the bot files but take none from the person but pictures, voice
# and video (a WeCom member's message to an app): the file-from-the-person row is not run.
FILES_OUT_ONLY = {"wecom_driver"}

ECHO = "- 'echo: {input}'"
APPROVAL = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""
SEND_FILE = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
- "sent"
"""
SPEAK = """
- text: "Saying it."
  tool_calls:
    - name: speak
      arguments: {text: "Good morning. The board is clear."}
- "spoken"
"""
# espeak-ng speaks on this machine (offline); ffmpeg makes its WAV a voice note.
TTS = "tts:\n  provider: espeak\n"
# The gateway's approval buttons (channels/gateway.py), pressed where the platform has them.
APPROVE, DENY = "✅ Approve", "❌ Deny"


@dataclass
class Chat:
    """The person's chat with the bot on one platform, and the runtime answering it."""

    driver: PlatformDriver
    runtime: Runtime
    home: Home

    async def said(self, text: str) -> None:
        """Wait until the bot said something containing `text`."""
        await eventually(
            lambda: any(text in said for said in self.driver.texts()),
            what=f"{self.driver.kind}: the bot to say {text!r} (said {self.driver.texts()})",
        )

    async def settled(self) -> None:
        """Wait until no turn or delivery is queued or running: all is said that will be."""

        async def idle() -> bool:
            depth = await self.runtime.turns.queue_depth()
            return not any(
                n
                for (kind, status), n in depth.items()
                if status in ("queued", "running")
                and (kind == "turn" or kind.startswith("delivery:"))
            )

        await eventually(idle, what=f"{self.driver.kind}: every turn and delivery to finish")

    async def answer(self, yes: bool) -> None:
        """Answer the approval waiting: a button where there are buttons, else a word."""
        if self.driver.has_buttons:
            await self.driver.press(APPROVE if yes else DENY)
        else:
            await self.driver.say("yes" if yes else "no")

    async def turns(self) -> list[str]:
        """The status of every turn job, oldest first."""
        rows = await self.runtime.queue.db.fetchall(
            "SELECT status FROM jobs WHERE kind = 'turn' ORDER BY created_at"
        )
        return [str(row["status"]) for row in rows]

    async def tool_result(self) -> str:
        """The text of the first tool result in any session."""
        for session in await self.runtime.sessions.list_sessions():
            for stored in await self.runtime.sessions.messages(session.id):
                for result in stored.message.tool_results:
                    return result.text
        raise AssertionError("no tool result")


async def hello(chat: Chat) -> None:
    await chat.driver.say("hello")
    await chat.said("echo: hello")
    await chat.settled()
    assert chat.driver.texts() == ["echo: hello"]


async def new_session(chat: Chat) -> None:
    await chat.driver.say("remember apples")
    await chat.said("echo: remember apples")
    await chat.driver.say("/new")
    await chat.said("New session started")
    await chat.driver.say("what did I say?")
    await chat.said("echo: what did I say?")
    await chat.settled()
    said: dict[str, list[str]] = {}
    for session in await chat.runtime.sessions.list_sessions():
        messages = await chat.runtime.sessions.messages(session.id)
        said[session.id] = [m.message.text for m in messages if m.message.role == "user"]
    # The fresh session holds the new question alone: nothing of the apples.
    assert sorted(said.values()) == [["remember apples"], ["what did I say?"]]


async def stop(chat: Chat) -> None:
    await chat.driver.say("run the thing")
    await chat.said("Approval needed")
    await chat.driver.say("/stop")
    await chat.said("Stopped.")
    await chat.settled()
    texts = chat.driver.texts()
    assert texts[texts.index("Stopped.") :] == ["Stopped."]
    assert not any("all done" in text for text in texts)
    assert await chat.turns() == ["cancelled"]


async def approve(chat: Chat) -> None:
    await chat.driver.say("run the thing")
    await chat.said("Approval needed")
    await chat.answer(yes=True)
    await chat.said("all done")
    assert "approved-run" in await chat.tool_result()
    assert await chat.turns() == ["done"]  # the answer started no turn of its own


async def deny(chat: Chat) -> None:
    await chat.driver.say("run the thing")
    await chat.said("Approval needed")
    await chat.answer(yes=False)
    await chat.said("all done")
    assert (await chat.tool_result()).startswith("denied")
    assert await chat.turns() == ["done"]


async def file_in(chat: Chat) -> None:
    data = b"apples, pears and plums\n"
    await chat.driver.send_file("notes.txt", data, "text/plain", caption="read this")
    await chat.said("echo: " if chat.driver.kind in CAPTIONLESS else "echo: read this")
    [reply] = chat.driver.texts()
    [saved] = (chat.home.default_workspace("main") / "inbox").iterdir()
    assert saved.name in reply  # the model was told where the file is
    assert saved.read_bytes() == data
    if chat.driver.kind in NAMELESS:  # no name came: the media type gave its suffix
        assert "notes.txt" not in reply and saved.suffix == ".txt"
    else:
        assert saved.name.endswith("notes.txt")


def voice_notes(chat: Chat) -> list[bytes]:
    """The Ogg Opus voice notes the bot sent (every platform names them its own way)."""
    return [data for _, data in chat.driver.files() if data[:4] == b"OggS"]


async def voice_reply(chat: Chat) -> None:
    await chat.driver.say("hello")
    await chat.said("echo: hello")
    await chat.settled()
    if chat.driver.kind in NO_FILES_OUT:  # no voice note where no file goes: the text alone
        assert chat.driver.texts() == ["echo: hello"]
        return
    # the text first, once (a mail carrying only the voice note has an empty body)
    assert [text for text in chat.driver.texts() if text] == ["echo: hello"]
    # A file can come after the jobs settle (Teams: the person's consent, then the upload).
    await eventually(lambda: voice_notes(chat), what="the voice note")
    [note] = voice_notes(chat)
    assert b"OpusHead" in note[:200]
    assert len(chat.driver.files()) == 1


async def speak(chat: Chat) -> None:
    await chat.driver.say("say good morning")
    await chat.said("spoken")
    await chat.settled()
    if chat.driver.kind in NO_FILES_OUT:  # the person is told the voice note cannot come
        await chat.said("cannot receive files")
        assert "queued a voice note" in await chat.tool_result()
        return
    await eventually(lambda: voice_notes(chat), what="the voice note")
    [note] = voice_notes(chat)
    [saved] = (chat.home.default_workspace("main") / "voice").iterdir()
    assert saved.suffix == ".ogg" and saved.read_bytes() == note
    assert "queued a voice note" in await chat.tool_result()


async def file_out(chat: Chat) -> None:
    await chat.driver.say("send me the report")
    await chat.said("sent")
    await chat.settled()
    if chat.driver.kind in NO_FILES_OUT:  # the person is told the file cannot come
        await chat.said("Could not send the file report.txt here")
        assert chat.driver.files() == []
        return
    name = NAMELESS.get(chat.driver.kind, "report.txt")
    await eventually(chat.driver.files, what="the file")
    assert chat.driver.files() == [(name, b"numbers\n")]


@dataclass(frozen=True)
class Conversation:
    """One row of the table: the model's script, its mode and what the person does."""

    script: str
    mode: str
    play: Callable[[Chat], Awaitable[None]]
    config: str = ""  # more of config.yaml (tts:)
    channel: str = ""  # more of the channel's entry (voice_replies:)


CONVERSATIONS = {
    "hello": Conversation(ECHO, "full", hello),
    "new": Conversation(ECHO, "full", new_session),
    "stop": Conversation(APPROVAL, "workspace", stop),
    "approve": Conversation(APPROVAL, "workspace", approve),
    "deny": Conversation(APPROVAL, "workspace", deny),
    "file-in": Conversation(ECHO, "full", file_in),
    "file-out": Conversation(SEND_FILE, "full", file_out),
    "voice-reply": Conversation(ECHO, "full", voice_reply, TTS, "voice_replies: always\n"),
    "speak": Conversation(SPEAK, "workspace", speak, TTS),  # espeak: no approval there
}


@pytest.fixture
def driver(request: pytest.FixtureRequest) -> PlatformDriver:
    """The platform driver the row names."""
    found: PlatformDriver = request.getfixturevalue(request.param)
    return found


# Every row on every platform, but a file from the person where no file can be sent.
ROWS = [
    (name, fixture)
    for name in CONVERSATIONS
    for fixture in DRIVERS
    if not (name == "file-in" and (fixture in FILELESS_DRIVERS or fixture in FILES_OUT_ONLY))
]


@pytest.mark.parametrize(("name", "driver"), ROWS, indirect=["driver"])
async def test_the_same_conversation_on_every_platform(
    name: str,
    driver: PlatformDriver,
    runtime_factory: Any,
    home: Home,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conversation = CONVERSATIONS[name]
    for variable, value in driver.env().items():
        monkeypatch.setenv(variable, value)
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_bytes(b"numbers\n")
    account = driver.kind
    entry = driver.channel_yaml(account) + conversation.channel
    channel = f"channels:\n  {account}:\n" + textwrap.indent(entry, "    ")
    extra = channel + conversation.config
    if isinstance(driver, ServedDriver):  # the person talks to our HTTP server (its token)
        extra += driver.config_yaml()
    config = mock_config(conversation.script, mode=conversation.mode, extra=extra)
    runtime: Runtime = await runtime_factory(config)
    runtime.start_workers()
    if isinstance(driver, WebhookDriver):  # the platform calls our HTTP server
        server = await runtime.http.start("127.0.0.1:0")
        driver.called_at(f"{server.url}/channels/{account}")
    elif isinstance(driver, ServedDriver):  # the web chat: the person's page calls it
        server = await runtime.http.start("127.0.0.1:0")
        driver.served_at(server.url)
    assert runtime.channels is not None
    await runtime.channels.started()
    # The person talks to a bot that is up (Matrix answers nothing sent before it
    # first took its position).
    up = await runtime.channels.supervisor.wait_adapter(account, timeout=PROCESS_BOUND)
    assert up is not None, f"the {account} adapter did not connect"
    await conversation.play(Chat(driver, runtime, home))
