"""IRC end to end in-process: over TLS to a real ngircd, in a channel where the bot
answers only when addressed; and back after the server drops the connection (the fake)."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from habakkuk.runtime import Runtime
from tests.channels.fake_irc import ALICE, FakeIrc
from tests.channels.irc_driver import BOT_NICK
from tests.channels.ngircd_server import IrcPerson, Ngircd
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"


async def started(runtime_factory: Any, entry: str) -> Runtime:
    channel = "channels:\n  irc:\n" + textwrap.indent(entry, "    ")
    runtime: Runtime = await runtime_factory(mock_config(ECHO, mode="full", extra=channel))
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    up = await runtime.channels.supervisor.wait_adapter("irc", timeout=PROCESS_BOUND)
    assert up is not None, "the irc adapter did not connect"
    return runtime


async def turns(runtime: Runtime) -> int:
    rows = await runtime.queue.db.fetchall("SELECT id FROM jobs WHERE kind = 'turn'")
    return len(rows)


async def test_over_tls_in_a_channel_the_bot_answers_only_when_addressed(
    ngircd: Ngircd, runtime_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(ngircd.cert))  # trust the throwaway certificate
    person = IrcPerson(ngircd.port, "alice")
    await person.connect()
    try:
        await person.join("#room")
        runtime = await started(
            runtime_factory,
            f"type: irc\nserver: 127.0.0.1:{ngircd.tls_port}\nsasl: false\n"
            f'nick: {BOT_NICK}\njoin: ["#room"]\nallow_from: ["alice"]\n',
        )
        await eventually(
            lambda: any(
                line.startswith(f":{BOT_NICK}!") and " JOIN " in line for line in person.lines
            ),
            what="the bot to join #room",
        )
        person.say("#room", "just chatting among people")
        person.say("#room", f"{BOT_NICK}: hello")

        def in_room() -> list[str]:
            return [text for who, where, text in person.got if who == BOT_NICK and where == "#room"]

        await eventually(lambda: in_room() == ["echo: hello"], what="the answer in #room")
        assert await turns(runtime) == 1  # the chatter started no turn
    finally:
        await person.close()


async def test_the_bot_comes_back_after_the_server_drops_it(runtime_factory: Any) -> None:
    async with FakeIrc() as fake:
        await started(
            runtime_factory,
            f"type: irc\nserver: 127.0.0.1:{fake.port}\ntls: false\nsasl: false\n"
            f'nick: {BOT_NICK}\nallow_from: ["{ALICE}"]\n',
        )
        fake.say("one")
        await eventually(lambda: fake.texts() == ["echo: one"], what="the first answer")
        fake.drop()
        await fake.registered(2)
        fake.say("two")
        await eventually(
            lambda: fake.texts() == ["echo: one", "echo: two"], what="the answer after it"
        )
