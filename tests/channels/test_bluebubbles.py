"""iMessage through BlueBubbles end to end: the fake BlueBubbles server calls our HTTP
server's /channels/<account>/<secret>, and reads the replies back from its REST API."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from habakkuk.channels.adapter import FatalAdapterError
from habakkuk.channels.bluebubbles import BlueBubblesAdapter
from habakkuk.channels.bluebubbles_wire import BlueBubblesApi
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_bluebubbles import (
    ALICE,
    ALICE_CHAT,
    BOB,
    GROUP_CHAT,
    PASSWORD,
    SECRET,
    BlueBubblesDriver,
    FakeBlueBubbles,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"


@dataclass
class Imessage:
    """A runtime with a bluebubbles account, its HTTP server, and the fake server."""

    runtime: Runtime
    server: FakeBlueBubbles
    driver: BlueBubblesDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> BlueBubblesAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("imessage")
        assert isinstance(found, BlueBubblesAdapter)
        return found

    async def state(self) -> str:
        assert self.runtime.channels is not None
        return self.runtime.channels.supervisor.states().get("imessage", "")


Start = Callable[..., Awaitable[Imessage]]


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeBlueBubbles]:
    """The fake BlueBubbles server; its password and secret are in the driver's variables."""
    async with FakeBlueBubbles() as fake:
        for variable, value in BlueBubblesDriver(fake).env().items():
            monkeypatch.setenv(variable, value)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, server: FakeBlueBubbles, home: Home) -> Start:
    """Open a runtime with the bluebubbles account, start its server; BlueBubbles points
    its webhook at it."""

    async def _start(script: str = ECHO, *, extra: str = "", wait: bool = True) -> Imessage:
        driver = BlueBubblesDriver(server)
        entry = driver.channel_yaml("imessage")
        if extra:
            entry = entry.replace(f'allow_from: ["{ALICE}"]\n', extra)
        config = "channels:\n  imessage:\n" + textwrap.indent(entry, "    ") + "http: {}\n"
        runtime: Runtime = await runtime_factory(mock_config(script, mode="full", extra=config))
        runtime.start_workers()
        http = await runtime.http.start("127.0.0.1:0")
        server.webhook_url = f"{http.url}/channels/imessage"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("imessage", timeout=PROCESS_BOUND)
            assert up is not None
        return Imessage(runtime, server, driver, home)

    return _start


async def test_a_text_gets_one_reply_through_the_rest_api(
    start: Start, server: FakeBlueBubbles
) -> None:
    chat = await start()
    await chat.driver.say("hello")
    await eventually(lambda: chat.driver.texts() == ["echo: hello"], what="the reply")
    [sent] = server.sent
    assert sent.chat == ALICE_CHAT and sent.temp_guid.startswith("habakkuk-")


async def test_a_redelivered_message_and_our_own_start_no_turn(
    start: Start, server: FakeBlueBubbles
) -> None:
    chat = await start()
    event = server.message(ALICE, "once")
    assert (await server.post(event))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: once"], what="the reply")
    assert (await server.post(event))[0] == 200  # the server resends a failed webhook
    # Our own reply comes back as a new message from us: it is not a message to answer.
    assert (await server.post(server.message(ALICE, "echo: once", from_me=True)))[0] == 200
    await chat.driver.say("next")
    await eventually(lambda: len(chat.driver.texts()) == 2, what="the second reply")
    assert chat.driver.texts() == ["echo: once", "echo: next"]
    assert len(chat.turns()) == 2


async def test_requests_without_the_url_secret_get_403_and_start_no_turn(
    start: Start, server: FakeBlueBubbles
) -> None:
    chat = await start()
    base = server.webhook_url
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no secret": server.post(server.message(ALICE, "a"), secret=""),
        "wrong secret": server.post(server.message(ALICE, "b"), secret="x" * len(SECRET)),
        "truncated secret": server.post(server.message(ALICE, "c"), secret=SECRET[:-1]),
        "secret and more": server.post(server.message(ALICE, "d"), secret=SECRET + "0"),
        "secret in another case": server.post(server.message(ALICE, "e"), secret=SECRET.upper()),
        "secret as a query": server.post(
            server.message(ALICE, "f"), url=f"{base}?password={SECRET}"
        ),
        "the server password instead": server.post(server.message(ALICE, "g"), secret=PASSWORD),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert chat.adapter().refused == len(forged)
    # With the secret, a cut-off body is no event: 400, and nothing starts.
    assert (await server.post(b'{"type": "new-message", "da'))[0] == 400
    await chat.driver.say("genuine")
    await eventually(lambda: chat.driver.texts() == ["echo: genuine"], what="the genuine reply")
    assert len(chat.turns()) == 1


async def test_in_a_group_only_a_message_naming_the_bot_is_answered(
    start: Start, server: FakeBlueBubbles
) -> None:
    chat = await start(extra=f'allow_from: ["{ALICE}", "{BOB}"]\nnick: Habby\n')
    await server.post(server.message(BOB, "dinner at eight?", chat=GROUP_CHAT))
    await server.post(server.message(ALICE, "Habby, what is the weather", chat=GROUP_CHAT))
    await eventually(lambda: len(server.to(GROUP_CHAT)) == 1, what="the group reply")
    assert server.to(GROUP_CHAT)[0].text == "echo: what is the weather"
    await server.post(server.message(BOB, "@habby hi", chat=GROUP_CHAT))
    await eventually(lambda: len(server.to(GROUP_CHAT)) == 2, what="the @ reply")
    assert server.to(GROUP_CHAT)[1].text == "echo: hi"
    assert len(chat.turns()) == 2


async def test_a_stranger_is_given_a_pairing_code(start: Start, server: FakeBlueBubbles) -> None:
    chat = await start()
    await server.post(server.message(BOB, "hi"))
    await eventually(lambda: len(server.to(f"iMessage;-;{BOB}")) == 1, what="the pairing answer")
    assert "habakkuk pair" in server.to(f"iMessage;-;{BOB}")[0].text
    assert chat.turns() == []


async def test_a_restarting_account_answers_503_so_the_server_retries(
    start: Start, server: FakeBlueBubbles
) -> None:
    server.refuse_password = True
    chat = await start(wait=False)

    async def fatal() -> bool:
        return await chat.state() == "fatal"

    await eventually(fatal, what="the account to be fatal")
    status, text = await server.post(server.message(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert chat.turns() == []


async def test_a_short_secret_is_refused_before_it_serves(
    start: Start, server: FakeBlueBubbles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BB_TEST_SECRET", "short")
    chat = await start(wait=False)

    async def fatal() -> bool:
        return await chat.state() == "fatal"

    await eventually(fatal, what="the account to be fatal")
    # `habakkuk channels` shows why (the account's recorded error).
    found = rows(chat.home, "SELECT * FROM channel_status WHERE account = 'imessage'")
    assert any("under 16 characters" in str(tuple(row)) for row in found)


async def test_a_secret_path_on_a_platform_without_one_is_not_found(
    start: Start, server: FakeBlueBubbles
) -> None:
    await start()
    status, _ = await server.post(
        server.message(ALICE, "x"), url=server.webhook_url.replace("imessage", "nope") + "/s"
    )
    assert status == 404


async def test_errors_never_carry_the_password(server: FakeBlueBubbles) -> None:
    async with aiohttp.ClientSession() as http:
        refused = BlueBubblesApi(server.base_url, "not-the-password-123", http)
        with pytest.raises(FatalAdapterError) as caught:
            await refused.info()
        assert "not-the-password-123" not in str(caught.value)
        gone = BlueBubblesApi("http://127.0.0.1:9", PASSWORD, http)
        with pytest.raises(Exception) as failed:
            await gone.send_text(ALICE_CHAT, "hi", "g")
        assert PASSWORD not in str(failed.value)


def test_config_needs_the_server_its_password_and_the_secret(home: Home) -> None:
    base = "channels:\n  imessage:\n    type: bluebubbles\n    password_env: BB_PASSWORD\n"
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.imessage.base_url: a blue"):
        parse_config(base + "    secret_env: BB_SECRET\n", home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.imessage.secret_env: a bluebubbles"):
        parse_config(base + "    base_url: http://mac:1234\n", home.config_path, home)
    full = base + "    base_url: http://mac:1234\n    secret_env: BB_SECRET\n"
    with pytest.raises(ConfigError, match=r"channels.imessage.nick: 'two words' is not one"):
        parse_config(full + "    nick: two words\n", home.config_path, home)
    config = parse_config(full, home.config_path, home)
    assert config.channels["imessage"].secret_env == "BB_SECRET"


async def test_setup_checks_the_server_and_password(server: FakeBlueBubbles) -> None:
    setup = platform_module("bluebubbles").SETUP
    config = ChannelConfig(
        type="bluebubbles", base_url=server.base_url, password_env="P", secret_env="S"
    )
    assert "1.9.9" in await setup.check(config, {"P": PASSWORD, "S": SECRET})
    with pytest.raises(SetupCheckFailed, match="refused the password"):
        await setup.check(config, {"P": "wrong", "S": SECRET})
    with pytest.raises(SetupCheckFailed, match="16 characters"):
        await setup.check(config, {"P": PASSWORD, "S": "short"})
