"""WeCom end to end: the fake WeCom posts encrypted, signed callbacks to our HTTP server's
/channels/<account> and reads the replies back from its message/send API."""

from __future__ import annotations

import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.channels.adapter import Button
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.channels.wecom import WeComAdapter, wecom_chunks
from habakkuk.channels.wecom_cards import card_parts, fits
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_wecom import (
    AES_KEY,
    AGENT_ID,
    ALICE,
    CORP_ID,
    TOKEN,
    FakeWeCom,
    Sent,
    WeComDriver,
    wecom_encrypt,
    wecom_signature,
)
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
APPROVE, DENY = "✅ Approve", "❌ Deny"


@dataclass
class WeCom:
    runtime: Runtime
    fake: FakeWeCom
    driver: WeComDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> WeComAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("work")
        assert isinstance(found, WeComAdapter)
        return found


Start = Callable[..., Awaitable[WeCom]]


@pytest.fixture
async def wecom(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeWeCom]:
    async with FakeWeCom() as fake:
        for variable, value in WeComDriver(fake).env().items():
            monkeypatch.setenv(variable, value)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, wecom: FakeWeCom, home: Home) -> Start:
    """Open a runtime with the wecom account `work`, start its server; the app's callback
    URL points at it."""

    async def _start(script: str = ECHO, *, mode: str = "full", wait: bool = True) -> WeCom:
        driver = WeComDriver(wecom)
        channel = "http: {}\nchannels:\n  work:\n" + textwrap.indent(
            driver.channel_yaml("work"), "    "
        )
        runtime: Runtime = await runtime_factory(mock_config(script, mode=mode, extra=channel))
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        driver.called_at(f"{server.url}/channels/work")
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("work", timeout=PROCESS_BOUND)
            assert up is not None
        return WeCom(runtime, wecom, driver, home)

    return _start


async def test_the_url_verification_gets_the_decrypted_echostr(
    start: Start, wecom: FakeWeCom
) -> None:
    work = await start()
    status, body, echo = await wecom.verify_url()
    assert (status, body) == (200, echo)
    status, _, _ = await wecom.verify_url(token="not-the-token")
    assert status == 403
    assert work.adapter().refused == 1


async def test_forged_callbacks_get_403_and_start_no_turn(start: Start, wecom: FakeWeCom) -> None:
    work = await start()
    genuine = wecom.message(ALICE, "genuine")
    other_key = "B" * 43
    encrypted = wecom_encrypt(AES_KEY, wecom.message(ALICE, "x"), CORP_ID)
    envelope = wecom.envelope(encrypted)
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": wecom.post(wecom.message(ALICE, "a"), signature=""),
        "garbage signature": wecom.post(wecom.message(ALICE, "b"), signature="0" * 40),
        "wrong token": wecom.post(wecom.message(ALICE, "c"), token="not-the-token"),
        "encrypted with another key": wecom.post(wecom.message(ALICE, "d"), aes_key=other_key),
        "for another corp": wecom.post(wecom.message(ALICE, "e"), receiver="wwsomeoneelse"),
        "stale timestamp": wecom.post(
            wecom.message(ALICE, "f"), timestamp=str(int(time.time()) - 7200)
        ),
        "body of another signature": wecom.post(genuine, body=envelope),
        "truncated body": wecom.post(genuine, body=envelope[: len(envelope) // 2]),
        "not XML": wecom.post(genuine, body=b"\xff\xfe\x00"),
        "an entity bomb": wecom.post(
            genuine, body=b'<!DOCTYPE x [<!ENTITY a "aaaa">]><xml><Encrypt>&a;</Encrypt></xml>'
        ),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert work.adapter().refused == len(forged)
    assert (await wecom.post(genuine))[0] == 200
    await eventually(lambda: work.driver.texts() == ["echo: genuine"], what="the genuine reply")
    # WeCom retries a callback whose answer it missed: taken, no second turn.
    assert (await wecom.post(genuine))[0] == 200
    await work.driver.say("next")
    await eventually(lambda: len(work.driver.texts()) == 2, what="the second reply")
    assert work.driver.texts() == ["echo: genuine", "echo: next"]
    assert len(work.turns()) == 2


async def test_a_token_called_stale_is_fetched_again_once(start: Start, wecom: FakeWeCom) -> None:
    work = await start()
    await work.driver.say("one")
    await eventually(lambda: len(work.driver.texts()) == 1, what="the first reply")
    wecom.expire_tokens()
    await work.driver.say("two")
    await eventually(lambda: len(work.driver.texts()) == 2, what="the second reply")
    assert work.driver.texts() == ["echo: one", "echo: two"]
    assert wecom.stale_answers == 1 and len(wecom.tokens) == 2


async def test_a_picture_reaches_the_workspace(start: Start, wecom: FakeWeCom, home: Home) -> None:
    work = await start()
    picture = b"\xff\xd8\xff\xe0 a jpeg"
    assert (await wecom.post(wecom.image(ALICE, picture)))[0] == 200
    await eventually(lambda: len(work.driver.texts()) == 1, what="the reply")
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.read_bytes() == picture and saved.suffix == ".jpg"


async def test_a_refused_secret_is_fatal_and_callbacks_get_503_meanwhile(
    start: Start, wecom: FakeWeCom
) -> None:
    wecom.refuse_secret = True
    work = await start(wait=False)

    async def fatal() -> bool:
        assert work.runtime.channels is not None
        return work.runtime.channels.supervisor.states().get("work", "") == "fatal"

    await eventually(fatal, what="the account to be fatal")
    status, text = await wecom.post(wecom.message(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert work.turns() == []


def test_long_cjk_text_is_cut_within_2048_bytes() -> None:
    chunks = wecom_chunks("汉" * 1500)
    assert "".join(chunks) == "汉" * 1500
    assert all(len(chunk.encode()) <= 2048 for chunk in chunks)


def test_config_names_a_bad_agent_id(home: Home) -> None:
    base = (
        f"channels:\n  work:\n    type: wecom\n    corp_id: {CORP_ID}\n    app_secret_env: S\n"
        "    token_env: T\n    aes_key_env: A\n"
    )
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.work.agent_id: 'x'"):
        parse_config(base + "    agent_id: x\n", home.config_path, home)
    config = parse_config(base + f"    agent_id: '{AGENT_ID}'\n", home.config_path, home)
    assert config.channels["work"].agent_id == AGENT_ID


async def test_setup_checks_the_corp_id_secret_and_aes_key(wecom: FakeWeCom) -> None:
    setup = platform_module("wecom").SETUP
    config = ChannelConfig(
        type="wecom", corp_id=CORP_ID, agent_id=AGENT_ID, app_secret_env="S", aes_key_env="A"
    )
    config.base_url = wecom.base_url
    assert CORP_ID in await setup.check(config, {"S": wecom.secret, "A": AES_KEY})
    with pytest.raises(SetupCheckFailed, match="WeCom refused"):
        await setup.check(config, {"S": "wrong", "A": AES_KEY})
    with pytest.raises(SetupCheckFailed, match="EncodingAESKey"):
        await setup.check(config, {"S": wecom.secret, "A": "short"})


def test_the_signature_and_cipher_are_wecoms_documented_ones() -> None:
    from habakkuk.channels.wecom_wire import aes_key, decrypt, signed

    encrypted = wecom_encrypt(AES_KEY, b"<xml/>", CORP_ID)
    given = wecom_signature(TOKEN, "1700000000", "n0nce", encrypted)
    assert signed(TOKEN, "1700000000", "n0nce", encrypted, given)
    assert decrypt(aes_key(AES_KEY), encrypted, CORP_ID) == b"<xml/>"
    with pytest.raises(ValueError, match="receiver"):
        decrypt(aes_key(AES_KEY), encrypted, "wwother")


async def approval_card(work: WeCom) -> Sent:
    """Ask for the approval; the card it comes as."""
    await work.driver.say("run the thing")
    await eventually(
        lambda: any("Approval needed" in text for text in work.driver.texts()), what="the card"
    )
    [card] = [s for s in work.fake.sent if s.msgtype == "template_card"][-1:]
    return card


async def test_an_approval_is_a_card_whose_press_answers_it_and_greys_it(
    start: Start, wecom: FakeWeCom
) -> None:
    work = await start(APPROVAL, mode="workspace")
    card = await approval_card(work)
    assert card.content["card_type"] == "button_interaction"
    buttons = card.content["button_list"]
    assert [b["text"] for b in buttons] == [APPROVE, DENY, "Allow for this session"]
    assert all(b["key"].startswith("fy|") for b in buttons)
    await work.driver.press(DENY)
    await eventually(lambda: any("all done" in t for t in work.driver.texts()), what="done")
    # Greyed once, saying what the press decided.
    await eventually(lambda: wecom.updates, what="the card greyed")
    assert wecom.updates == [(card.content["task_id"], "Denied")]
    assert work.turns() == ["done"]


async def test_a_typed_answer_greys_the_card_as_closed(start: Start, wecom: FakeWeCom) -> None:
    work = await start(APPROVAL, mode="workspace")
    card = await approval_card(work)
    await work.driver.say("yes")
    await eventually(lambda: any("all done" in t for t in work.driver.texts()), what="done")
    await eventually(lambda: wecom.updates, what="the card greyed")
    assert wecom.updates == [(card.content["task_id"], "Closed")]


async def test_forged_presses_get_403_and_answer_nothing(start: Start, wecom: FakeWeCom) -> None:
    work = await start(APPROVAL, mode="workspace")
    card = await approval_card(work)
    task, key = wecom.card(APPROVE)
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "wrong token": wecom.post(wecom.press(ALICE, task, key), token="not-the-token"),
        "another key": wecom.post(wecom.press(ALICE, task, key), aes_key="B" * 43),
        "for another corp": wecom.post(wecom.press(ALICE, task, key), receiver="wwother"),
        "stale timestamp": wecom.post(
            wecom.press(ALICE, task, key), timestamp=str(int(time.time()) - 7200)
        ),
        "no signature": wecom.post(wecom.press(ALICE, task, key), signature=""),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert work.adapter().refused == len(forged)
    # Nothing was answered: the approval still waits, the card is as it was.
    assert wecom.updates == [] and work.turns() == ["running"]
    genuine = wecom.press(ALICE, task, key)
    assert (await wecom.post(genuine))[0] == 200
    await eventually(lambda: any("all done" in t for t in work.driver.texts()), what="done")
    await eventually(lambda: wecom.updates, what="the card greyed")
    # WeCom retries a callback it got no answer to: taken once, nothing more answered.
    assert (await wecom.post(genuine))[0] == 200
    await work.driver.say("next")
    await eventually(lambda: len(work.turns()) == 2, what="the next turn")
    assert wecom.updates == [(card.content["task_id"], "Approved")]


async def test_an_old_cards_press_cannot_answer_a_newer_prompt(
    start: Start, wecom: FakeWeCom
) -> None:
    work = await start(APPROVAL, mode="workspace")

    def done() -> int:
        return sum("all done" in text for text in work.driver.texts())

    await approval_card(work)
    old_task, old_key = wecom.card(APPROVE)
    await work.driver.press(APPROVE)
    await eventually(lambda: done() == 1, what="the first approval done")
    await work.driver.say("run it again")
    await eventually(
        lambda: len([s for s in wecom.sent if s.msgtype == "template_card"]) == 2,
        what="the second card",
    )
    await eventually(lambda: len(wecom.updates) == 1, what="the first card greyed")
    assert (await wecom.post(wecom.press(ALICE, old_task, old_key)))[0] == 200
    # The old card's key names its own prompt, long answered: the new one still waits.
    await eventually(lambda: len(wecom.updates) == 2, what="the old card greyed again")
    assert wecom.updates[-1] == (old_task, "This prompt has expired.")
    assert work.turns() == ["done", "running"]
    await work.driver.press(APPROVE)
    await eventually(lambda: done() == 2, what="the second approval done")
    assert work.turns() == ["done", "done"]


def test_a_long_prompt_goes_first_and_its_card_follows() -> None:
    buttons = [[Button("✅ Approve", "fy|0011aabb|0"), Button("❌ Deny", "fy|0011aabb|1")]]
    short = card_parts("Approval needed: exec\n\necho hi", buttons)
    assert short.before == ""
    assert short.card["main_title"] == {"title": "Approval needed: exec"}
    assert short.card["sub_title_text"] == "echo hi"
    assert [b["key"] for b in short.card["button_list"]] == ["fy|0011aabb|0", "fy|0011aabb|1"]
    long = "Approval needed: exec\n\n" + "x" * 300
    parts = card_parts(long, buttons)
    assert parts.before == long and "sub_title_text" not in parts.card
    assert parts.card["main_title"] == {"title": "Approval needed: exec"}
    assert card_parts("a", buttons).card["task_id"] != card_parts("a", buttons).card["task_id"]
    # Seven buttons, or a key over 1024 bytes, do not fit a card: the prompt goes as text.
    assert not fits([[Button(str(i), f"fy|x|{i}") for i in range(7)]])
    assert not fits([[Button("x", "k" * 1025)]])


async def test_a_press_after_a_restart_still_answers_and_greys_its_card(
    start: Start, wecom: FakeWeCom
) -> None:
    work = await start(APPROVAL, mode="workspace")
    card = await approval_card(work)
    # The adapter restarted: it no longer remembers the card or its send's response_code.
    before = work.adapter()
    assert work.runtime.channels is not None
    supervisor = work.runtime.channels.supervisor
    await supervisor.remove("work")
    supervisor.add(before.config)
    assert await supervisor.wait_adapter("work", timeout=PROCESS_BOUND) is not None
    assert work.adapter() is not before
    await work.driver.press(APPROVE)
    await eventually(lambda: any("all done" in t for t in work.driver.texts()), what="done")
    # The press brought its own ResponseCode: the card greys with the decision.
    await eventually(lambda: wecom.updates, what="the card greyed")
    assert wecom.updates == [(card.content["task_id"], "Approved")]
