"""Rocket.Chat's details on the fake server (tests/channels/fake_rocketchat.py): the DDP
handshake and login with the personal access token (a refused one fatal), pings
answered and beating, a dropped socket ending the run, channels as groups answered on
@-mention, threads as conversations, our own and edited messages never taken, files
both ways, the setup check and the config checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import Address, FatalAdapterError, InboundMessage
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.channels.rocketchat import RocketChatAdapter
from habakkuk.channels.rocketchat_catchup import RocketChatState
from habakkuk.channels.rocketchat_setup import check_setup
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.channels.fake_rocketchat import (
    ALICE,
    ALICE_ID,
    BOT_ID,
    BOT_USER,
    DM_ROOM,
    TOKEN,
    FakeRocketChat,
)
from tests.helpers import eventually


def config_for(fake: FakeRocketChat) -> ChannelConfig:
    config = ChannelConfig(
        type="rocketchat", base_url=fake.base_url, user_id=BOT_ID, token_env="ROCKETCHAT_TOKEN"
    )
    config.name = "rc"
    return config


@pytest.fixture
async def fake() -> AsyncIterator[FakeRocketChat]:
    async with FakeRocketChat(ping=0.2) as server:
        yield server


@pytest.fixture
def state(tmp_path: Path) -> RocketChatState:
    """The adapter's position file (none yet: a first start)."""
    return RocketChatState(tmp_path / "rocketchat-rc.json")


class Running:
    """An adapter running against the fake, collecting what it hands on."""

    def __init__(self, fake: FakeRocketChat, state: RocketChatState, token: str = TOKEN):
        self.adapter = RocketChatAdapter(config_for(fake), token, state)
        self.got: list[InboundMessage] = []
        self.beats = 0
        self.task: asyncio.Task[None] | None = None

    async def take(self, message: InboundMessage) -> None:
        self.got.append(message)

    def beat(self) -> None:
        self.beats += 1

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.adapter.run(self.take, self.beat))
        await eventually(lambda: self.beats > 0, what="the adapter to subscribe")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        if not self.task.done():
            self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        await self.adapter.close()


async def test_login_with_the_token_then_pings_beat_and_a_dropped_socket_ends_the_run(
    fake: FakeRocketChat, state: RocketChatState
) -> None:
    async with Running(fake, state) as run:
        assert fake.logins == [TOKEN] and fake.subscribed == 1
        await eventually(lambda: run.beats > 3, what="pings to beat")
        await fake.drop_sockets()
        assert run.task is not None
        await eventually(lambda: run.task is not None and run.task.done(), what="the run to end")
        assert run.task.exception() is None  # ended: the supervisor reconnects
        run.task = asyncio.create_task(asyncio.sleep(3600))  # for __aexit__


async def test_a_refused_token_is_fatal(fake: FakeRocketChat, state: RocketChatState) -> None:
    adapter = RocketChatAdapter(config_for(fake), "not-the-token", state)
    with pytest.raises(FatalAdapterError, match="User not found"):
        await adapter.run(lambda message: asyncio.sleep(0), lambda: None)
    await adapter.close()


async def test_a_channel_is_a_group_answered_when_mentioned_and_threads_are_their_own(
    fake: FakeRocketChat, state: RocketChatState
) -> None:
    async with Running(fake, state) as run:
        await fake.say("just chatting", rid="GENERAL", room_type="c")
        await fake.say(f"@{BOT_USER} what is due?", rid="GENERAL", room_type="c", mentions=[BOT_ID])
        await fake.say("in the thread", rid="GENERAL", room_type="c", tmid="t1", mentions=[BOT_ID])
        await eventually(lambda: len(run.got) == 3, what="three messages")
        plain, mentioned, threaded = run.got
        assert (plain.is_group, plain.addressed) == (True, False)
        assert (mentioned.text, mentioned.addressed, mentioned.sender) == (
            "what is due?",
            True,
            ALICE,
        )
        assert mentioned.sender_aliases == [ALICE_ID]
        assert (threaded.chat, threaded.thread) == ("GENERAL", "t1")
        await run.adapter.send_text(threaded.address, "in reply")
        [reply] = [m for m in fake.messages if m.user_id == BOT_ID]
        assert (reply.rid, reply.tmid, reply.msg) == ("GENERAL", "t1", "in reply")
        edited = await fake.say("typo")
        edited.msg = "fixed"
        await eventually(lambda: len(run.got) == 4, what="the message")
        await fake.again(edited, edited=True)  # an edit streams the message again, changed
        after = run.beats
        await eventually(lambda: run.beats > after + 2, what="pings after the edit")
        assert len(run.got) == 4  # the edit was not taken as a new message


async def test_files_go_up_with_rooms_upload_and_come_down_with_the_token(
    fake: FakeRocketChat, state: RocketChatState, tmp_path: Path
) -> None:
    async with Running(fake, state) as run:
        await fake.say("read this", file=("notes.txt", "text/plain", b"apples\n"))
        await eventually(lambda: len(run.got) == 1, what="the message")
        [message] = run.got
        [attachment] = message.attachments
        assert (message.text, attachment.name, attachment.media_type) == (
            "read this",
            "notes.txt",
            "text/plain",
        )
        assert await run.adapter.download(attachment) == b"apples\n"
        report = tmp_path / "report.txt"
        report.write_bytes(b"numbers\n")
        await run.adapter.send_file(Address("rc", DM_ROOM), report, caption="the report")
        [sent] = [m for m in fake.messages if m.user_id == BOT_ID]
        assert (sent.msg, sent.file) == ("the report", ("report.txt", "text/plain", b"numbers\n"))
        await eventually(lambda: run.beats > 5, what="our own upload to stream back")
        assert len(run.got) == 1  # our own messages are never taken


async def test_the_first_start_keeps_the_servers_time_and_reads_no_history(
    fake: FakeRocketChat, state: RocketChatState
) -> None:
    await fake.say("long before")
    async with Running(fake, state) as run:
        assert run.got == [] and fake.history_reads == []
        saved = RocketChatState.load(state.path)
        assert saved.since is not None and abs(saved.since - time.time() * 1000) < 60_000


async def test_what_was_posted_while_away_is_read_back_oldest_first_page_by_page(
    fake: FakeRocketChat, state: RocketChatState
) -> None:
    async with Running(fake, state):
        pass  # the first start: the position is now
    [*_, edited] = [await fake.say(f"away {n}") for n in range(150)]
    edited.msg, edited.edited = "away 149, edited", True  # edited before we came back
    await fake.say(f"@{BOT_USER} in the channel", rid="GENERAL", room_type="c", mentions=[BOT_ID])
    await fake.say("hidden", rid="SECRET", room_type="p")
    fake.unreadable.add("SECRET")  # its history refused: skipped, the rest still read
    fake.rooms["LIVE"] = "l"  # an omnichannel room: not the bot's to read
    async with Running(fake, RocketChatState.load(state.path)) as run:
        await eventually(lambda: len(run.got) == 151, what="everything posted while away")
        texts = [message.text for message in run.got]
        assert texts[:149] == [f"away {n}" for n in range(149)]
        assert texts[149:] == ["away 149, edited", "in the channel"]
        reads = [read for read in fake.history_reads if read[1] == DM_ROOM]
        assert len(reads) == 2  # two pages of a hundred
        assert not any(read[1] in ("SECRET", "LIVE") for read in fake.history_reads)
        assert RocketChatState.load(state.path).since == max(m.ts for m in fake.messages)
        await fake.say("and live")
        await eventually(lambda: len(run.got) == 152, what="the stream after the catch-up")


async def test_setup_asks_the_server_who_the_token_is(fake: FakeRocketChat) -> None:
    config = config_for(fake)
    said = await check_setup(config, {"ROCKETCHAT_TOKEN": TOKEN})
    assert said == f"@{BOT_USER} on 127.0.0.1:{fake.port}"
    with pytest.raises(SetupCheckFailed, match="HTTP 401"):
        await check_setup(config, {"ROCKETCHAT_TOKEN": "nope"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("base_url: https://rc.example\ntoken_env: K", "user_id: a rocketchat channel needs"),
        ("base_url: https://rc.example\nuser_id: u1", "token_env: a rocketchat channel needs"),
        ("user_id: u1\ntoken_env: K", "base_url: a rocketchat channel needs"),
    ],
)
def test_a_rocketchat_entry_is_checked(entry: str, message: str, home: Home) -> None:
    text = (
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        "channels:\n  r:\n    type: rocketchat\n"
        + "".join(f"    {line}\n" for line in entry.splitlines())
    )
    with pytest.raises(ConfigError, match=rf"config.yaml:\d+: channels\.r\.{message}"):
        parse_config(text, home.config_path, home)
