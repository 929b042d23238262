"""Feishu/Lark end to end: the fake Feishu posts encrypted, signed events to our HTTP
server's /channels/<account> and reads the replies back from its Open API."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.channels.feishu import FeishuAdapter
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_feishu import (
    ALICE,
    ALICE_CHAT,
    APP_ID,
    BOT_OPEN_ID,
    ENCRYPT_KEY,
    GROUP,
    FakeFeishu,
    FeishuDriver,
    lark_signature,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"


@dataclass
class Feishu:
    """A runtime with a feishu account, its HTTP server, and the fake Feishu calling it."""

    runtime: Runtime
    fake: FakeFeishu
    driver: FeishuDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> FeishuAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("lark")
        assert isinstance(found, FeishuAdapter)
        return found


Start = Callable[..., Awaitable[Feishu]]


@pytest.fixture
async def feishu(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeFeishu]:
    async with FakeFeishu() as fake:
        for variable, value in FeishuDriver(fake).env().items():
            monkeypatch.setenv(variable, value)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, feishu: FakeFeishu, home: Home) -> Start:
    """Open a runtime with the feishu account `lark`, start its server; Feishu points
    its event subscription at it."""

    async def _start(script: str = ECHO, *, extra: str = "", wait: bool = True) -> Feishu:
        driver = FeishuDriver(feishu)
        entry = driver.channel_yaml("lark") + extra
        channel = "http: {}\nchannels:\n  lark:\n" + textwrap.indent(entry, "    ")
        runtime: Runtime = await runtime_factory(mock_config(script, extra=channel))
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        driver.called_at(f"{server.url}/channels/lark")
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("lark", timeout=PROCESS_BOUND)
            assert up is not None
        return Feishu(runtime, feishu, driver, home)

    return _start


async def test_the_url_verification_challenge_is_answered(start: Start, feishu: FakeFeishu) -> None:
    lark = await start()
    status, text = await feishu.challenge()
    assert status == 200 and json.loads(text)["challenge"].startswith("ch-")
    status, _ = await feishu.challenge(token="not-the-verification-token")
    assert status == 403
    assert lark.adapter().refused == 1


async def test_forged_events_get_403_and_start_no_turn(start: Start, feishu: FakeFeishu) -> None:
    lark = await start()
    genuine = feishu.message_event(ALICE, "genuine")
    sealed = feishu.sealed(genuine)
    old = str(int(time.time()) - 7200)
    other_token = feishu.message_event(ALICE, "a")
    other_token["header"]["token"] = "not-the-verification-token"
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": feishu.post(feishu.message_event(ALICE, "b"), signature=""),
        "garbage signature": feishu.post(feishu.message_event(ALICE, "c"), signature="0" * 64),
        "signed with another key": feishu.post(feishu.message_event(ALICE, "d"), sign_key="x"),
        "encrypted with another key": feishu.post(feishu.message_event(ALICE, "e"), key="x"),
        "wrong verification token": feishu.post(other_token),
        "stale timestamp": feishu.post(feishu.message_event(ALICE, "f"), timestamp=old),
        "body changed after signing": feishu.post(
            genuine, body=feishu.sealed(feishu.message_event(ALICE, "forged")), signed_body=sealed
        ),
        "truncated body": feishu.post(genuine, body=sealed[: len(sealed) // 2]),
        "not JSON": feishu.post(genuine, body=b"\xff\xfe\x00"),
        "plaintext event": feishu.post(genuine, body=json.dumps(genuine).encode()),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert lark.adapter().refused == len(forged)
    assert (await feishu.post(genuine))[0] == 200
    await eventually(lambda: lark.driver.texts() == ["echo: genuine"], what="the genuine reply")
    # Replayed (Feishu retries an event whose answer it missed): taken, no second turn.
    assert (await feishu.post(genuine))[0] == 200
    await lark.driver.say("next")
    await eventually(lambda: len(lark.driver.texts()) == 2, what="the second reply")
    assert lark.driver.texts() == ["echo: genuine", "echo: next"]
    assert len(lark.turns()) == 2


async def test_a_token_called_stale_is_fetched_again_and_the_reply_sent_once(
    start: Start, feishu: FakeFeishu
) -> None:
    lark = await start()
    await lark.driver.say("hello")
    await eventually(lambda: lark.driver.texts() == ["echo: hello"], what="the first reply")
    fetched = len(feishu.tokens)
    feishu.expire_tokens()  # revoked before its time: the next call is refused as stale
    await lark.driver.say("again")
    await eventually(lambda: len(lark.driver.texts()) == 2, what="the second reply")
    assert lark.driver.texts() == ["echo: hello", "echo: again"]
    assert feishu.stale_answers == 1
    assert len(feishu.tokens) == fetched + 1


async def test_every_send_shares_the_one_cached_token(start: Start, feishu: FakeFeishu) -> None:
    lark = await start()
    for word in ("one", "two", "three"):
        await lark.driver.say(word)
    await eventually(lambda: len(lark.driver.texts()) == 3, what="three replies")
    assert len(feishu.tokens) == 1


async def test_in_a_group_only_a_mention_of_the_bot_is_answered(
    start: Start, feishu: FakeFeishu
) -> None:
    lark = await start()
    plain = feishu.message_event(ALICE, "talking among ourselves", chat=GROUP, group=True)
    assert (await feishu.post(plain))[0] == 200
    mention = {"key": "@_user_1", "id": {"open_id": BOT_OPEN_ID}, "name": "Habakkuk"}
    asked = feishu.message_event(
        ALICE, "@_user_1 what time is it", chat=GROUP, group=True, mentions=[mention]
    )
    assert (await feishu.post(asked))[0] == 200

    def group_texts() -> list[str]:
        return [s.content.get("text", "") for s in feishu.sent if s.chat == GROUP]

    await eventually(lambda: group_texts() == ["echo: what time is it"], what="the answer")
    assert len(lark.turns()) == 1


async def test_a_send_repeated_with_its_uuid_posts_once(start: Start, feishu: FakeFeishu) -> None:
    from habakkuk.channels.adapter import Address
    from habakkuk.channels.deliveries import SENDING, Sending
    from habakkuk.channels.delivery_types import TextDelivery

    lark = await start()
    address = Address("lark", ALICE_CHAT)
    token = SENDING.set(Sending("reply:turn:lark:x", TextDelivery(address, "x")))
    try:
        first = await lark.adapter().send_text(address, "only once")
        again = await lark.adapter().send_text(address, "only once")
    finally:
        SENDING.reset(token)
    assert first == again
    assert [s.content["text"] for s in feishu.sent] == ["only once"]
    assert len(feishu.sent[0].uuid) <= 50


async def test_a_refused_secret_is_fatal_and_events_get_503_meanwhile(
    start: Start, feishu: FakeFeishu
) -> None:
    feishu.refuse_secret = True
    lark = await start(wait=False)

    async def state() -> str:
        assert lark.runtime.channels is not None
        return lark.runtime.channels.supervisor.states().get("lark", "")

    async def fatal() -> bool:
        return await state() == "fatal"

    await eventually(fatal, what="the account to be fatal")
    status, text = await feishu.post(feishu.message_event(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert lark.turns() == []


def test_config_names_a_missing_encrypt_key_and_a_bad_app_id(home: Home) -> None:
    base = (
        "channels:\n  lark:\n    type: feishu\n    app_secret_env: S\n"
        "    verification_token_env: V\n"
    )
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.lark.encrypt_key_env"):
        parse_config(base + f"    app_id: {APP_ID}\n", home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.lark.app_id: 'abc' is not a Feishu"):
        parse_config(base + "    app_id: abc\n    encrypt_key_env: E\n", home.config_path, home)
    config = parse_config(
        base + f"    app_id: {APP_ID}\n    encrypt_key_env: E\n", home.config_path, home
    )
    assert config.channels["lark"].encrypt_key_env == "E"


async def test_setup_checks_the_app_id_and_secret(feishu: FakeFeishu) -> None:
    setup = platform_module("feishu").SETUP
    config = ChannelConfig(type="feishu", app_id=APP_ID, app_secret_env="S")
    config.base_url = feishu.base_url
    assert BOT_OPEN_ID in await setup.check(config, {"S": feishu.secret})
    with pytest.raises(SetupCheckFailed, match="Feishu refused"):
        await setup.check(config, {"S": "wrong"})


def test_the_signature_is_feishus_documented_sha256() -> None:
    from habakkuk.channels.feishu_wire import signed

    body = b'{"encrypt":"abc"}'
    given = lark_signature("1700000000", "n0nce", ENCRYPT_KEY, body)
    assert signed("1700000000", "n0nce", ENCRYPT_KEY, body, given)
    assert not signed("1700000001", "n0nce", ENCRYPT_KEY, body, given)


async def test_the_channels_row_says_connected_while_the_server_serves(
    start: Start, feishu: FakeFeishu
) -> None:
    lark = await start()

    def state() -> str:
        assert lark.runtime.channels is not None
        return lark.runtime.channels.supervisor.states()["lark"]

    await eventually(lambda: state() == "connected", what="the account to be connected")
    await lark.runtime.http.stop()
    await eventually(lambda: state() != "connected", what="the account to leave connected")
    assert lark.runtime.channels is not None
    assert lark.runtime.channels.supervisor.adapter("lark") is None


APPROVAL = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""


async def test_an_approval_card_loses_its_buttons_once_pressed_and_the_press_gets_a_toast(
    runtime_factory: Any, feishu: FakeFeishu, home: Home
) -> None:
    driver = FeishuDriver(feishu)
    channel = "http: {}\nchannels:\n  lark:\n" + textwrap.indent(
        driver.channel_yaml("lark"), "    "
    )
    runtime: Runtime = await runtime_factory(mock_config(APPROVAL, mode="workspace", extra=channel))
    runtime.start_workers()
    server = await runtime.http.start("127.0.0.1:0")
    driver.called_at(f"{server.url}/channels/lark")
    assert runtime.channels is not None
    await runtime.channels.started()
    assert await runtime.channels.supervisor.wait_adapter("lark", timeout=PROCESS_BOUND)
    await driver.say("run the thing")
    await eventually(lambda: any(s.buttons for s in feishu.sent), what="the approval card")
    [card] = [s for s in feishu.sent if s.buttons]
    assert card.msg_type == "interactive"
    [(_, data)] = [b for b in card.buttons if b[0].startswith("✅")]
    status, answer = await feishu.post(feishu.press_event(ALICE, card, data))
    assert status == 200 and json.loads(answer)["toast"]["content"]
    await eventually(lambda: any("all done" in t for t in driver.texts()), what="done")
    assert card.buttons == []  # the card was updated without its buttons
    assert "Approval needed" in card.content["elements"][0]["text"]["content"]
