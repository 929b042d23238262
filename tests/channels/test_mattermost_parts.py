"""Mattermost's details on the fake server (tests/channels/fake_mattermost.py): the
WebSocket's authentication challenge with the bot's token (a refused token fatal), ping
actions beating, a dropped socket ending the run and the next run fetching what was
posted meanwhile (also after a restart, from the state file), channels as groups
answered on @-mention, threads as conversations, our own posts never taken, files both
ways, the setup check and the config checks."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import Address, FatalAdapterError, InboundMessage
from habakkuk.channels.mattermost import MattermostAdapter
from habakkuk.channels.mattermost_setup import check_setup
from habakkuk.channels.mattermost_wire import MattermostState, Seen
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.channels.fake_mattermost import (
    ALICE,
    ALICE_ID,
    BOT_ID,
    BOT_USER,
    DM_CHANNEL,
    TOKEN,
    TOWN,
    FakeMattermost,
)
from tests.helpers import eventually


def config_for(fake: FakeMattermost) -> ChannelConfig:
    config = ChannelConfig(type="mattermost", base_url=fake.base_url, token_env="MM_TOKEN")
    config.name = "mm"
    return config


def adapter_for(fake: FakeMattermost, state: Path, token: str = TOKEN) -> MattermostAdapter:
    adapter = MattermostAdapter(config_for(fake), token, MattermostState.load(state))
    adapter.ping_every = 0.1
    return adapter


@pytest.fixture
async def fake() -> AsyncIterator[FakeMattermost]:
    async with FakeMattermost() as server:
        yield server


class Running:
    """An adapter running against the fake, collecting what it hands on."""

    def __init__(self, adapter: MattermostAdapter):
        self.adapter = adapter
        self.got: list[InboundMessage] = []
        self.beats = 0
        self.task: asyncio.Task[None] | None = None

    async def take(self, message: InboundMessage) -> None:
        self.got.append(message)

    def beat(self) -> None:
        self.beats += 1

    def start(self) -> None:
        self.beats = 0
        self.task = asyncio.create_task(self.adapter.run(self.take, self.beat))

    async def __aenter__(self) -> Running:
        self.start()
        await eventually(lambda: self.beats > 0, what="the adapter to authenticate")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        if not self.task.done():
            self.task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await self.task
        await self.adapter.close()


async def test_the_challenge_carries_the_token_and_pings_beat(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    async with Running(adapter_for(fake, tmp_path / "mm.json")) as run:
        assert fake.challenges == [TOKEN] and fake.authenticated == 1
        await eventually(lambda: fake.pings > 2 and run.beats > 3, what="pongs to beat")
        assert run.adapter.bot.user_id == BOT_ID and run.adapter.bot.username == BOT_USER


async def test_a_refused_token_is_fatal(fake: FakeMattermost, tmp_path: Path) -> None:
    adapter = adapter_for(fake, tmp_path / "mm.json", token="not-the-token")
    with pytest.raises(FatalAdapterError, match="refused the token"):
        await adapter.run(lambda message: asyncio.sleep(0), lambda: None)
    await adapter.close()


async def test_a_reconnect_and_a_restart_fetch_the_posts_missed_while_down(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    state = tmp_path / "channels" / "mattermost-mm.json"
    state.parent.mkdir()
    async with Running(adapter_for(fake, state)) as run:
        first = await fake.say("hello")
        await eventually(lambda: len(run.got) == 1, what="the first post")
        await fake.drop_sockets()
        await eventually(lambda: run.task is not None and run.task.done(), what="the run to end")
        assert run.task is not None and run.task.exception() is None  # the supervisor reruns
        await fake.edit(first, "hello (edited while down: no new post)")
        await fake.say("while you were out")
        edited = await fake.say("and this to")
        await fake.edit(edited, "and this too")  # created and edited while down: taken once
        run.start()
        await eventually(lambda: len(run.got) == 3, what="the missed posts")
        await eventually(lambda: fake.listings == 2, what="the channels listed")
        assert [m.text for m in run.got] == ["hello", "while you were out", "and this too"]
        assert fake.fetches == [(DM_CHANNEL, first.create_at)]
        await fake.edit(edited, "an edit is no new post")
        live = await fake.say("live again")
        await eventually(lambda: len(run.got) == 4, what="the live post")
        assert run.got[3].text == "live again"
    await eventually(
        lambda: MattermostState.load(state).channels[DM_CHANNEL].since == live.create_at,
        what="the state",
    )
    saved = json.loads(state.read_text())
    # the horizon: the newest post of the bot's channels at the last connect
    horizon = edited.create_at
    assert saved == {
        "channels": {DM_CHANNEL: {"type": "D", "since": live.create_at}},
        "horizon": horizon,
    }
    assert stat.S_IMODE(state.stat().st_mode) == 0o600

    await fake.say("posted while the process was down")
    async with Running(adapter_for(fake, state)) as restarted:
        await eventually(lambda: len(restarted.got) == 1, what="the post missed by the restart")
        assert restarted.got[0].text == "posted while the process was down"
        assert fake.fetches[-1] == (DM_CHANNEL, live.create_at)


async def test_a_channel_the_bot_was_removed_from_is_forgotten_not_fatal(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    state = tmp_path / "mattermost-mm.json"
    MattermostState(state, {"gone0000000000000000000001": Seen("O", 1)}).save()
    async with Running(adapter_for(fake, state)) as run:
        await fake.say("hello")
        await eventually(lambda: len(run.got) == 1, what="the post")
        assert run.got[0].text == "hello"
    assert fake.fetches == [("gone0000000000000000000001", 1)]
    # (the state is written in a thread, which the run's end does not wait for)
    await eventually(
        lambda: list(MattermostState.load(state).channels) == [DM_CHANNEL], what="the state"
    )


async def test_a_channel_is_a_group_answered_when_mentioned_and_threads_are_their_own(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    async with Running(adapter_for(fake, tmp_path / "mm.json")) as run:
        await fake.say("just chatting", channel=TOWN)
        await fake.say(f"@{BOT_USER} what is due?", channel=TOWN)
        await fake.say("in the thread", channel=TOWN, root_id="rootpost01")
        await eventually(lambda: len(run.got) == 3, what="three posts")
        plain, mentioned, threaded = run.got
        assert (plain.is_group, plain.addressed) == (True, False)
        assert (mentioned.text, mentioned.addressed, mentioned.sender) == (
            "what is due?",
            True,
            ALICE,
        )
        assert mentioned.sender_aliases == [ALICE_ID]
        assert (threaded.chat, threaded.thread, threaded.addressed) == (TOWN, "rootpost01", False)
        await run.adapter.send_text(threaded.address, "in reply")
        [reply] = [p for p in fake.posts if p.user_id == BOT_ID]
        assert (reply.channel_id, reply.root_id, reply.message) == (TOWN, "rootpost01", "in reply")
        direct = await fake.say("no mention needed")
        await eventually(lambda: len(run.got) == 4, what="the direct post")
        assert (run.got[3].is_group, run.got[3].addressed) == (False, True)
        await fake.again(direct)  # a duplicate is handed on: the gateway drops it by id
        await eventually(lambda: len(run.got) == 5, what="the duplicate")
        assert run.got[4].message_id == direct.id


async def test_files_go_up_with_files_and_posts_and_come_down_by_id(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    async with Running(adapter_for(fake, tmp_path / "mm.json")) as run:
        await fake.say("read this", file=("notes.txt", "text/plain", b"apples\n"))
        await eventually(lambda: len(run.got) == 1, what="the post")
        [message] = run.got
        [attachment] = message.attachments
        assert (message.text, attachment.name, attachment.media_type, attachment.size) == (
            "read this",
            "notes.txt",
            "text/plain",
            7,
        )
        assert await run.adapter.download(attachment) == b"apples\n"
        report = tmp_path / "report.txt"
        report.write_bytes(b"numbers\n")
        await run.adapter.send_file(Address("mm", DM_CHANNEL), report, caption="the report")
        [sent] = [p for p in fake.posts if p.user_id == BOT_ID]
        [file_id] = sent.file_ids
        assert (sent.message, fake.files[file_id].name, fake.files[file_id].data) == (
            "the report",
            "report.txt",
            b"numbers\n",
        )
        after = run.beats
        await eventually(lambda: run.beats > after + 2, what="our own post to stream back")
        assert len(run.got) == 1  # our own posts are never taken


async def test_setup_asks_the_server_who_the_token_is(fake: FakeMattermost) -> None:
    config = config_for(fake)
    said = await check_setup(config, {"MM_TOKEN": TOKEN})
    assert said == f"@{BOT_USER} on 127.0.0.1:{fake.port}"
    with pytest.raises(SetupCheckFailed, match="HTTP 401"):
        await check_setup(config, {"MM_TOKEN": "nope"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("base_url: https://mm.example", "token_env: a mattermost channel needs"),
        ("token_env: K", "base_url: a mattermost channel needs"),
        ("base_url: https://mm.example\ntoken_env: K\nuser_id: u1", "user_id"),
    ],
)
def test_a_mattermost_entry_is_checked(entry: str, message: str, home: Home) -> None:
    text = (
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        "channels:\n  m:\n    type: mattermost\n"
        + "".join(f"    {line}\n" for line in entry.splitlines())
    )
    with pytest.raises(ConfigError, match=rf"config.yaml:\d+: channels\.m\.{message}"):
        parse_config(text, home.config_path, home)
