"""Messenger and Instagram end to end: the fake Send API (tests/channels/fake_messenger.py)
calls our HTTP server's /channels/<account> with signed events, and reads the replies back
from POST /me/messages. Each test runs on both platforms."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.channels.messenger import MessengerAdapter
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_graph import APP_SECRET, GraphError, hub_signature
from tests.channels.fake_messenger import (
    ALICE,
    MALLORY,
    PAGE_ID,
    PAGE_TOKEN,
    FakeMessenger,
    MessengerDriver,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"
ACCOUNT = "fb"


@dataclass
class Page:
    """A runtime with a messenger or instagram account, its server, and the fake."""

    runtime: Runtime
    fake: FakeMessenger
    driver: MessengerDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def failed(self) -> list[str]:
        sql = "SELECT error FROM jobs WHERE kind <> 'turn' AND status = 'failed'"
        return [str(r["error"]) for r in rows(self.home, sql)]

    def adapter(self) -> MessengerAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter(ACCOUNT)
        assert isinstance(found, MessengerAdapter)
        return found

    def state(self) -> str:
        assert self.runtime.channels is not None
        return self.runtime.channels.supervisor.states().get(ACCOUNT, "")


Start = Callable[..., Awaitable[Page]]


@pytest.fixture(params=["messenger", "instagram"])
async def fake(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[FakeMessenger]:
    """The fake platform; its secrets are in the variables the account names."""
    async with FakeMessenger(request.param) as found:
        for name, value in MessengerDriver(found).env().items():
            monkeypatch.setenv(name, value)
        yield found


@pytest.fixture
def start(runtime_factory: Any, fake: FakeMessenger, home: Home) -> Start:
    """Open a runtime with the account, start its server; the webhook points at it."""

    async def _start(script: str = ECHO, *, wait: bool = True) -> Page:
        driver = MessengerDriver(fake)
        channel = f"channels:\n  {ACCOUNT}:\n" + textwrap.indent(
            driver.channel_yaml(ACCOUNT), "    "
        )
        runtime: Runtime = await runtime_factory(
            mock_config(script, mode="full", extra=channel + "http: {}\n")
        )
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        fake.webhook_url = f"{server.url}/channels/{ACCOUNT}"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter(ACCOUNT, timeout=PROCESS_BOUND)
            assert up is not None
        return Page(runtime, fake, driver, home)

    return _start


async def test_a_message_gets_one_reply_and_echoes_are_not_messages(
    start: Start, fake: FakeMessenger
) -> None:
    page = await start()
    echo = fake.event(PAGE_ID, message={"mid": fake.mid(), "text": "ours", "is_echo": True})
    assert (await fake.post(echo))[0] == 200
    await page.driver.say("hello")
    await eventually(lambda: page.driver.texts() == ["echo: hello"], what="the reply")
    assert len(page.turns()) == 1


async def test_a_redelivered_event_starts_no_second_turn(start: Start, fake: FakeMessenger) -> None:
    page = await start()
    event = fake.text(ALICE, "once")
    assert (await fake.post(event))[0] == 200
    await eventually(lambda: page.driver.texts() == ["echo: once"], what="the reply")
    assert (await fake.post(event))[0] == 200  # Meta's retry: the same mid, signed again
    await page.driver.say("next")
    await eventually(lambda: len(page.driver.texts()) == 2, what="the second reply")
    assert page.driver.texts() == ["echo: once", "echo: next"]
    assert len(page.turns()) == 2


async def test_forged_requests_get_403_and_start_no_turn(start: Start, fake: FakeMessenger) -> None:
    page = await start()
    genuine = json.dumps(fake.text(ALICE, "genuine")).encode()
    other = json.dumps(fake.text(MALLORY, "other")).encode()
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": fake.post(fake.text(ALICE, "a"), signature=""),
        "garbage signature": fake.post(fake.text(ALICE, "b"), signature="sha256=00ff"),
        "wrong key": fake.post(fake.text(ALICE, "c"), secret="not-the-app-secret"),
        "body changed after signing": fake.post(
            body=genuine.replace(b"genuine", b"forged!"), signed_body=genuine
        ),
        "truncated body": fake.post(body=genuine[: len(genuine) // 2], signed_body=genuine),
        "signature of another body": fake.post(body=genuine, signed_body=other),
        "bare hex": fake.post(body=genuine, signature=hub_signature(APP_SECRET, genuine)[7:]),
        "handshake with a wrong verify token": fake.handshake(token="guess"),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert page.adapter().refused == len(forged)
    assert page.turns() == [] and fake.sent == []
    assert await fake.handshake(challenge="31337") == (200, "31337")
    assert (await fake.post(body=genuine))[0] == 200
    await eventually(lambda: page.driver.texts() == ["echo: genuine"], what="the genuine reply")
    assert (await fake.post(body=genuine))[0] == 200  # replayed: taken, dropped
    await page.driver.say("after")
    await eventually(lambda: len(page.driver.texts()) == 2, what="the next reply")
    assert len(page.turns()) == 2


async def test_outside_the_24_hour_window_the_delivery_fails_saying_why(
    start: Start, fake: FakeMessenger
) -> None:
    page = await start()
    fake.errors.append(
        GraphError(400, 10, "This message is sent outside of allowed window.", 2018278)
    )
    await page.driver.say("late")
    await eventually(lambda: page.failed() != [], what="the failure")
    [error] = page.failed()
    assert "outside of allowed window" in error and "subcode 2018278" in error
    assert fake.attempts == 1 and fake.sent == []  # no retry can help
    assert page.state() == "connected"  # code 10 with this subcode is no permission problem


async def test_a_rate_limit_is_waited_out_and_the_reply_goes(
    start: Start, fake: FakeMessenger
) -> None:
    page = await start()
    fake.errors.append(
        GraphError(
            400,
            613,
            "Calls to this api have exceeded the rate limit.",
            headers={"Retry-After": "1"},
        )
    )
    await page.driver.say("busy?")
    await eventually(lambda: page.driver.texts() == ["echo: busy?"], what="the reply")
    assert fake.attempts == 2


async def test_a_revoked_token_makes_the_account_fatal(start: Start, fake: FakeMessenger) -> None:
    page = await start()
    fake.refuse_token = True
    await page.driver.say("hello")
    await eventually(lambda: page.state() == "fatal", what="the account to be fatal")
    status, text = await fake.post(fake.text(ALICE, "while down"))
    assert status == 503 and "restarting" in text


def test_config_asks_for_the_app_secret_and_refuses_whatsapp_settings(home: Home) -> None:
    base = "channels:\n  fb:\n    type: messenger\n    token_env: T\n    verify_token_env: V\n"
    with pytest.raises(
        ConfigError, match=r"config.yaml:\d+: channels.fb.app_secret_env: a messenger"
    ):
        parse_config(base, home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.fb.template: is not a setting of a messenger"):
        parse_config(base + "    app_secret_env: S\n    template: x\n", home.config_path, home)
    config = parse_config(base + "    app_secret_env: S\n", home.config_path, home)
    assert config.channels["fb"].app_secret_env == "S"


async def test_setup_checks_the_token(fake: FakeMessenger) -> None:
    setup = platform_module(fake.kind).SETUP
    config = ChannelConfig(type=fake.kind, token_env="T", base_url=fake.base_url)  # type: ignore[arg-type]  # messenger or instagram
    assert await setup.check(config, {"T": PAGE_TOKEN}) == f"Test Page ({PAGE_ID})"
    with pytest.raises(SetupCheckFailed, match="Meta refused the access token"):
        await setup.check(config, {"T": "wrong"})


async def test_typing_is_a_sender_action(fake: FakeMessenger, home: Home) -> None:
    from habakkuk.channels.adapter import Address
    from habakkuk.channels.messenger import build
    from habakkuk.channels.platforms import AdapterContext

    config = parse_config(
        mock_config(
            extra=f"channels:\n  {ACCOUNT}:\n"
            + textwrap.indent(MessengerDriver(fake).channel_yaml(ACCOUNT), "    ")
        ),
        home.config_path,
        home,
    ).channels[ACCOUNT]
    context = AdapterContext(MessengerDriver(fake).env(), None, home.channels_dir)  # type: ignore[arg-type]  # build reads no store
    adapter = build(config, context)
    try:
        await adapter.typing(Address(ACCOUNT, ALICE))
    finally:
        await adapter.close()
    assert fake.actions == [(ALICE, "typing_on")]
