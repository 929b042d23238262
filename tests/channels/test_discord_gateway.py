"""The Discord adapter's gateway protocol against the fake: heartbeats, resume, op 7, op 9,
zombie connections and fatal close codes; and its REST error mapping."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import (
    Address,
    FatalAdapterError,
    InboundMessage,
    RetryAfter,
    SendError,
    Undeliverable,
)
from habakkuk.channels.discord import DiscordAdapter
from habakkuk.channels.discord_gateway import INTENTS, GatewayState
from habakkuk.channels.store import ChannelStore
from habakkuk.channels.tasks import cancel_and_wait
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.store import SqliteDatabase
from tests.channels.fake_discord import (
    BOT,
    BOT_TOKEN,
    DM_CHANNEL,
    GUILD_CHANNEL,
    USER_ID,
    FakeDiscord,
)
from tests.helpers import eventually


class Bot:
    """A Discord adapter running against the fake, collecting what it hands the gateway."""

    def __init__(self, dc: FakeDiscord, store: ChannelStore, token: str = BOT_TOKEN):
        config = ChannelConfig(type="discord", token_env="DISCORD_TOKEN", base_url=dc.base_url)
        config.name = "dc"
        self.adapter = DiscordAdapter(config, token, store)
        self.adapter.invalid_session_delay = (0.01, 0.02)
        self.store = store
        self.received: list[InboundMessage] = []
        self.beats = 0
        self.task: asyncio.Task[None] | None = None

    async def inbox(self, message: InboundMessage) -> None:
        self.received.append(message)

    def beat(self) -> None:
        self.beats += 1

    def start(self) -> None:
        self.task = asyncio.create_task(self.adapter.run(self.inbox, self.beat))

    async def stop(self) -> None:
        await cancel_and_wait(self.task)
        await self.adapter.close()

    def texts(self) -> list[str]:
        return [m.text for m in self.received]

    async def saved(self) -> GatewayState:
        return GatewayState.loads(await self.store.offset("dc"))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ChannelStore]:
    db = await SqliteDatabase.open(tmp_path / "control.db", [])
    try:
        yield await ChannelStore.open(db)
    finally:
        await db.close()


@pytest.fixture
async def bot(dc: FakeDiscord, store: ChannelStore) -> AsyncIterator[Bot]:
    running = Bot(dc, store)
    yield running
    await running.stop()


async def connected(dc: FakeDiscord, bot: Bot) -> None:
    bot.start()
    await dc.wait_for(lambda: dc.connected)


async def test_identify_sends_the_intents_and_ready_saves_the_session(
    dc: FakeDiscord, bot: Bot
) -> None:
    await connected(dc, bot)
    [identify] = dc.identifies
    assert identify["intents"] == INTENTS == 1 | 512 | 4096 | 32768
    assert identify["token"] == BOT_TOKEN
    assert dc.session is not None
    session_id = dc.session.id
    await eventually(lambda: bot.adapter.bot.id == BOT["id"], what="the bot's id")

    async def saved_ready() -> bool:
        state = await bot.saved()
        return state.session_id == session_id and state.seq == 1

    await eventually(saved_ready, what="the session saved after READY")
    assert (await bot.saved()).resume_url.endswith("/gateway")


async def test_heartbeats_carry_the_last_sequence_number(
    dc: FakeDiscord, store: ChannelStore
) -> None:
    dc.heartbeat_interval = 20
    running = Bot(dc, store)
    try:
        await connected(dc, running)
        dc.message("one")
        dc.message("two")
        await eventually(lambda: len(running.received) == 2, what="both messages")
        await dc.wait_for(lambda: 3 in dc.heartbeats)  # READY is 1, the messages 2 and 3
        assert dc.heartbeats == sorted(hb or 0 for hb in dc.heartbeats)
    finally:
        await running.stop()


async def test_a_dropped_socket_is_resumed_and_the_missed_events_replayed(
    dc: FakeDiscord, bot: Bot
) -> None:
    await connected(dc, bot)
    dc.message("before")
    await eventually(lambda: bot.texts() == ["before"], what="the first message")
    await dc.drop(code=None)  # cut without a close frame
    dc.message("while away")  # kept in the session for the resume
    await dc.wait_for(lambda: dc.connected and len(dc.resumes) == 1)
    await eventually(lambda: bot.texts() == ["before", "while away"], what="the replay")
    [resume] = dc.resumes
    assert resume["session_id"] == (await bot.saved()).session_id
    assert resume["seq"] == 2  # READY and "before"
    assert len(dc.identifies) == 1  # the session went on: no second Identify


async def test_a_close_with_a_resumable_code_resumes(dc: FakeDiscord, bot: Bot) -> None:
    await connected(dc, bot)
    await dc.drop(code=4000)
    await dc.wait_for(lambda: dc.connected and len(dc.resumes) == 1)
    dc.message("after")
    await eventually(lambda: bot.texts() == ["after"], what="a message after the resume")
    assert len(dc.identifies) == 1


async def test_op_7_reconnect_resumes(dc: FakeDiscord, bot: Bot) -> None:
    await connected(dc, bot)
    dc.reconnect()
    await dc.wait_for(lambda: len(dc.resumes) == 1 and dc.connected)
    dc.message("after op 7")
    await eventually(lambda: bot.texts() == ["after op 7"], what="a message after op 7")
    assert len(dc.identifies) == 1 and dc.connections == 2


async def test_op_9_resumable_resumes(dc: FakeDiscord, bot: Bot) -> None:
    await connected(dc, bot)
    dc.invalidate(resumable=True)
    await dc.wait_for(lambda: len(dc.resumes) == 1 and dc.connected)
    assert len(dc.identifies) == 1


async def test_op_9_not_resumable_identifies_afresh(dc: FakeDiscord, bot: Bot) -> None:
    await connected(dc, bot)
    assert dc.session is not None
    first = dc.session.id
    dc.invalidate(resumable=False)
    await dc.wait_for(lambda: len(dc.identifies) == 2 and dc.connected)
    assert dc.resumes == []
    assert dc.session is not None and dc.session.id != first
    second = dc.session.id

    async def saved_new() -> bool:
        return (await bot.saved()).session_id == second

    await eventually(saved_new, what="the new session saved")
    dc.message("in the new session")
    await eventually(lambda: bot.texts() == ["in the new session"], what="a message")


async def test_a_session_gone_close_code_identifies_afresh(dc: FakeDiscord, bot: Bot) -> None:
    await connected(dc, bot)
    await dc.drop(code=4009)  # Session timed out
    await dc.wait_for(lambda: len(dc.identifies) == 2 and dc.connected)
    assert dc.resumes == []


async def test_a_missing_heartbeat_ack_is_a_zombie_connection_that_resumes(
    dc: FakeDiscord, store: ChannelStore
) -> None:
    dc.heartbeat_interval = 20
    running = Bot(dc, store)
    try:
        await connected(dc, running)
        dc.acks = False
        await dc.wait_for(lambda: dc.connections == 2, timeout=10)
        dc.acks = True
        await dc.wait_for(lambda: len(dc.resumes) == 1 and dc.connected)
        assert len(dc.identifies) == 1
    finally:
        await running.stop()


async def test_a_restart_resumes_the_saved_session_and_gets_what_it_missed(
    dc: FakeDiscord, store: ChannelStore
) -> None:
    first = Bot(dc, store)
    await connected(dc, first)
    dc.message("first")
    await eventually(lambda: first.texts() == ["first"], what="the first message")

    async def saved_after_first() -> bool:
        return (await first.saved()).seq == 2  # READY, "first"

    await eventually(saved_after_first, what="the position saved after the message")
    await first.stop()
    await dc.wait_for(lambda: not dc.connected)
    dc.message("while restarting")
    second = Bot(dc, store)
    try:
        await connected(dc, second)
        await eventually(lambda: second.texts() == ["while restarting"], what="the replay")
        assert len(dc.identifies) == 1 and len(dc.resumes) == 1
    finally:
        await second.stop()


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (4004, "authentication failed"),
        (4010, "invalid shard"),
        (4011, "sharding required"),
        (4012, "invalid API version"),
        (4013, "invalid intents"),
        (4014, "disallowed intents"),
    ],
)
async def test_a_fatal_close_code_stops_the_adapter_for_good(
    dc: FakeDiscord, bot: Bot, code: int, says: str
) -> None:
    dc.identify_close = code
    bot.start()
    assert bot.task is not None
    with pytest.raises(FatalAdapterError, match=f"{code} {says}"):
        await asyncio.wait_for(bot.task, 10)
    assert dc.connections == 1  # never retried at once


async def test_the_message_content_intent_refused_names_the_portal_switch(
    dc: FakeDiscord, bot: Bot
) -> None:
    dc.refuse_intents = True
    bot.start()
    assert bot.task is not None
    with pytest.raises(FatalAdapterError, match="Message Content intent"):
        await asyncio.wait_for(bot.task, 10)


async def test_a_rejected_token_is_fatal_before_the_gateway(
    dc: FakeDiscord, store: ChannelStore
) -> None:
    running = Bot(dc, store, token="wrong")
    running.start()
    assert running.task is not None
    try:
        with pytest.raises(
            FatalAdapterError, match=r"^GET /users/@me: 401: Unauthorized \(check the bot token\)$"
        ):
            await asyncio.wait_for(running.task, 10)
        assert "wrong" not in str(running.task.exception())
    finally:
        await running.stop()


async def test_a_server_that_keeps_closing_early_hands_over_to_the_supervisor(
    dc: FakeDiscord, bot: Bot
) -> None:
    dc.identify_close = 4000  # resumable, but never READY
    bot.start()
    assert bot.task is not None
    with pytest.raises(SendError, match="closed 3 connections in a row"):
        await asyncio.wait_for(bot.task, 10)


async def test_an_unreadable_saved_state_identifies(dc: FakeDiscord, bot: Bot) -> None:
    await bot.store.save_offset("dc", "{not json")
    await connected(dc, bot)
    assert len(dc.identifies) == 1 and dc.resumes == []


# -- REST errors ------------------------------------------------------------------------


async def test_rest_errors_map_to_what_the_delivery_worker_needs(dc: FakeDiscord, bot: Bot) -> None:
    to = Address("dc", DM_CHANNEL)
    dc.rate_limit()
    with pytest.raises(RetryAfter) as limited:
        await bot.adapter.send_text(to, "hi")
    assert limited.value.seconds == pytest.approx(0.05)
    dc.block(DM_CHANNEL)
    with pytest.raises(Undeliverable, match="403 Missing Access"):
        await bot.adapter.send_text(to, "hi")
    with pytest.raises(Undeliverable, match="404 Unknown Message"):
        await bot.adapter.edit_text(Address("dc", GUILD_CHANNEL), "1", "x")
    with pytest.raises(Undeliverable, match="Cannot send an empty message"):
        await bot.adapter.send_text(Address("dc", GUILD_CHANNEL), " ")


async def test_an_address_naming_a_user_works_in_their_dm_for_every_operation(
    dc: FakeDiscord, bot: Bot, store: ChannelStore
) -> None:
    to = Address("dc", USER_ID)  # the person, not their DM channel
    sent = await bot.adapter.send_text(to, "hello")
    assert dc.texts() == ["hello"]  # into the DM channel Discord already had for them
    await bot.adapter.typing(to)
    await bot.adapter.edit_text(to, sent, "hello again")
    await bot.adapter.react(to, sent, "👀")
    await bot.adapter.delete(to, sent)
    assert len(dc.of("open_dm")) == 1  # remembered after the first send
    assert {c.channel for c in dc.calls if c.answered and c.channel} == {DM_CHANNEL}
    assert sent not in dc.messages
    # after a restart the mapping is gone: the first operation learns it again (idempotent)
    again = Bot(dc, store)
    try:
        kept = await bot.adapter.send_text(to, "stays")
        await again.adapter.edit_text(to, kept, "stays, edited")
        assert dc.messages[kept]["content"] == "stays, edited"
        opened = dc.of("open_dm")
        assert len(opened) == 2 and all(c.body == {"recipient_id": USER_ID} for c in opened)
    finally:
        await again.stop()


async def test_every_message_goes_out_without_pings(dc: FakeDiscord, bot: Bot) -> None:
    to = Address("dc", DM_CHANNEL)
    await bot.adapter.send_text(to, "@everyone look <@123>", reply_to="77")
    [post] = dc.posts()
    assert post.body["allowed_mentions"] == {"parse": []}
    assert post.body["message_reference"]["message_id"] == "77"
    assert "nonce" not in post.body  # outside a delivery there is nothing to derive it from
    assert json.dumps(post.body).count("@everyone") == 1


# -- events of different chats at once, of one chat in order ------------------------------

OTHER_CHANNEL = "200000000000000043"


async def test_a_slow_chat_does_not_hold_up_another_and_each_keeps_its_order(
    dc: FakeDiscord, store: ChannelStore
) -> None:
    running = Bot(dc, store)
    release = asyncio.Event()
    handled: list[str] = []

    async def inbox(message: InboundMessage) -> None:
        if message.text == "slow":
            await release.wait()
        handled.append(message.text)

    running.inbox = inbox  # type: ignore[method-assign]  # this test's own gateway
    try:
        await connected(dc, running)
        dc.message("slow")
        dc.message("after slow")  # the same chat: waits for "slow"
        dc.message("elsewhere", channel=OTHER_CHANNEL)
        await eventually(lambda: handled == ["elsewhere"], what="the other chat answered")

        async def position() -> int | None:
            return (await running.saved()).seq

        assert await position() == 1  # READY only: "slow" (seq 2) is not handled yet
        release.set()
        await eventually(lambda: len(handled) == 3, what="the slow chat")
        assert handled == ["elsewhere", "slow", "after slow"]

        async def past_all() -> bool:
            return await position() == 4

        await eventually(past_all, what="the position past all three")
    finally:
        await running.stop()


async def test_an_event_that_cannot_be_handled_stops_the_adapter_before_its_position(
    dc: FakeDiscord, store: ChannelStore
) -> None:
    failing = Bot(dc, store)

    async def inbox(message: InboundMessage) -> None:
        if message.text == "breaks":
            raise sqlite3.OperationalError("database is locked")
        failing.received.append(message)

    failing.inbox = inbox  # type: ignore[method-assign]  # this test's own gateway
    try:
        await connected(dc, failing)
        dc.message("fine")
        await eventually(lambda: failing.texts() == ["fine"], what="the first message")
        dc.message("breaks")
        assert failing.task is not None
        with pytest.raises(sqlite3.OperationalError):
            await asyncio.wait_for(failing.task, 10)
    finally:
        await failing.stop()
    assert (await failing.saved()).seq == 2  # READY and "fine": not the one that broke
    again = Bot(dc, store)  # the supervisor's next run resumes and gets it again
    try:
        await connected(dc, again)
        await eventually(lambda: again.texts() == ["breaks"], what="the replay")
    finally:
        await again.stop()


async def test_no_session_starts_left_waits_for_the_supervisor_instead_of_identifying(
    dc: FakeDiscord, bot: Bot
) -> None:
    dc.session_starts = 0
    bot.start()
    assert bot.task is not None
    with pytest.raises(SendError, match="no new gateway session for 14400s"):
        await asyncio.wait_for(bot.task, 10)
    assert dc.connections == 0


async def test_a_press_answered_without_a_notice_is_a_deferred_update(
    dc: FakeDiscord, bot: Bot
) -> None:
    await connected(dc, bot)
    press = dc.press("fy|abc|0", message_id="1")
    await eventually(lambda: len(bot.received) == 1, what="the press")
    [message] = bot.received
    assert message.callback is not None and message.callback.data == "fy|abc|0"
    assert message.key == f"cb:{press['id']}"
    await bot.adapter.answer_callback(message.callback)
    [ack] = dc.of("interaction_callback")
    assert ack.body == {"type": 6}
    await bot.adapter.answer_callback(message.callback)  # its token is used up: nothing sent
    assert len(dc.of("interaction_callback", answered=None)) == 1
