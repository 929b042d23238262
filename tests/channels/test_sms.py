"""SMS through Twilio end to end: the fake Twilio calls our HTTP server's /channels/<account>
with signed requests, and reads the replies back from its Messages API."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.channels.sms import SmsAdapter
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_twilio import ALICE, BOT_NUMBER, MALLORY, SID, FakeTwilio, SmsDriver
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"
APPROVAL = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""
SEND_FILE = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt", caption: "the report"}
- "sent"
"""


@dataclass
class Sms:
    """A runtime with an sms account, its HTTP server, and the fake Twilio calling it."""

    runtime: Runtime
    twilio: FakeTwilio
    driver: SmsDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> SmsAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("sms")
        assert isinstance(found, SmsAdapter)
        return found


Start = Callable[..., Awaitable[Sms]]


@pytest.fixture
async def twilio(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTwilio]:
    """The fake Twilio; $TWILIO_TEST_TOKEN is its auth token."""
    async with FakeTwilio() as fake:
        monkeypatch.setenv("TWILIO_TEST_TOKEN", fake.token)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, twilio: FakeTwilio, home: Home) -> Start:
    """Open a runtime with the sms account, start its server; Twilio points at it."""

    async def _start(
        script: str = ECHO, *, mode: str = "full", http: str = "http: {}\n", wait: bool = True
    ) -> Sms:
        driver = SmsDriver(twilio)
        channel = "channels:\n  sms:\n" + textwrap.indent(driver.channel_yaml("sms"), "    ")
        runtime: Runtime = await runtime_factory(
            mock_config(script, mode=mode, extra=channel + http)
        )
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        twilio.webhook_url = f"{server.url}/channels/sms"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("sms", timeout=PROCESS_BOUND)
            assert up is not None
        return Sms(runtime, twilio, driver, home)

    return _start


async def test_a_text_gets_one_reply_by_sms(start: Start, twilio: FakeTwilio) -> None:
    sms = await start()
    await sms.driver.say("hello")
    await eventually(lambda: sms.driver.texts() == ["echo: hello"], what="the reply")
    [sent] = twilio.sent
    assert (sent.sender, sent.to) == (BOT_NUMBER, ALICE)


async def test_a_redelivered_message_starts_no_second_turn(
    start: Start, twilio: FakeTwilio
) -> None:
    sms = await start()
    params = twilio.message(ALICE, "once")
    assert (await twilio.post(params))[0] == 200
    await eventually(lambda: sms.driver.texts() == ["echo: once"], what="the reply")
    # Twilio retries a request it thinks failed: the same MessageSid, signed again.
    assert (await twilio.post(params))[0] == 200
    await sms.driver.say("next")
    await eventually(lambda: len(sms.driver.texts()) == 2, what="the second reply")
    assert sms.driver.texts() == ["echo: once", "echo: next"]
    assert len(sms.turns()) == 2


async def test_forged_requests_get_403_and_start_no_turn(start: Start, twilio: FakeTwilio) -> None:
    sms = await start()
    genuine = twilio.message(ALICE, "genuine")
    other_url = twilio.webhook_url.replace("/channels/sms", "/channels/other")
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": twilio.post(twilio.message(ALICE, "a"), signature=""),
        "garbage signature": twilio.post(twilio.message(ALICE, "b"), signature="AAAA"),
        "wrong key": twilio.post(twilio.message(ALICE, "c"), token="not-the-auth-token"),
        "signed for another URL": twilio.post(twilio.message(ALICE, "d"), signed_url=other_url),
        "body changed after signing": twilio.post(
            genuine, body=b"MessageSid=SMforged&From=%2B15557654321&Body=forged"
        ),
        "truncated body": twilio.post(genuine, body=_form(genuine)[: len(_form(genuine)) // 2]),
        "not a form": twilio.post(genuine, body=b"\xff\xfe\x00"),
        "signature of another body": twilio.post(
            twilio.message(ALICE, "e"),
            signature=_signature_of(twilio, twilio.message(MALLORY, "e")),
        ),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert sms.adapter().refused == len(forged)
    assert (await twilio.post(genuine))[0] == 200
    await eventually(lambda: sms.driver.texts() == ["echo: genuine"], what="the genuine reply")
    assert len(sms.turns()) == 1


def _form(params: list[tuple[str, str]]) -> bytes:
    from urllib.parse import urlencode

    return urlencode(params).encode()


def _signature_of(twilio: FakeTwilio, params: list[tuple[str, str]]) -> str:
    from tests.channels.fake_twilio import twilio_signature

    return twilio_signature(twilio.token, twilio.webhook_url, params)


async def test_behind_a_proxy_the_public_url_is_what_is_signed(
    start: Start, twilio: FakeTwilio, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_TEST_TOKEN", "api-token-0123456789")
    public = "https://bot.example.org"
    sms = await start(http=f"http:\n  token_env: HTTP_TEST_TOKEN\n  public_url: {public}\n")
    # Signed over the request's own address: not what Twilio called, refused.
    assert (await twilio.post(twilio.message(ALICE, "direct")))[0] == 403
    # Signed over the public address (the proxy forwards to us): taken, without the API token.
    status, _ = await twilio.post(
        twilio.message(ALICE, "proxied"), signed_url=f"{public}/channels/sms"
    )
    assert status == 200
    await eventually(lambda: sms.driver.texts() == ["echo: proxied"], what="the reply")


async def test_a_restarting_account_answers_503_so_twilio_retries(
    start: Start, twilio: FakeTwilio
) -> None:
    twilio.refuse_token = True  # the adapter's check of the account fails: it is not up
    sms = await start(wait=False)
    assert sms.runtime.channels is not None

    async def state() -> str:
        assert sms.runtime.channels is not None
        return sms.runtime.channels.supervisor.states().get("sms", "")

    await eventually(lambda: _is(state, "fatal"), what="the account to be fatal")
    status, text = await twilio.post(twilio.message(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert sms.turns() == []


async def _is(state: Callable[[], Awaitable[str]], wanted: str) -> bool:
    return await state() == wanted


async def test_approval_by_a_typed_yes(start: Start, twilio: FakeTwilio) -> None:
    sms = await start(APPROVAL, mode="workspace")
    await sms.driver.say("run the thing")
    await eventually(
        lambda: any("Approval needed" in t for t in sms.driver.texts()), what="the approval"
    )
    await sms.driver.say("yes")
    await eventually(lambda: any("all done" in t for t in sms.driver.texts()), what="done")
    assert sms.turns() == ["done"]


async def test_an_mms_reaches_the_workspace(start: Start, twilio: FakeTwilio, home: Home) -> None:
    sms = await start()
    await sms.driver.send_file("notes.txt", b"apples\n", "text/plain", caption="read this")
    await eventually(
        lambda: any("echo: read this" in t for t in sms.driver.texts()), what="the reply"
    )
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.read_bytes() == b"apples\n"


async def test_a_file_goes_as_mms_twilio_fetches_by_a_one_hour_url(
    start: Start, twilio: FakeTwilio, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_bytes(b"numbers\n")
    sms = await start(SEND_FILE)
    await sms.driver.say("send me the report")
    await eventually(lambda: any(t == "sent" for t in sms.driver.texts()), what="the reply")
    assert sms.driver.files() == [("text/plain", b"numbers\n")]
    # The URL is under the account's path with an unguessable token; a guess finds nothing.
    async with twilio._client.get(f"{twilio.webhook_url}/media/guess") as response:  # type: ignore[union-attr]  # the fake is started
        assert response.status == 404


async def test_the_channels_row_says_connected_while_the_server_serves(
    start: Start, twilio: FakeTwilio
) -> None:
    sms = await start()

    def state() -> str:
        assert sms.runtime.channels is not None
        return sms.runtime.channels.supervisor.states()["sms"]

    await eventually(lambda: state() == "connected", what="the account to be connected")
    await sms.runtime.http.stop()
    await eventually(lambda: state() != "connected", what="the account to leave connected")
    assert sms.runtime.channels is not None
    assert sms.runtime.channels.supervisor.adapter("sms") is None


def test_config_names_a_bad_account_sid_and_number(home: Home) -> None:
    base = "channels:\n  sms:\n    type: sms\n    token_env: T\n"
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.sms.account_sid"):
        parse_config(
            base + '    account_sid: nope\n    from: "+15550001111"\n', home.config_path, home
        )
    with pytest.raises(ConfigError, match=r"channels.sms.from: '12' is not a phone number"):
        parse_config(base + f'    account_sid: {SID}\n    from: "12"\n', home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.sms.from: a sms channel needs this"):
        parse_config(base + f"    account_sid: {SID}\n", home.config_path, home)
    config = parse_config(
        base + f'    account_sid: {SID}\n    from: "+15550001111"\n', home.config_path, home
    )
    assert config.channels["sms"].from_ == "+15550001111"


async def test_setup_checks_the_sid_and_token(twilio: FakeTwilio) -> None:
    setup = platform_module("sms").SETUP
    config = ChannelConfig(type="sms", account_sid=SID, token_env="T", from_=BOT_NUMBER)
    config.base_url = twilio.base_url
    assert "Test" in await setup.check(config, {"T": twilio.token})
    with pytest.raises(SetupCheckFailed, match="Twilio refused"):
        await setup.check(config, {"T": "wrong"})


def test_setup_writes_the_number_as_from(home: Home) -> None:
    from habakkuk.services.channel_setup import ChannelPlan, ChannelSetup

    home.config_path.write_text(mock_config(), encoding="utf-8")
    setup = platform_module("sms").SETUP
    answers = {"account_sid": SID, "token_env": "secret", "from_": BOT_NUMBER, "allow_from": ALICE}
    draft = ChannelSetup(home).prepare(ChannelPlan(setup, "text", answers))
    assert f'from: "{BOT_NUMBER}"' in draft.text or f"from: '{BOT_NUMBER}'" in draft.text
    assert draft.config.from_ == BOT_NUMBER
    assert "secret" not in draft.text


def test_offered_media_is_unguessable_and_gone_after_its_hour() -> None:
    from habakkuk.channels.webhook import MEDIA_SECONDS, MediaShelf

    assert MEDIA_SECONDS == 3600.0
    shelf = MediaShelf()
    token = shelf.put(b"data", "text/plain")
    assert len(token) >= 43 and token != shelf.put(b"data", "text/plain")  # 256 random bits
    assert shelf.get(token) == (b"data", "text/plain")
    expired = MediaShelf(seconds=0.0)
    gone = expired.put(b"data", "text/plain")
    assert expired.get(gone) is None
