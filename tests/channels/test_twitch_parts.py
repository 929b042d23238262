"""Twitch's IRC details, on the fake server speaking it (tests/channels/fake_irc.py): the
oauth login without CAP LS, its tags read, replies threaded, a refused token, RECONNECT."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from habakkuk.channels.adapter import Address, FatalAdapterError, InboundMessage
from habakkuk.channels.twitch import TwitchAdapter
from habakkuk.channels.twitch_setup import twitch_login
from habakkuk.engine.channel_config import ChannelConfig
from tests.channels.fake_irc import ALICE_TWITCH_ID, FakeIrc
from tests.channels.twitch_driver import CHANNEL, TWITCH_TOKEN
from tests.helpers import eventually


def adapter_for(fake: FakeIrc, token: str = TWITCH_TOKEN) -> TwitchAdapter:
    config = ChannelConfig(
        type="twitch",
        server=f"127.0.0.1:{fake.port}",
        tls=False,
        nick="HabakkukBot",
        token_env="TWITCH_TOKEN",
        join=[CHANNEL],
    )
    config.name = "tw"
    return TwitchAdapter(config, twitch_login(config, token))


@pytest.fixture
async def fake() -> AsyncIterator[FakeIrc]:
    async with FakeIrc(twitch_token=TWITCH_TOKEN) as server:
        yield server


async def test_login_reads_tags_and_threads_the_first_line_of_a_reply(fake: FakeIrc) -> None:
    inbox: list[InboundMessage] = []
    up = asyncio.Event()

    async def take(message: InboundMessage) -> None:
        inbox.append(message)

    adapter = adapter_for(fake)
    task = asyncio.create_task(adapter.run(take, up.set))
    try:
        await up.wait()
        sent = [(line.command, line.params) for line in fake.received]
        assert sent[:3] == [
            ("CAP", ("REQ", "twitch.tv/commands twitch.tv/tags")),
            ("PASS", (f"oauth:{TWITCH_TOKEN}",)),
            ("NICK", ("habakkukbot",)),  # Twitch logins are lower case
        ]
        assert not any(c == "CAP" and p[0] in ("LS", "END") for c, p in sent)
        await eventually(lambda: ("JOIN", (CHANNEL,)) in [
            (line.command, line.params) for line in fake.received
        ], what="the join")  # fmt: skip
        fake.say("@habakkukbot what is up?", target=CHANNEL, msgid="id-1")
        fake.say("chatter among viewers", target=CHANNEL, msgid="id-2")
        await eventually(lambda: len(inbox) == 2, what="two messages")
        asked, chatter = inbox
        assert (asked.message_id, asked.chat, asked.sender, asked.text) == (
            "id-1", CHANNEL, "alice", "what is up?",
        )  # fmt: skip
        assert asked.addressed and not chatter.addressed and asked.is_group
        assert f"id:{ALICE_TWITCH_ID}" in asked.sender_aliases and asked.sender_name == "Alice"
        assert asked.at == 1796637600.0
        await adapter.send_text(Address("tw", CHANNEL), "first " * 100, reply_to="id-1")
        await eventually(lambda: len(fake.texts(CHANNEL)) == 2, what="two lines")
        replies = [line for line in fake.received if line.command == "PRIVMSG"]
        assert [r.tags.get("reply-parent-msg-id") for r in replies] == ["id-1", None]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await adapter.close()


async def test_a_refused_token_is_fatal(fake: FakeIrc) -> None:
    with pytest.raises(FatalAdapterError, match="Login authentication failed"):
        await adapter_for(fake, "not-the-token").run(lambda m: asyncio.sleep(0), lambda: None)


async def test_reconnect_ends_the_run_for_the_supervisor_to_connect_again(fake: FakeIrc) -> None:
    up = asyncio.Event()
    adapter = adapter_for(fake)
    task = asyncio.create_task(adapter.run(lambda m: asyncio.sleep(0), up.set))
    await up.wait()
    client = await fake.registered()
    client.writer.write(b":tmi.twitch.tv RECONNECT\r\n")
    await asyncio.wait_for(task, 20)  # returned, not raised: no back-off
    assert adapter.conn is None
