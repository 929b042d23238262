"""Google Chat end to end: the fake Google Chat posts interaction events with tokens signed
by its published test keys to our HTTP server's /channels/<account>, and reads back the
messages the app creates through the fake Chat API."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.channels.googlechat import GoogleChatAdapter, chat_chunks
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_googlechat import (
    CHAT_ISSUER,
    DM,
    MALLORY_USER,
    PROJECT,
    FakeGoogleChat,
    GoogleChatDriver,
)
from tests.channels.fake_teams import public_pem, signing_key, unsigned_token
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"
SEND_FILE = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt"}
- "sent"
"""


@dataclass
class Chat:
    """A runtime with a googlechat account, its HTTP server, and the fake calling it."""

    runtime: Runtime
    fake: FakeGoogleChat
    driver: GoogleChatDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> GoogleChatAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("gchat")
        assert isinstance(found, GoogleChatAdapter)
        return found

    def state(self) -> str:
        assert self.runtime.channels is not None
        return self.runtime.channels.supervisor.states().get("gchat", "")


Start = Callable[..., Awaitable[Chat]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeGoogleChat]:
    async with FakeGoogleChat() as chat:
        yield chat


@pytest.fixture
def start(runtime_factory: Any, fake: FakeGoogleChat, home: Home) -> Start:
    """Open a runtime with the googlechat account `gchat` and start its server."""

    async def _start(
        script: str = ECHO, *, audience: str = "", wait: bool = True, mode: str = "full"
    ) -> Chat:
        driver = GoogleChatDriver(fake)
        entry = driver.channel_yaml("gchat")
        if audience:
            entry = entry.replace(f"audience: '{PROJECT}'", f"audience: '{audience}'")
        channel = "channels:\n  gchat:\n" + textwrap.indent(entry, "    ")
        config = mock_config(script, mode=mode, extra=channel + "http: {}\n")
        runtime: Runtime = await runtime_factory(config)
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        fake.webhook_url = f"{server.url}/channels/gchat"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("gchat", timeout=PROCESS_BOUND)
            assert up is not None
        return Chat(runtime, fake, driver, home)

    return _start


async def test_a_direct_message_gets_one_reply(start: Start, fake: FakeGoogleChat) -> None:
    chat = await start()
    await chat.driver.say("hello")
    await eventually(lambda: chat.driver.texts() == ["echo: hello"], what="the reply")
    [created] = fake.created
    assert created.space == DM
    assert created.name.rsplit("/", 1)[-1].startswith("client-")  # keyed by the delivery
    assert fake.token_requests == 1


async def test_forged_tokens_get_403_and_start_no_turn(start: Start, fake: FakeGoogleChat) -> None:
    chat = await start()
    stranger = signing_key("stranger")
    claims = {"iss": CHAT_ISSUER, "aud": PROJECT, "exp": 2**40}
    event = fake.event
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no token": fake.post(event("a"), token=""),
        "garbage token": fake.post(event("b"), token="garbage"),
        "wrong kid": fake.post(event("c"), token=fake.token(key=stranger, kid="nobody")),
        "wrong key under the published kid": fake.post(event("d"), token=fake.token(key=stranger)),
        "wrong issuer": fake.post(event("e"), token=fake.token(iss="someone@example.com")),
        "wrong audience": fake.post(event("f"), token=fake.token(aud="999999999999")),
        "expired": fake.post(event("g"), token=fake.token(exp=1_700_000_000, iat=1_699_990_000)),
        "alg none": fake.post(event("h"), token=unsigned_token({"alg": "none"}, claims)),
        "HS256 keyed with the public key": fake.post(
            event("i"),
            token=unsigned_token(
                {"alg": "HS256", "kid": "chat-test-key"}, claims, public_pem(fake.chat_key)
            ),
        ),
        "a Google ID token (not Chat's issuer)": fake.post(
            event("j"), token=fake.token(by_url=True)
        ),
        "truncated body": fake.post(event("k"), body=b'{"type": "MESSAGE", "mess'),
        "not a POST": fake.post(event("l"), method="PUT"),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert chat.adapter().refused == len(forged)
    genuine = event("genuine")
    assert (await fake.post(genuine))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: genuine"], what="the reply")
    # Google Chat retries an event it thinks failed: the same message, no second turn.
    assert (await fake.post(genuine))[0] == 200
    await chat.driver.say("next")
    await eventually(lambda: len(chat.driver.texts()) == 2, what="the second reply")
    assert chat.turns() == ["done", "done"]


async def test_with_the_endpoint_url_as_audience_only_chats_id_tokens_pass(
    start: Start, fake: FakeGoogleChat
) -> None:
    chat = await start(audience="https://bot.example.org/channels/gchat")
    url = "https://bot.example.org/channels/gchat"
    not_chat = fake.token(by_url=True, aud=url, email="someone@example.com")
    unverified = fake.token(by_url=True, aud=url, email_verified=False)
    assert (await fake.post(fake.event("a"), token=fake.token()))[0] == 403  # project token
    assert (await fake.post(fake.event("b"), token=not_chat))[0] == 403
    assert (await fake.post(fake.event("c"), token=unverified))[0] == 403
    ok = fake.token(by_url=True, aud=url)
    assert (await fake.post(fake.event("hello"), token=ok))[0] == 200
    await eventually(lambda: chat.driver.texts() == ["echo: hello"], what="the reply")


async def test_a_file_from_the_person_is_downloaded_with_the_apps_token(
    start: Start, fake: FakeGoogleChat, home: Home
) -> None:
    chat = await start()
    await chat.driver.send_file("notes.txt", b"apples\n", "text/plain", caption="read this")
    await eventually(
        lambda: any("echo: read this" in t for t in chat.driver.texts()), what="the reply"
    )
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.name.endswith("notes.txt") and saved.read_bytes() == b"apples\n"


async def test_a_file_to_the_person_becomes_a_notice(
    start: Start, fake: FakeGoogleChat, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_bytes(b"numbers\n")
    chat = await start(SEND_FILE)
    await chat.driver.say("send me the report")
    await eventually(
        lambda: any("Could not send the file report.txt" in t for t in chat.driver.texts()),
        what="the notice",
    )


async def test_a_stranger_is_offered_pairing_and_starts_no_turn(
    start: Start, fake: FakeGoogleChat
) -> None:
    chat = await start()
    status, _ = await fake.post(fake.event("hi", sender=MALLORY_USER, space="spaces/BBBBmallory"))
    assert status == 200
    await eventually(
        lambda: any(c.space == "spaces/BBBBmallory" for c in fake.created), what="pairing"
    )
    assert chat.turns() == []


async def test_the_app_token_is_fetched_again_when_called_stale(
    start: Start, fake: FakeGoogleChat
) -> None:
    chat = await start()
    await chat.driver.say("one")
    await eventually(lambda: chat.driver.texts() == ["echo: one"], what="the first reply")
    fake.tokens.clear()  # the API now answers 401: a new token, once, and the send goes
    await chat.driver.say("two")
    await eventually(lambda: chat.driver.texts() == ["echo: one", "echo: two"], what="second")
    assert fake.token_requests == 2


async def test_a_refused_key_is_fatal_and_events_get_503(
    start: Start, fake: FakeGoogleChat
) -> None:
    fake.refuse_key = True
    chat = await start(wait=False)
    await eventually(lambda: chat.state() == "fatal", what="the account to be fatal")
    status, text = await fake.post(fake.event("while down"))
    assert status == 503 and "restarting" in text
    assert chat.turns() == []


def test_bold_is_one_star_in_google_chat() -> None:
    assert chat_chunks("a **big** deal") == ["a *big* deal"]


def test_config_names_a_bad_audience(home: Home) -> None:
    base = "channels:\n  g:\n    type: googlechat\n    key_file: k.json\n"
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.g.audience: 'http://x'"):
        parse_config(base + "    audience: 'http://x'\n", home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.g.audience: a googlechat channel needs"):
        parse_config(base, home.config_path, home)
    config = parse_config(base + f"    audience: '{PROJECT}'\n", home.config_path, home)
    assert config.channels["g"].audience == PROJECT


async def test_setup_gets_a_token_with_the_key_file(fake: FakeGoogleChat) -> None:
    setup = platform_module("googlechat").SETUP
    config = ChannelConfig(type="googlechat", audience=PROJECT, key_file=str(fake.key_file))
    assert "habakkuk@" in await setup.check(config, {})
    fake.refuse_key = True
    with pytest.raises(SetupCheckFailed, match="refused the service account key"):
        await setup.check(config, {})
    config.key_file = str(fake.key_file) + ".missing"
    with pytest.raises(SetupCheckFailed, match="cannot read the key file"):
        await setup.check(config, {})


async def test_approval_by_a_card_button_whose_buttons_then_go(
    start: Start, fake: FakeGoogleChat
) -> None:
    approval = textwrap.dedent(
        """
        - text: "Let me run it."
          tool_calls:
            - name: exec
              arguments: {command: "echo approved-run"}
        - "all done"
        """
    )
    chat = await start(approval, mode="workspace")
    await chat.driver.say("run the thing")
    await eventually(lambda: any(c.buttons() for c in fake.created), what="the card")
    [card] = [c for c in fake.created if c.buttons()]
    await chat.driver.press("✅ Approve")
    await eventually(lambda: any("all done" in t for t in chat.driver.texts()), what="done")
    await eventually(lambda: card.buttons() == [], what="the buttons to go")
    assert "Approval needed" in card.text and chat.turns() == ["done"]
