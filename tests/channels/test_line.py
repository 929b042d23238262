"""LINE end to end: the fake LINE Platform calls our HTTP server's /channels/<account> with
signed event batches, and reads the replies back from its reply and push endpoints."""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from habakkuk.channels.line import LineAdapter
from habakkuk.channels.line_wire import MessagingApi, retry_key, signature, text_message
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_line import (
    ALICE,
    BOB,
    BOT,
    GROUP,
    SECRET,
    FakeLine,
    LineDriver,
    line_signature,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"
SEND_IMAGE = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "chart.png", caption: "the chart"}
- "sent"
"""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@dataclass
class Line:
    """A runtime with a line account, its HTTP server, and the fake LINE calling it."""

    runtime: Runtime
    line: FakeLine
    driver: LineDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> LineAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("line")
        assert isinstance(found, LineAdapter)
        return found


Start = Callable[..., Awaitable[Line]]


@pytest.fixture
async def line(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLine]:
    """The fake LINE; its token and secret are in the driver's variables."""
    async with FakeLine() as fake:
        for variable, value in LineDriver(fake).env().items():
            monkeypatch.setenv(variable, value)
        yield fake


@pytest.fixture
def start(runtime_factory: Any, line: FakeLine, home: Home) -> Start:
    """Open a runtime with the line account, start its server; LINE points at it."""

    async def _start(
        script: str = ECHO, *, allow: str = "", wait: bool = True, mode: str = "full"
    ) -> Line:
        driver = LineDriver(line)
        entry = driver.channel_yaml("line")
        if allow:  # more people than the driver's one
            entry = entry.replace(f'allow_from: ["{ALICE}"]', f"allow_from: {allow}")
        config = "channels:\n  line:\n" + textwrap.indent(entry, "    ") + "http: {}\n"
        runtime: Runtime = await runtime_factory(mock_config(script, mode=mode, extra=config))
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        line.webhook_url = f"{server.url}/channels/line"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("line", timeout=PROCESS_BOUND)
            assert up is not None
        return Line(runtime, line, driver, home)

    return _start


async def test_a_text_gets_one_reply_through_its_reply_token(start: Start, line: FakeLine) -> None:
    chat = await start()
    await chat.driver.say("hello")
    await eventually(lambda: chat.driver.texts() == ["echo: hello"], what="the reply")
    [sent] = line.sent
    assert (sent.to, sent.how) == (ALICE, "reply")


async def test_a_stale_reply_token_falls_back_to_a_push_with_a_retry_key(
    start: Start, line: FakeLine
) -> None:
    chat = await start()
    message = {"type": "text", "id": "700000000000000001", "text": "late"}
    await line.events(line.event("message", ALICE, message=message, no_reply_token=True))
    await eventually(lambda: chat.driver.texts() == ["echo: late"], what="the pushed reply")
    [sent] = line.sent
    assert sent.how == "push" and len(line.retry_keys) == 1


async def test_a_redelivered_event_starts_no_second_turn(start: Start, line: FakeLine) -> None:
    chat = await start()
    event = line.text(ALICE, "once")
    assert (await line.events(event))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: once"], what="the reply")
    # LINE redelivers an event whose request it thinks failed: same ids, isRedelivery.
    again = {**event, "deliveryContext": {"isRedelivery": True}}
    assert (await line.events(again))[0] == 200
    await chat.driver.say("next")
    await eventually(lambda: len(chat.driver.texts()) == 2, what="the second reply")
    assert chat.driver.texts() == ["echo: once", "echo: next"]
    assert len(chat.turns()) == 2


async def test_forged_requests_get_403_and_start_no_turn(start: Start, line: FakeLine) -> None:
    chat = await start()
    genuine = line.body(line.text(ALICE, "genuine"))
    other = line.body(line.text(ALICE, "other"))
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": line.post(line.body(line.text(ALICE, "a")), signature=""),
        "garbage signature": line.post(line.body(line.text(ALICE, "b")), signature="AAAA"),
        "wrong secret": line.post(line.body(line.text(ALICE, "c")), secret="f" * 32),
        "body changed after signing": line.post(
            genuine.replace(b"genuine", b"forged!"), signature=line_signature(SECRET, genuine)
        ),
        "truncated body": line.post(
            genuine[: len(genuine) // 2], signature=line_signature(SECRET, genuine)
        ),
        "signature of another body": line.post(genuine, signature=line_signature(SECRET, other)),
        "signed with SHA-1": line.post(genuine, signature=_sha1_signature(genuine)),
        "not UTF-8": line.post(b"\xff\xfe\x00", signature=line_signature(SECRET, genuine)),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert chat.adapter().refused == len(forged)
    assert (await line.post(genuine))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: genuine"], what="the genuine reply")
    # A replayed genuine request is taken (LINE redelivers so) and starts nothing more.
    assert (await line.post(genuine))[0] == 200
    await chat.driver.say("after")
    await eventually(lambda: len(chat.driver.texts()) == 2, what="the next reply")
    assert len(chat.turns()) == 2
    assert chat.adapter().refused == len(forged)


def _sha1_signature(body: bytes) -> str:
    import base64
    import hashlib
    import hmac

    return base64.b64encode(hmac.new(SECRET.encode(), body, hashlib.sha1).digest()).decode()


async def test_the_consoles_verify_request_and_other_events_get_200(
    start: Start, line: FakeLine
) -> None:
    chat = await start()
    assert (await line.events())[0] == 200  # the console's Verify: no events
    unfollow = line.event("unfollow", ALICE)
    standby = {**line.text(ALICE, "held by another module"), "mode": "standby"}
    assert (await line.events(unfollow, standby))[0] == 200
    assert (await line.post(b"[1, 2]"))[0] == 400
    assert chat.turns() == [] and line.sent == []


async def test_in_a_group_only_a_mention_of_the_bot_is_answered(
    start: Start, line: FakeLine
) -> None:
    chat = await start(allow=f'["{ALICE}", "{BOB}"]')
    await line.events(line.text(BOB, "talking among ourselves", group=GROUP))
    mention = {"mentionees": [{"index": 0, "length": 9, "type": "user", "isSelf": True}]}
    await line.events(line.text(ALICE, "@Habakkuk what time is it", group=GROUP, mention=mention))
    await eventually(lambda: len(line.to(GROUP)) == 1, what="the group reply")
    [sent] = line.to(GROUP)
    assert sent.text == "echo: what time is it"  # the mention itself is not the question
    # A mention of someone else is not one of the bot.
    other = {"mentionees": [{"index": 0, "length": 4, "type": "user", "userId": BOB}]}
    await line.events(line.text(ALICE, "@Bob hi", group=GROUP, mention=other))
    # A room (a chat of several people without a group) is the same, by its room id.
    room = "R" + "d4" * 16
    await line.events(line.text(ALICE, "@Habakkuk hello room", group=room, mention=mention))
    await eventually(lambda: len(line.to(room)) == 1, what="the room reply")
    assert line.to(room)[0].text == "echo: hello room"
    await chat.driver.say("and in private")
    await eventually(lambda: chat.driver.texts() == ["echo: and in private"], what="private")
    assert len(chat.turns()) == 3


async def test_a_follow_from_a_stranger_gets_a_pairing_code(start: Start, line: FakeLine) -> None:
    chat = await start()
    await line.events(line.event("follow", BOB))
    await eventually(lambda: len(line.to(BOB)) == 1, what="the pairing answer")
    assert "habakkuk pair" in line.to(BOB)[0].text
    assert chat.turns() == []


async def test_an_image_goes_by_a_one_hour_url_and_another_file_is_refused_with_why(
    start: Start, line: FakeLine, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "chart.png").write_bytes(PNG)
    chat = await start(SEND_IMAGE)
    await chat.driver.say("send me the chart")
    await eventually(lambda: "sent" in chat.driver.texts(), what="the reply")
    assert chat.driver.files() == [("image", PNG)]
    [image] = [sent for sent in line.sent if sent.image]
    url = image.message["originalContentUrl"]
    assert url.startswith(line.webhook_url + "/media/") and len(url.rsplit("/", 1)[1]) >= 43
    assert "the chart" in chat.driver.texts()  # the caption follows the image
    async with (
        aiohttp.ClientSession() as http,
        http.get(line.webhook_url + "/media/guess") as response,
    ):
        assert response.status == 404


async def test_a_file_a_person_sends_comes_from_the_content_endpoint(
    start: Start, line: FakeLine, home: Home
) -> None:
    chat = await start()
    await chat.driver.send_file("notes.txt", b"apples\n", "text/plain", caption="read this")
    await eventually(
        lambda: any("echo: read this" in t for t in chat.driver.texts()), what="the reply"
    )
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.read_bytes() == b"apples\n" and saved.name.endswith("notes.txt")
    assert len(chat.turns()) == 1  # the caption and its file were one message


async def test_a_restarting_account_answers_503_so_line_retries(
    start: Start, line: FakeLine
) -> None:
    line.refuse_token = True  # the adapter's check of the token fails: it is not up
    chat = await start(wait=False)

    async def fatal() -> bool:
        assert chat.runtime.channels is not None
        return chat.runtime.channels.supervisor.states().get("line") == "fatal"

    await eventually(fatal, what="the account to be fatal")
    status, text = await line.events(line.text(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert chat.turns() == []


async def test_a_retried_push_with_the_same_key_runs_once(line: FakeLine) -> None:
    async with aiohttp.ClientSession() as http:
        api = MessagingApi(line.base_url, line.token, http)
        key = retry_key("delivery:1\x00text\x000")
        first = await api.push(ALICE, [text_message("once")], key)
        again = await api.push(ALICE, [text_message("once")], key)
    assert first and again.startswith("req-")
    assert [sent.text for sent in line.sent] == ["once"]
    assert key == retry_key("delivery:1\x00text\x000") != retry_key("delivery:1\x00text\x001")


def test_the_signature_is_lines_own_algorithm() -> None:
    body = json.dumps({"destination": BOT, "events": []}).encode()
    assert signature(SECRET, body) == line_signature(SECRET, body)


def test_config_needs_the_token_and_the_secret(home: Home) -> None:
    base = "channels:\n  line:\n    type: line\n    token_env: LINE_TOKEN\n"
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.line.secret_env: a line"):
        parse_config(base, home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.line.account_sid: is not a setting"):
        parse_config(base + "    secret_env: S\n    account_sid: AC1\n", home.config_path, home)
    config = parse_config(base + "    secret_env: LINE_SECRET\n", home.config_path, home)
    assert config.channels["line"].secret_env == "LINE_SECRET"


async def test_setup_checks_the_access_token(line: FakeLine) -> None:
    setup = platform_module("line").SETUP
    config = ChannelConfig(type="line", token_env="T", secret_env="S", base_url=line.base_url)
    assert "Habakkuk Test" in await setup.check(config, {"T": line.token, "S": SECRET})
    with pytest.raises(SetupCheckFailed, match="LINE refused"):
        await setup.check(config, {"T": "wrong", "S": SECRET})
    with pytest.raises(SetupCheckFailed, match="channel secret"):
        await setup.check(config, {"T": line.token, "S": "short"})
