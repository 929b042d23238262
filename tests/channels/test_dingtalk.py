"""DingTalk end to end: the fake DingTalk's robot posts signed messages to our HTTP
server's /channels/<account>; replies go back by session webhook or the robot OpenAPI."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pytest

from habakkuk.channels.adapter import Button
from habakkuk.channels.dingtalk import DingTalkAdapter
from habakkuk.channels.dingtalk_cards import fits, pressed, robot_card, said_by
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_dingtalk import (
    ALICE,
    APP_KEY,
    GROUP,
    DingTalkDriver,
    FakeDingTalk,
    Sent,
    dingtalk_sign,
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


@dataclass
class Ding:
    runtime: Runtime
    fake: FakeDingTalk
    driver: DingTalkDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> DingTalkAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("ding")
        assert isinstance(found, DingTalkAdapter)
        return found


Start = Callable[..., Awaitable[Ding]]


@pytest.fixture
async def dingtalk(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDingTalk]:
    async with FakeDingTalk() as fake:
        monkeypatch.setenv("DINGTALK_TEST_SECRET", fake.secret)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, dingtalk: FakeDingTalk, home: Home) -> Start:
    """Open a runtime with the dingtalk account `ding`, start its server; the robot's
    receiving URL points at it."""

    async def _start(script: str = ECHO, *, mode: str = "full", wait: bool = True) -> Ding:
        driver = DingTalkDriver(dingtalk)
        channel = "http: {}\nchannels:\n  ding:\n" + textwrap.indent(
            driver.channel_yaml("ding"), "    "
        )
        runtime: Runtime = await runtime_factory(mock_config(script, mode=mode, extra=channel))
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        driver.called_at(f"{server.url}/channels/ding")
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("ding", timeout=PROCESS_BOUND)
            assert up is not None
        return Ding(runtime, dingtalk, driver, home)

    return _start


async def test_a_reply_goes_by_the_session_webhook_while_it_is_valid(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start()
    await ding.driver.say("hello")
    await eventually(lambda: ding.driver.texts() == ["echo: hello"], what="the reply")
    assert [s.via for s in dingtalk.sent] == ["session"]


async def test_an_expired_session_replies_through_the_robot_api(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start()
    assert (await dingtalk.post(dingtalk.message(ALICE, "late", session_seconds=-1)))[0] == 200
    await eventually(lambda: ding.driver.texts() == ["echo: late"], what="the reply")
    assert [s.via for s in dingtalk.sent] == ["api"]
    # A session DingTalk refuses (gone early) falls back to the API too.
    message = dingtalk.message(ALICE, "refused")
    dingtalk.sessions.clear()
    assert (await dingtalk.post(message))[0] == 200
    await eventually(lambda: len(ding.driver.texts()) == 2, what="the second reply")
    assert [s.via for s in dingtalk.sent] == ["api", "api"]


async def test_a_group_message_is_answered_in_the_group(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start()
    message = dingtalk.message(ALICE, "what time is it", group=True, session_seconds=-1)
    assert (await dingtalk.post(message))[0] == 200
    await eventually(
        lambda: [(s.chat, s.text) for s in dingtalk.sent] == [(GROUP, "echo: what time is it")],
        what="the group reply",
    )
    assert ding.turns() == ["done"]


async def test_forged_requests_get_403_and_start_no_turn(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start()
    now = int(time.time() * 1000)
    hour = 3600 * 1000
    genuine = dingtalk.message(ALICE, "genuine")
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": dingtalk.post(dingtalk.message(ALICE, "a"), sign=""),
        "garbage signature": dingtalk.post(dingtalk.message(ALICE, "b"), sign="AAAA"),
        "wrong key": dingtalk.post(dingtalk.message(ALICE, "c"), secret="not-the-secret"),
        "stale timestamp": dingtalk.post(
            dingtalk.message(ALICE, "d"), timestamp=str(now - hour - 60_000)
        ),
        "timestamp from the future": dingtalk.post(
            dingtalk.message(ALICE, "e"), timestamp=str(now + hour + 60_000)
        ),
        "another timestamp's signature": dingtalk.post(
            dingtalk.message(ALICE, "f"), sign=dingtalk_sign(str(now - 5000), dingtalk.secret)
        ),
        "no timestamp": dingtalk.post(dingtalk.message(ALICE, "g"), timestamp="x"),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert ding.adapter().refused == len(forged)
    # Signed but cut off or not DingTalk's JSON: refused as a bad request, no turn.
    body = json.dumps(genuine).encode()
    assert (await dingtalk.post(genuine, body=body[: len(body) // 2]))[0] == 400
    assert (await dingtalk.post(genuine, body=b"[]"))[0] == 400
    assert (await dingtalk.post(genuine))[0] == 200
    await eventually(lambda: ding.driver.texts() == ["echo: genuine"], what="the genuine reply")
    # Replayed within the hour: taken, no second turn.
    assert (await dingtalk.post(genuine))[0] == 200
    await ding.driver.say("next")
    await eventually(lambda: len(ding.driver.texts()) == 2, what="the second reply")
    assert ding.driver.texts() == ["echo: genuine", "echo: next"]
    assert len(ding.turns()) == 2


async def test_a_token_called_stale_is_fetched_again_once(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start()
    assert (await dingtalk.post(dingtalk.message(ALICE, "one", session_seconds=-1)))[0] == 200
    await eventually(lambda: len(ding.driver.texts()) == 1, what="the first reply")
    dingtalk.expire_tokens()
    assert (await dingtalk.post(dingtalk.message(ALICE, "two", session_seconds=-1)))[0] == 200
    await eventually(lambda: len(ding.driver.texts()) == 2, what="the second reply")
    assert ding.driver.texts() == ["echo: one", "echo: two"]
    assert dingtalk.stale_answers == 1 and len(dingtalk.tokens) == 2


async def test_approval_by_a_typed_yes(start: Start, dingtalk: FakeDingTalk) -> None:
    ding = await start(APPROVAL, mode="workspace")
    await ding.driver.say("run the thing")
    await eventually(
        lambda: any("Approval needed" in t for t in ding.driver.texts()), what="the approval"
    )
    await ding.driver.say("yes")
    await eventually(lambda: any("all done" in t for t in ding.driver.texts()), what="done")
    assert ding.turns() == ["done"]


async def test_a_refused_secret_is_fatal_and_requests_get_503_meanwhile(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    dingtalk.refuse_secret = True
    ding = await start(wait=False)

    async def fatal() -> bool:
        assert ding.runtime.channels is not None
        return ding.runtime.channels.supervisor.states().get("ding", "") == "fatal"

    await eventually(fatal, what="the account to be fatal")
    status, text = await dingtalk.post(dingtalk.message(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert ding.turns() == []


async def test_setup_checks_the_client_id_and_secret(dingtalk: FakeDingTalk) -> None:
    setup = platform_module("dingtalk").SETUP
    config = ChannelConfig(type="dingtalk", app_id=APP_KEY, app_secret_env="S")
    config.base_url = dingtalk.base_url
    assert APP_KEY in await setup.check(config, {"S": dingtalk.secret})
    with pytest.raises(SetupCheckFailed, match="DingTalk refused"):
        await setup.check(config, {"S": "wrong"})


def test_the_sign_is_dingtalks_documented_hmac() -> None:
    from habakkuk.channels.dingtalk_wire import sign, signed

    now = int(time.time() * 1000)
    assert sign(str(now), "secret") == dingtalk_sign(str(now), "secret")
    assert signed(str(now), "secret", dingtalk_sign(str(now), "secret"), now)
    assert not signed(str(now), "secret", dingtalk_sign(str(now), "other"), now)


APPROVE, DENY = "✅ Approve", "❌ Deny"


async def tool_result(ding: Ding) -> str:
    """The text of the first tool result in any session."""
    for session in await ding.runtime.sessions.list_sessions():
        for stored in await ding.runtime.sessions.messages(session.id):
            for result in stored.message.tool_results:
                return result.text
    raise AssertionError("no tool result")


async def approval_card(ding: Ding, *, session_seconds: float = 5400) -> Sent:
    """Ask for the approval; the card it comes as."""
    message = ding.fake.message(ALICE, "run the thing", session_seconds=session_seconds)
    assert (await ding.fake.post(message))[0] == 200
    await eventually(lambda: any(s.buttons for s in ding.fake.sent), what="the card")
    [card] = [s for s in ding.fake.sent if s.buttons]
    return card


async def test_an_approval_is_an_action_card_whose_button_answers_as_the_person(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start(APPROVAL, mode="workspace")
    card = await approval_card(ding)
    assert card.via == "session" and "Approval needed" in card.text
    assert [title for title, _ in card.buttons] == [APPROVE, DENY, "Allow for this session"]
    # Each button sends its label and the prompt's callback data into the chat.
    _, url = card.buttons[1]
    said = unquote(url.removeprefix("dtmd://dingtalkclient/sendMessage?content="))
    assert said.startswith(DENY + " [fy|") and said.endswith("|1]")
    await ding.driver.press(DENY)
    await eventually(lambda: any("all done" in t for t in ding.driver.texts()), what="done")
    assert ding.turns() == ["done"]
    # The press is answered in the answer to its message, as a toast would be.
    assert [s.text for s in dingtalk.sent if s.via == "answer"] == ["Denied"]
    assert (await tool_result(ding)).startswith("denied")


async def test_the_robot_api_sends_the_card_when_the_session_has_lapsed(
    start: Start, dingtalk: FakeDingTalk
) -> None:
    ding = await start(APPROVAL, mode="workspace")
    card = await approval_card(ding, session_seconds=-1)
    assert card.via == "api" and len(card.buttons) == 3  # sampleActionCard3
    await ding.driver.press(APPROVE)
    await eventually(lambda: any("all done" in t for t in ding.driver.texts()), what="done")
    assert ding.turns() == ["done"]


async def test_a_groups_approval_is_typed(start: Start, dingtalk: FakeDingTalk) -> None:
    # In a group the robot hears only what @mentions it, and a button's message does not.
    ding = await start(APPROVAL, mode="workspace")
    message = dingtalk.message(ALICE, "run the thing", group=True)
    assert (await dingtalk.post(message))[0] == 200
    await eventually(
        lambda: any("Approval needed" in s.text for s in dingtalk.sent), what="the approval"
    )
    assert not any(s.buttons for s in dingtalk.sent)
    assert (await dingtalk.post(dingtalk.message(ALICE, "yes", group=True)))[0] == 200
    await eventually(lambda: any("all done" in s.text for s in dingtalk.sent), what="done")
    assert ding.turns() == ["done"]


async def test_forged_and_old_presses_answer_nothing(start: Start, dingtalk: FakeDingTalk) -> None:
    ding = await start(APPROVAL, mode="workspace")

    def done() -> int:
        return sum("all done" in text for text in ding.driver.texts())

    await approval_card(ding)
    press = dingtalk.press(ALICE, APPROVE)
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "wrong key": dingtalk.post(press, secret="not-the-secret"),
        "garbage signature": dingtalk.post(press, sign="AAAA"),
        "stale timestamp": dingtalk.post(
            press, timestamp=str(int(time.time() * 1000) - 3600 * 1000 - 60_000)
        ),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert ding.adapter().refused == len(forged)
    assert ding.turns() == ["running"]  # the approval still waits
    assert (await dingtalk.post(press))[0] == 200
    await eventually(lambda: done() == 1, what="the first approval done")
    # Redelivered: taken once, answered once.
    assert (await dingtalk.post(press))[0] == 200
    assert [s.text for s in dingtalk.sent if s.via == "answer"] == ["Approved"]
    await ding.driver.say("run it again")
    await eventually(
        lambda: len([s for s in dingtalk.sent if s.buttons]) == 2, what="the second card"
    )
    # The old card's button names its own prompt, long answered: the new one still waits.
    old = dingtalk.message(ALICE, press["text"]["content"])
    assert (await dingtalk.post(old))[0] == 200
    assert ding.turns() == ["done", "running"]
    assert [s.text for s in dingtalk.sent if s.via == "answer"][-1] == "This prompt has expired."
    await ding.driver.press(APPROVE)
    await eventually(lambda: done() == 2, what="the second approval done")
    assert ding.turns() == ["done", "done"]


def test_a_press_is_read_from_the_end_of_what_its_button_sent() -> None:
    approve = Button(APPROVE, "fy|0a1b2c3d|0")
    assert pressed(said_by(approve)) == "fy|0a1b2c3d|0"
    assert pressed("yes") is None and pressed("[fy|0a1b2c3d|0] and more") is None
    assert fits([[approve, Button(DENY, "fy|0a1b2c3d|1")]])
    assert not fits([[Button(str(i), f"fy|0a1b2c3d|{i}") for i in range(6)]])
    assert not fits([[Button("other", "something else")]])
    key, param = robot_card("Approval needed: exec\n\necho hi", [[approve]])
    assert key == "sampleActionCard" and param["singleTitle"] == APPROVE
    assert param["title"] == "Approval needed: exec"
