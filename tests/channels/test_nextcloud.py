"""Nextcloud Talk end to end: the fake Talk calls our HTTP server's /channels/<account>
with signed webhooks and reads the replies from its bot API; forged, replayed, wrong-key,
other-server and truncated requests get 401 and start no turn; the signature of our
sends; placeholders written out; bots not answered; the setup check; config checks."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from habakkuk.channels.adapter import Address, FatalAdapterError
from habakkuk.channels.nextcloud import TalkAdapter
from habakkuk.channels.nextcloud_setup import check_setup
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.channels.webhook import WebhookDoor
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_talk import ALICE, ROOM, SECRET, FakeTalk, TalkDriver, sign
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"


@dataclass
class Talk:
    """A runtime with a Talk bot account, its HTTP server, and the fake Talk calling it."""

    runtime: Runtime
    talk: FakeTalk
    driver: TalkDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> TalkAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("talk")
        assert isinstance(found, TalkAdapter)
        return found


Start = Callable[[], Awaitable[Talk]]


@pytest.fixture
async def talk(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTalk]:
    async with FakeTalk() as fake:
        monkeypatch.setenv("TALK_TEST_SECRET", fake.secret)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, talk: FakeTalk, home: Home) -> Start:
    async def _start() -> Talk:
        driver = TalkDriver(talk)
        channel = "channels:\n  talk:\n" + textwrap.indent(driver.channel_yaml("talk"), "    ")
        runtime: Runtime = await runtime_factory(mock_config(ECHO, extra=channel + "http: {}\n"))
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        talk.webhook_url = f"{server.url}/channels/talk"
        assert runtime.channels is not None
        await runtime.channels.started()
        up = await runtime.channels.supervisor.wait_adapter("talk", timeout=PROCESS_BOUND)
        assert up is not None
        return Talk(runtime, talk, driver, home)

    return _start


async def test_forged_and_replayed_requests_get_401_and_start_no_turn(
    start: Start, talk: FakeTalk
) -> None:
    chat = await start()
    genuine = talk.message("genuine")
    other = talk.message("another")
    forged = {
        "no signature": replace(talk.message("a"), signature=""),
        "garbage signature": replace(talk.message("b"), signature="00" * 32),
        "wrong key": replace(
            (m := talk.message("c")), signature=sign("not-the-secret" * 4, m.random, m.body)
        ),
        "body changed after signing": replace(
            genuine, body=genuine.body.replace(b"genuine", b"forged!")
        ),
        "truncated body": replace(genuine, body=genuine.body[: len(genuine.body) // 2]),
        "signature of another body": replace(genuine, signature=other.signature),
        "another random": replace(genuine, random="f" * 64),
        "short random": replace(genuine, random="", signature=sign(SECRET, "", genuine.body)),
        "another server": replace(genuine, backend="https://evil.example"),
    }
    for what, hook in forged.items():
        status, _ = await talk.call(hook)
        assert status == 401, what
    assert chat.adapter().refused == len(forged)
    assert (await talk.call(genuine))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: genuine"], what="the genuine reply")
    assert (await talk.call(genuine))[0] == 401  # the same request again: a replay
    assert chat.adapter().refused == len(forged) + 1
    assert len(chat.turns()) == 1


async def test_a_resent_message_with_a_new_random_starts_no_second_turn(
    start: Start, talk: FakeTalk
) -> None:
    chat = await start()
    first = talk.message("once")
    assert (await talk.call(first))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: once"], what="the reply")
    random = "e" * 64  # the same message signed afresh (a retry after a lost answer)
    again = replace(first, random=random, signature=sign(SECRET, random, first.body))
    assert (await talk.call(again))[0] == 200
    await chat.driver.say("next")
    await eventually(lambda: len(chat.driver.texts()) == 2, what="the second reply")
    assert chat.driver.texts() == ["echo: once", "echo: next"]
    assert len(chat.turns()) == 2
    [reply, _] = talk.posted
    assert reply.room == ROOM and len(reply.reference) == 64


async def test_placeholders_are_written_out_and_bots_are_not_answered(
    talk: FakeTalk, tmp_path: Any
) -> None:
    config = ChannelConfig(type="nextcloud", base_url=talk.base_url, token_env="T")
    config.name = "talk"
    adapter = TalkAdapter(config, WebhookDoor(), SECRET)
    parameters = {
        "mention-user1": {"type": "user", "id": "bob", "name": "Bob"},
        "file": {"type": "file", "id": "42", "name": "plan.pdf"},
    }
    hook = talk.message("ask {mention-user1} about {file}", parameters=parameters)
    event = json.loads(hook.body)
    message = adapter.convert(event)
    assert message is not None
    assert (message.text, message.sender, message.sender_aliases) == (
        "ask @Bob about plan.pdf",
        ALICE,
        [f"users/{ALICE}"],
    )
    assert (message.chat, message.is_group, message.addressed) == (ROOM, False, True)
    event["actor"]["id"] = "bots/abc123"
    assert adapter.convert(event) is None
    event["type"] = "Join"
    assert adapter.convert(event) is None


async def test_sends_are_signed_and_a_refused_signature_is_fatal(talk: FakeTalk) -> None:
    config = ChannelConfig(type="nextcloud", base_url=talk.base_url, token_env="T")
    config.name = "talk"
    adapter = TalkAdapter(config, WebhookDoor(), SECRET)
    reference = await adapter.send_text(Address("talk", ROOM), "**hi**", reply_to="1001")
    [posted] = talk.posted
    assert (posted.message, posted.reference, posted.reply_to) == ("**hi**", reference, 1001)
    wrong = TalkAdapter(config, WebhookDoor(), "x" * 48)
    with pytest.raises(FatalAdapterError, match="HTTP 401"):
        await wrong.send_text(Address("talk", ROOM), "hi")
    assert talk.refused_sends == 1
    await adapter.close()
    await wrong.close()


async def test_setup_checks_the_server_and_the_secret(talk: FakeTalk) -> None:
    config = ChannelConfig(type="nextcloud", base_url=talk.base_url, token_env="T")
    said = await check_setup(config, {"T": SECRET})
    assert said == f"Nextcloud 29.0.1 at 127.0.0.1:{talk.port}"
    with pytest.raises(SetupCheckFailed, match="Talk needs 40 to 128"):
        await check_setup(config, {"T": "short"})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("token_env: K", "base_url: a nextcloud channel needs this"),
        ("base_url: https://cloud.example", "token_env: a nextcloud channel needs this"),
        ("base_url: cloud.example\ntoken_env: K", "base_url: 'cloud.example' is not an http"),
    ],
)
def test_a_nextcloud_entry_is_checked(entry: str, message: str, home: Home) -> None:
    text = (
        "providers:\n  demo: {type: mock}\nagents:\n  main: {model: demo/echo}\n"
        "channels:\n  t:\n    type: nextcloud\n"
        + "".join(f"    {line}\n" for line in entry.splitlines())
    )
    with pytest.raises(ConfigError, match=rf"config.yaml:\d+: channels\.t\.{message}"):
        parse_config(text, home.config_path, home)
