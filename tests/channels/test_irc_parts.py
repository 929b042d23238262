"""IRC's wire details, against the fake IRCv3 server (tests/channels/fake_irc.py): lines
within 512 bytes with the relayed prefix, SASL PLAIN, nick collisions, the end of a
dropped connection; and the parsing, pacing and rendering the adapter is made of."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import pytest

from habakkuk.channels.adapter import Address, FatalAdapterError, InboundMessage, SendError
from habakkuk.channels.irc import IrcAdapter
from habakkuk.channels.irc_conn import Pacer, next_nick
from habakkuk.channels.irc_format import RENDER_BUDGET, irc_lines, plain
from habakkuk.channels.irc_setup import login_of
from habakkuk.channels.irc_wire import LINE_LIMIT, format_line, parse_line, split_text
from habakkuk.engine.channel_config import ChannelConfig
from tests.channels.fake_irc import ALICE, BOT_HOST, FakeIrc
from tests.helpers import eventually

PASSWORD = "correct horse battery staple"


def adapter_for(fake: FakeIrc, password: str = PASSWORD, *, sasl: bool = True) -> IrcAdapter:
    config = ChannelConfig(
        type="irc",
        server=f"127.0.0.1:{fake.port}",
        nick="habakkuk",
        tls=False,
        sasl=sasl,
        password_env="IRC_PASSWORD" if sasl else None,
    )
    config.name = "irc"
    return IrcAdapter(config, login_of(config, password))


class Running:
    """An adapter's run as a task, with what it handed to the gateway."""

    def __init__(self, adapter: IrcAdapter) -> None:
        self.adapter = adapter
        self.inbox: list[InboundMessage] = []
        self.up = asyncio.Event()
        self.task = asyncio.create_task(adapter.run(self._take, self.up.set))

    async def _take(self, message: InboundMessage) -> None:
        self.inbox.append(message)

    async def stop(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        await self.adapter.close()


@pytest.fixture
async def fake() -> AsyncIterator[FakeIrc]:
    async with FakeIrc(accounts={"habakkuk": PASSWORD}) as server:
        yield server


async def test_every_relayed_line_with_our_prefix_stays_within_512_bytes(fake: FakeIrc) -> None:
    running = Running(adapter_for(fake))
    try:
        await running.up.wait()
        conn = running.adapter.conn
        assert conn is not None
        await eventually(lambda: conn.host == BOT_HOST, what="our host from WHOIS")
        text = " ".join(f"wörd{i}-ünïcode✓" for i in range(120))  # ~2600 bytes
        await running.adapter.send_text(Address("irc", ALICE), text)
        await eventually(
            lambda: " ".join(fake.texts()).split() == text.split(), what="every word"
        )  # nothing lost, nothing cut inside a word
        assert all(len(line) <= LINE_LIMIT for line in fake.relayed)
        assert max(len(line) for line in fake.relayed) > LINE_LIMIT - 30  # filled, not timid
    finally:
        await running.stop()


async def test_sasl_plain_logs_in_before_registration_ends(fake: FakeIrc) -> None:
    running = Running(adapter_for(fake))
    try:
        await running.up.wait()
        assert fake.logins == ["habakkuk"]
        commands = [line.command for line in fake.received]
        assert commands.index("AUTHENTICATE") < commands.index(
            "CAP", commands.index("AUTHENTICATE")
        )
        assert running.adapter.conn is not None
        assert {"message-tags", "server-time", "account-tag", "sasl"} <= running.adapter.conn.caps
    finally:
        await running.stop()


@pytest.mark.parametrize("length", [300, 350])  # base64 of exactly 400, and over 400
async def test_a_long_sasl_payload_goes_in_400_byte_pieces(length: int) -> None:
    password = "p" * (length - len("habakkuk\0habakkuk\0"))
    async with FakeIrc(accounts={"habakkuk": password}) as fake:
        running = Running(adapter_for(fake, password))
        try:
            await running.up.wait()
            pieces = [
                line.param(0)
                for line in fake.received
                if line.command == "AUTHENTICATE" and line.param(0) != "PLAIN"
            ]
            assert all(len(piece) <= 400 for piece in pieces) and len(pieces) == 2
            if length == 300:
                assert pieces[-1] == "+"  # a last piece of exactly 400 is followed by "+"
            joined = "".join(piece for piece in pieces if piece != "+")
            assert base64.b64decode(joined).decode().endswith(password)
            assert fake.logins == ["habakkuk"]
        finally:
            await running.stop()


async def test_a_refused_sasl_password_is_fatal_with_one_line(fake: FakeIrc) -> None:
    adapter = adapter_for(fake, "wrong")
    with pytest.raises(FatalAdapterError, match="SASL login as habakkuk refused"):
        await adapter.run(lambda message: asyncio.sleep(0), lambda: None)


async def test_sasl_on_a_server_without_it_is_fatal_and_says_how_to_turn_it_off() -> None:
    async with FakeIrc(caps=("message-tags",)) as fake:
        with pytest.raises(FatalAdapterError, match="sasl: false"):
            await adapter_for(fake).run(lambda message: asyncio.sleep(0), lambda: None)


async def test_a_nick_in_use_is_retried_with_an_underscore() -> None:
    async with FakeIrc(taken=("habakkuk", "habakkuk_"), caps=()) as fake:
        running = Running(adapter_for(fake, sasl=False))
        try:
            await running.up.wait()
            assert running.adapter.conn is not None
            assert running.adapter.conn.nick == "habakkuk__"
            fake.say("hello")
            await eventually(lambda: running.inbox, what="the message to the new nick")
        finally:
            await running.stop()


def test_next_nick_appends_then_counts() -> None:
    assert next_nick("bot", "bot") == "bot_"
    assert next_nick("bot__", "bot") == "bot_0"
    assert next_nick("bot_0", "bot") == "bot_1"
    with pytest.raises(FatalAdapterError):
        next_nick("bot_9", "bot")


async def test_a_dropped_connection_ends_the_run_for_the_supervisor_to_reconnect(
    fake: FakeIrc,
) -> None:
    running = Running(adapter_for(fake))
    await running.up.wait()
    fake.drop()
    await asyncio.wait_for(running.task, 20)  # returns: the supervisor starts a new run
    assert running.adapter.conn is None
    again = Running(running.adapter)
    try:
        await again.up.wait()
        assert fake.connections == 2
    finally:
        await again.stop()


async def test_a_message_carries_its_msgid_time_and_account(fake: FakeIrc) -> None:
    running = Running(adapter_for(fake))
    try:
        await running.up.wait()
        fake.say("\x02hi\x02 there", msgid="abc", account="alice")
        fake.say("!new")
        fake.say("\x01VERSION\x01")
        fake.say("habakkuk: in the room", target="#room")
        fake.say("nobody is talking to the bot", target="#room")
        await eventually(lambda: len(running.inbox) == 4, what="four messages")
        first, command, room, chatter = running.inbox
        assert (first.message_id, first.text, first.chat, first.is_group) == (
            "abc", "hi there", ALICE, False,
        )  # fmt: skip
        assert "account:alice" in first.sender_aliases and first.at > 0
        assert command.text == "/new"
        assert (room.chat, room.text, room.is_group, room.addressed) == (
            "#room", "in the room", True, True,
        )  # fmt: skip
        assert (chatter.addressed, chatter.is_group) == (False, True)
    finally:
        await running.stop()


def test_parse_reads_tags_prefix_and_trailing() -> None:
    line = parse_line(r"@msgid=a\sb\:c;time=t :nick!u@h PRIVMSG #room :hello there")
    assert line.tags == {"msgid": "a b;c", "time": "t"}
    assert (line.nick, line.userhost, line.command) == ("nick", ("u", "h"), "PRIVMSG")
    assert line.params == ("#room", "hello there")
    assert format_line("PRIVMSG", "#room", "hi there") == b"PRIVMSG #room :hi there\r\n"
    with pytest.raises(ValueError):
        format_line("PRIVMSG", "#room", "two\r\nQUIT")


def test_split_text_never_cuts_inside_a_character_and_prefers_spaces() -> None:
    pieces = split_text("ü" * 30, 11)
    assert all(len(p.encode()) <= 11 for p in pieces) and "".join(pieces) == "ü" * 30
    assert split_text("alpha bravo charlie", 12) == ["alpha bravo", "charlie"]
    assert split_text("   ", 20) == []


def test_the_pacer_lets_a_burst_through_then_one_line_a_second() -> None:
    now = [100.0]
    pacer = Pacer(burst=3, interval=1.0, clock=lambda: now[0])
    assert [pacer.take() for _ in range(5)] == [0.0, 0.0, 0.0, 1.0, 2.0]
    now[0] += 10.0  # quiet for a while: the bucket is full again, not more
    assert [pacer.take() for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]


def test_markdown_renders_as_irc_lines_each_a_chunk() -> None:
    lines = irc_lines("# Title\n\n**bold** and `code`\n\n- one\n- [site](https://x.org)\n")
    assert lines == [
        "\x02Title\x02",
        "\x02bold\x02 and \x11code\x11",
        "• one",
        "• site (https://x.org)",
    ]
    assert plain(lines[1]) == "bold and code"
    long = irc_lines("word " * 400)
    assert len(long) > 1 and all(len(line.encode()) <= RENDER_BUDGET for line in long)
    assert irc_lines("") == ["…"]


async def test_a_server_that_never_welcomes_us_ends_the_run_with_a_retryable_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import habakkuk.channels.irc as irc

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)  # reads everything, answers nothing
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setattr(irc, "REGISTER_TIMEOUT", 0.2)
    config = ChannelConfig(type="irc", server=f"127.0.0.1:{port}", nick="hk", tls=False)
    config.name = "irc"
    config.sasl = False
    adapter = IrcAdapter(config, login_of(config, ""))
    try:
        with pytest.raises(SendError, match="no welcome from the server"):
            await adapter.run(lambda message: asyncio.sleep(0), lambda: None)
    finally:
        server.close()
        await server.wait_closed()
