"""Mattermost's approval buttons end to end: a runtime serving HTTP on loopback, the fake
Mattermost (tests/channels/fake_mattermost.py) keeping the buttons' integrations to itself
and POSTing each press to /channels/<account>/<secret> as the real server does.

A press answers the prompt once and removes the buttons; forged, moved, truncated and
replayed presses get 403 and answer nothing; a stranger's press answers nothing and
spends nothing; without an HTTP server the Mattermost server can reach, the prompt has no
buttons and a typed word answers."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from habakkuk.channels.adapter import Button
from habakkuk.channels.mattermost import MattermostAdapter
from habakkuk.channels.mattermost_buttons import attachments, reachable, read_press, signature
from habakkuk.channels.webhook import WebhookRequest
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_mattermost import (
    DM_CHANNEL,
    TOKEN,
    TOWN,
    FakeMattermost,
    MattermostDriver,
    Post,
)
from tests.channels.test_mattermost_parts import adapter_for
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

APPROVAL = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""
APPROVE, DENY = "✅ Approve", "❌ Deny"
STRANGER = "strangeruserid00000000000001"


@dataclass
class Chat:
    """A runtime with a Mattermost account `mm` and the fake server."""

    runtime: Runtime
    fake: FakeMattermost
    home: Home
    url: str  # our server's /channels/mm ("" without an HTTP server)

    def adapter(self) -> MattermostAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("mm")
        assert isinstance(found, MattermostAdapter)
        return found

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def texts(self) -> list[str]:
        return MattermostDriver(self.fake).texts()

    def prompt(self) -> Post:
        [post] = [p for p in self.fake.of() if "Approval needed" in p.message]
        return post

    async def said(self, text: str) -> None:
        await eventually(
            lambda: any(text in said for said in self.texts()),
            what=f"the bot to say {text!r} (said {self.texts()})",
        )


Start = Callable[..., Awaitable[Chat]]


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    async with FakeMattermost() as server:
        monkeypatch.setenv("MATTERMOST_TEST_TOKEN", TOKEN)
        yield server


@pytest.fixture
def start(runtime_factory: Any, fake: FakeMattermost, home: Home) -> Start:
    """A runtime answering on the fake; with `http`, its HTTP server on loopback."""

    async def _start(*, http: bool = True) -> Chat:
        entry = MattermostDriver(fake).channel_yaml("mm")
        config = "channels:\n  mm:\n" + textwrap.indent(entry, "    ")
        runtime: Runtime = await runtime_factory(
            mock_config(APPROVAL, mode="workspace", extra=config)
        )
        runtime.start_workers()
        url = ""
        if http:
            server = await runtime.http.start("127.0.0.1:0")
            url = f"{server.url}/channels/mm"
        assert runtime.channels is not None
        await runtime.channels.started()
        up = await runtime.channels.supervisor.wait_adapter("mm", timeout=PROCESS_BOUND)
        assert up is not None
        return Chat(runtime, fake, home, url)

    return _start


async def asked(chat: Chat) -> Post:
    await chat.fake.say("run the thing")
    await chat.said("Approval needed")
    return chat.prompt()


async def test_a_press_answers_once_and_the_buttons_go(start: Start, fake: FakeMattermost) -> None:
    chat = await start()
    prompt = await asked(chat)
    # The buttons call our server under the account's secret; clients never see that.
    urls = {action["integration"]["url"] for action in prompt.actions()}
    [url] = urls
    assert url.startswith(chat.url + "/") and len(url) > len(chat.url) + 40
    assert [a["name"] for a in prompt.actions()] == [APPROVE, DENY, "Allow for this session"]
    seen = prompt.wire(fake)["props"]["attachments"][0]["actions"]
    assert all("integration" not in action for action in seen)

    target, press = fake.press_request(APPROVE)
    assert await fake.send_press(target, press) == 200
    await chat.said("all done")
    assert fake.ephemerals == ["Approved"]  # shown to the presser alone
    assert prompt.actions() == [] and "Approval needed" in prompt.message  # buttons gone
    assert chat.turns() == ["done"]
    # The very same press again (a replay): refused, nothing more happens.
    assert await fake.send_press(target, press) == 403
    # And the other button of the answered prompt, signed as posted: refused too.
    press["context"] = {**press["context"], "data": press["context"]["data"][:-1] + "1"}
    press["context"]["sig"] = signature(
        chat.adapter().state.key, press["context"]["data"], DM_CHANNEL
    )
    assert await fake.send_press(target, press) == 403
    assert chat.adapter().refused == 2
    assert chat.texts()[-1] == "all done" and chat.turns() == ["done"]


async def test_forged_presses_get_403_and_answer_nothing(
    start: Start, fake: FakeMattermost
) -> None:
    chat = await start()
    await asked(chat)
    url, genuine = fake.press_request(DENY)
    secret = url.rsplit("/", 1)[1]
    context = genuine["context"]
    approve = context["data"][:-1] + "0"

    def with_context(**changes: str) -> dict[str, Any]:
        return {**genuine, "context": {**context, **changes}}

    forged: dict[str, tuple[str, dict[str, Any] | bytes]] = {
        "no secret": (chat.url, genuine),
        "wrong secret": (f"{chat.url}/{'x' * len(secret)}", genuine),
        "truncated secret": (f"{chat.url}/{secret[:-1]}", genuine),
        "deny turned into approve": (url, with_context(data=approve)),
        "signed with another key": (
            url,
            with_context(data=approve, sig=signature("another key", approve, DM_CHANNEL)),
        ),
        "no signature": (url, {**genuine, "context": {"data": context["data"]}}),
        "moved to another channel": (url, {**genuine, "channel_id": TOWN}),
        "truncated JSON": (url, json.dumps(genuine).encode()[:-20]),
        "not JSON": (url, b"user_id=alice"),
    }
    for what, (target, body) in forged.items():
        status = await fake.send_press(target, body)
        assert status in (401, 403, 404), what
    async with (
        aiohttp.ClientSession() as session,
        session.get(url) as response,  # the right secret, but no press
    ):
        assert response.status == 403
    assert chat.adapter().refused == len(forged) + 1
    assert fake.ephemerals == [] and chat.turns() == ["running"]
    assert all("all done" not in text for text in chat.texts())
    assert await fake.send_press(url, genuine) == 200  # the genuine press still works
    await chat.said("all done")
    assert fake.ephemerals == ["Denied"]
    assert chat.turns() == ["done"]


async def test_a_strangers_press_answers_nothing_and_spends_nothing(
    start: Start, fake: FakeMattermost
) -> None:
    chat = await start()
    await asked(chat)
    assert await fake.press(APPROVE, user_id=STRANGER) == 200
    assert fake.ephemerals == ["You are not allowed to answer this."]
    assert chat.prompt().actions() != []  # still there for Alice
    assert chat.turns() == ["running"]
    assert await fake.press(APPROVE) == 200
    await chat.said("all done")
    assert fake.ephemerals[-1] == "Approved"


async def test_a_typed_word_still_answers_and_the_buttons_go(
    start: Start, fake: FakeMattermost
) -> None:
    chat = await start()
    prompt = await asked(chat)
    assert prompt.actions() != []
    url, stale = fake.press_request(DENY)
    await fake.say("yes")
    await chat.said("all done")
    await eventually(lambda: prompt.actions() == [], what="the buttons to go")
    # A button left on a screen is pressed after all: told it expired, nothing answered.
    assert await fake.send_press(url, stale) == 200
    assert fake.ephemerals == ["This prompt has expired."]
    assert chat.texts()[-1] == "all done" and chat.turns() == ["done"]


async def test_without_an_http_server_the_prompt_has_no_buttons_and_a_word_answers(
    start: Start, fake: FakeMattermost
) -> None:
    chat = await start(http=False)
    prompt = await asked(chat)
    assert not chat.adapter().can("buttons") and "attachments" not in prompt.props
    await fake.say("yes")
    await chat.said("all done")
    assert chat.turns() == ["done"]


async def test_buttons_posted_before_a_reconnect_still_answer(
    start: Start, fake: FakeMattermost
) -> None:
    chat = await start()
    await asked(chat)
    adapter = chat.adapter()
    await fake.drop_sockets()  # the socket drops: the account's adapter is made anew
    await eventually(lambda: fake.authenticated == 2, what="the reconnect")
    assert chat.runtime.channels is not None
    supervisor = chat.runtime.channels.supervisor
    await eventually(
        lambda: supervisor.adapter("mm") not in (None, adapter), what="the new adapter"
    )
    assert await fake.press(APPROVE) == 200  # its secret and key were kept
    await chat.said("all done")


async def test_a_press_while_the_account_is_down_gets_503(
    start: Start, fake: FakeMattermost
) -> None:
    chat = await start()
    await asked(chat)
    url, press = fake.press_request(APPROVE)
    fake.refuse_token = True
    await fake.drop_sockets()  # and the token is refused when it comes back: down

    async def down() -> bool:
        assert chat.runtime.channels is not None
        return chat.runtime.channels.supervisor.states().get("mm") == "fatal"

    await eventually(down, what="the account to be down")
    assert await fake.send_press(url, press) == 503
    assert chat.turns() == ["running"] and fake.ephemerals == []


def test_a_press_is_read_only_with_its_signature_and_channel() -> None:
    [attachment] = attachments([[Button("Yes", "fy|ab12|0"), Button("No", "fy|ab12|1")]],
                               "https://h/channels/mm/s", "key", DM_CHANNEL)  # fmt: skip
    yes, no = attachment["actions"]
    assert (yes["id"], yes["name"], no["id"]) == ("fyab120", "Yes", "fyab121")
    body = {"user_id": "u", "channel_id": DM_CHANNEL, "post_id": "p", "trigger_id": "t",
            "context": yes["integration"]["context"]}  # fmt: skip
    press = read_press(json.dumps(body).encode(), "key")
    assert press is not None and (press.data, press.nonce, press.user_id) == (
        "fy|ab12|0",
        "ab12",
        "u",
    )
    assert read_press(json.dumps(body).encode(), "other") is None
    assert read_press(json.dumps(body | {"post_id": ""}).encode(), "key") is None
    assert read_press(b"[1, 2]", "key") is None


@pytest.mark.parametrize(
    ("ours", "server", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8065", True),
        ("http://localhost:8080", "https://chat.example.org", False),
        ("http://[::1]:8080", "https://chat.example.org", False),
        ("https://habakkuk.example.org", "https://chat.example.org", True),
        ("http://10.0.0.5:8080", "https://chat.example.org", True),
    ],
)
def test_buttons_need_an_address_the_server_can_call(
    ours: str, server: str, expected: bool
) -> None:
    assert reachable(ours, server) is expected


async def test_a_press_before_the_adapter_authenticated_gets_503(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    adapter = adapter_for(fake, tmp_path / "mm.json")
    reply = await adapter.receive(WebhookRequest("POST", "u", {}, b"{}", "", "s"))
    assert reply.status == 503 and adapter.refused == 0
