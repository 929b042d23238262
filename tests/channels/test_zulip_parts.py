"""Zulip's details on the fake server (tests/channels/fake_zulip.py): the position kept
atomically and resumed on the same queue, a lost queue registered anew with what it held
fetched, streams and topics as groups answered when @-mentioned, our own messages never
taken, files both ways, a refused key fatal, the setup check, and the config checks."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import Address, FatalAdapterError, InboundMessage
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.channels.zulip import ZulipAdapter, ZulipState
from habakkuk.channels.zulip_setup import check_setup
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.channels.fake_zulip import (
    ALICE_EMAIL,
    ALICE_ID,
    API_KEY,
    BOB_ID,
    BOT_EMAIL,
    BOT_ID,
    BOT_NAME,
    FakeZulip,
)
from tests.helpers import eventually


def config_for(fake: FakeZulip) -> ChannelConfig:
    config = ChannelConfig(
        type="zulip", base_url=fake.base_url, username=BOT_EMAIL, token_env="ZULIP_API_KEY"
    )
    config.name = "zulip"
    return config


@pytest.fixture
async def fake() -> AsyncIterator[FakeZulip]:
    async with FakeZulip(heartbeat=0.2) as server:
        yield server


class Running:
    """An adapter running against the fake, collecting what it hands on."""

    def __init__(self, fake: FakeZulip, path: Path):
        self.adapter = ZulipAdapter(config_for(fake), API_KEY, ZulipState.load(path))
        self.got: list[InboundMessage] = []
        self.beats = 0
        self.task: asyncio.Task[None] | None = None

    async def take(self, message: InboundMessage) -> None:
        self.got.append(message)

    def beat(self) -> None:
        self.beats += 1

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.adapter.run(self.take, self.beat))
        await eventually(lambda: self.beats > 0, what="the adapter to connect")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        await self.adapter.close()


async def test_the_position_is_kept_atomically_and_the_same_queue_resumed(
    fake: FakeZulip, tmp_path: Path
) -> None:
    path = tmp_path / "channels" / "zulip-zulip.json"
    async with Running(fake, path) as run:
        first = fake.post(ALICE_ID, "one", to=[BOT_ID])
        await eventually(lambda: len(run.got) == 1, what="the first message")
        await eventually(lambda: run.beats > 3, what="heartbeats to beat")
        kept = json.loads(path.read_text())
        assert kept["queue_id"] == "queue-1" and kept["last_message_id"] == first.id
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not list(path.parent.glob(".*.tmp"))  # replaced whole, nothing left over
    fake.post(ALICE_ID, "two", to=[BOT_ID])  # while we were away: the queue keeps it
    async with Running(fake, path) as again:
        await eventually(lambda: [m.text for m in again.got] == ["two"], what="the one meanwhile")
    assert fake.registers == 1  # the same queue, resumed from the kept event id
    assert [(m.chat, m.sender, m.sender_aliases) for m in run.got] == [
        (ALICE_EMAIL, ALICE_EMAIL, [str(ALICE_ID)])
    ]


async def test_a_lost_queue_is_registered_anew_and_what_it_held_is_fetched(
    fake: FakeZulip, tmp_path: Path
) -> None:
    path = tmp_path / "zulip.json"
    async with Running(fake, path) as run:
        one = fake.post(ALICE_ID, "one", to=[BOT_ID])
        await eventually(lambda: len(run.got) == 1, what="the first message")
        await eventually(
            lambda: path.exists() and json.loads(path.read_text())["last_message_id"] == one.id,
            what="the message kept as the last one",
        )
    fake.drop_queues()  # the server restarted, or the queue idled out
    fake.post(ALICE_ID, "two", to=[BOT_ID])
    async with Running(fake, path) as again:
        await eventually(lambda: [m.text for m in again.got] == ["two"], what="the missed one")
        fake.post(ALICE_ID, "three", to=[BOT_ID])
        await eventually(lambda: len(again.got) == 2, what="the new queue's message")
    assert fake.registers == 2
    assert json.loads(path.read_text())["queue_id"] == "queue-2"


async def test_a_stream_topic_is_a_group_answered_when_mentioned(
    fake: FakeZulip, tmp_path: Path
) -> None:
    async with Running(fake, tmp_path / "z.json") as run:
        fake.post(ALICE_ID, "just chatting", stream_id=7, topic="plans: q3")
        fake.post(ALICE_ID, f"@**{BOT_NAME}** what is due?", stream_id=7, topic="plans: q3")
        fake.post(ALICE_ID, "and us two?", to=[BOT_ID, BOB_ID])
        await eventually(lambda: len(run.got) == 3, what="three messages")
        plain, mentioned, group_dm = run.got
        assert (plain.is_group, plain.addressed) == (True, False)
        assert (mentioned.text, mentioned.addressed) == ("what is due?", True)
        assert (mentioned.chat, mentioned.thread) == ("stream-7", "plans%3A%20q3")
        assert (group_dm.chat, group_dm.is_group) == (f"{ALICE_EMAIL},bob@zulip.test", True)
        await run.adapter.send_text(mentioned.address, "Friday.")
        await run.adapter.send_text(group_dm.address, "hello both")
        await eventually(lambda: len(fake.by_bot()) == 2, what="the replies")
        in_topic, to_both = fake.by_bot()
        assert (in_topic.stream_id, in_topic.topic, in_topic.content) == (7, "plans: q3", "Friday.")
        assert sorted(to_both.recipients) == [ALICE_ID, BOB_ID]
        await eventually(lambda: run.beats > 3, what="our own messages to come back")
        assert len(run.got) == 3  # our own replies, in the queue too, are never taken


async def test_files_go_up_as_uploads_and_come_down_with_the_key(
    fake: FakeZulip, tmp_path: Path
) -> None:
    async with Running(fake, tmp_path / "z.json") as run:
        path = fake.upload("notes.txt", b"apples\n")
        fake.post(ALICE_ID, f"read this\n[notes.txt]({path})", to=[BOT_ID])
        await eventually(lambda: len(run.got) == 1, what="the message")
        [message] = run.got
        assert message.text == "read this"
        [attachment] = message.attachments
        assert (attachment.name, attachment.media_type) == ("notes.txt", "text/plain")
        assert await run.adapter.download(attachment) == b"apples\n"
        report = tmp_path / "report.txt"
        report.write_bytes(b"numbers\n")
        await run.adapter.send_file(Address("zulip", ALICE_EMAIL), report, caption="the report")
        [sent] = fake.by_bot()
        [(name, link)] = sent.files()
        assert sent.content.startswith("the report\n") and name == "report.txt"
        assert fake.uploads[link] == b"numbers\n"


async def test_a_refused_key_is_fatal(fake: FakeZulip, tmp_path: Path) -> None:
    adapter = ZulipAdapter(config_for(fake), "wrong-key", ZulipState.load(tmp_path / "z.json"))
    with pytest.raises(FatalAdapterError, match="HTTP 401"):
        await adapter.run(lambda message: asyncio.sleep(0), lambda: None)
    await adapter.close()


async def test_setup_asks_the_server_who_the_bot_is(fake: FakeZulip) -> None:
    config = config_for(fake)
    said = await check_setup(config, {"ZULIP_API_KEY": API_KEY})
    assert said == f"{BOT_NAME} ({BOT_EMAIL}) on 127.0.0.1:{fake.port}"
    with pytest.raises(SetupCheckFailed, match="HTTP 401"):
        await check_setup(config, {"ZULIP_API_KEY": "nope"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("base_url: https://z.example\nusername: bot\ntoken_env: K", "username: 'bot' is not"),
        ("username: b@z.example\ntoken_env: K", "base_url: a zulip channel needs this"),
        ("base_url: https://z.example\nusername: b@z.example", "token_env: a zulip channel"),
    ],
)
def test_a_zulip_entry_is_checked(entry: str, message: str, home: Home) -> None:
    text = (
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        "channels:\n  z:\n    type: zulip\n"
        + "".join(f"    {line}\n" for line in entry.splitlines())
    )
    with pytest.raises(ConfigError, match=rf"config.yaml:\d+: channels\.z\.{message}"):
        parse_config(text, home.config_path, home)
