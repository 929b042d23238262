"""Microsoft Teams end to end: the fake Bot Framework posts activities signed with its
published test key to our HTTP server's /channels/<account>, and reads the replies the bot
posts to the conversation's service URL."""

from __future__ import annotations

import asyncio
import os
import stat
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from habakkuk.channels.jwks import KeySet
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.channels.teams import TeamsAdapter, chat_of, conversation_of
from habakkuk.channels.teams_wire import BotToken, ServiceUrls, token_rules
from habakkuk.channels.webhook import MediaShelf
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_teams import (
    ALICE,
    APP_ID,
    CONVERSATION,
    MALLORY_ID,
    FakeTeams,
    TeamsDriver,
    jwk_of,
    public_pem,
    signing_key,
    unsigned_token,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"


@dataclass
class Teams:
    """A runtime with a teams account, its HTTP server, and the fake Teams calling it."""

    runtime: Runtime
    fake: FakeTeams
    driver: TeamsDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def adapter(self) -> TeamsAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter("teams")
        assert isinstance(found, TeamsAdapter)
        return found

    def state(self) -> str:
        assert self.runtime.channels is not None
        return self.runtime.channels.supervisor.states().get("teams", "")


Start = Callable[..., Awaitable[Teams]]


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTeams]:
    async with FakeTeams() as teams:
        monkeypatch.setenv("TEAMS_TEST_PASSWORD", teams.password)
        yield teams


@pytest.fixture
def start(runtime_factory: Any, fake: FakeTeams, home: Home) -> Start:
    """Open a runtime with the teams account and start its server; the fake calls it."""

    async def _start(
        script: str = ECHO, *, mode: str = "full", extra: str = "", wait: bool = True
    ) -> Teams:
        driver = TeamsDriver(fake)
        entry = driver.channel_yaml("teams") + extra
        channel = "channels:\n  teams:\n" + textwrap.indent(entry, "    ")
        runtime: Runtime = await runtime_factory(
            mock_config(script, mode=mode, extra=channel + "http: {}\n")
        )
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        fake.webhook_url = f"{server.url}/channels/teams"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter("teams", timeout=PROCESS_BOUND)
            assert up is not None
        return Teams(runtime, fake, driver, home)

    return _start


async def test_a_message_gets_one_reply_at_its_service_url(start: Start, fake: FakeTeams) -> None:
    teams = await start()
    await teams.driver.say("hello")
    await eventually(lambda: teams.driver.texts() == ["echo: hello"], what="the reply")
    [posted] = fake.posted
    assert posted.conversation == CONVERSATION
    assert posted.activity["textFormat"] == "markdown"


async def test_forged_tokens_get_403_and_start_no_turn(start: Start, fake: FakeTeams) -> None:
    teams = await start()
    pem = public_pem(fake.key)
    stranger = signing_key("stranger")
    now_claims = {"iss": "https://api.botframework.com", "aud": APP_ID, "exp": 2**40}
    message = fake.activity
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no token": fake.post(message("a"), token=""),
        "garbage token": fake.post(message("b"), token="not.a.jwt"),
        "wrong kid (a key nobody published)": fake.post(
            message("c"), token=fake.token(key=stranger, kid="unpublished-kid")
        ),
        "wrong key under the published kid": fake.post(
            message("d"), token=fake.token(key=stranger)
        ),
        "wrong issuer": fake.post(message("e"), token=fake.token(iss="https://evil.example")),
        "wrong audience": fake.post(
            message("f"), token=fake.token(aud="00000000-0000-4000-8000-000000000000")
        ),
        "expired": fake.post(message("g"), token=fake.token(exp=1_700_000_000, nbf=1_699_990_000)),
        "alg none": fake.post(
            message("h"), token=unsigned_token({"alg": "none", "kid": fake.kid}, now_claims)
        ),
        "HS256 keyed with the public key": fake.post(
            message("i"),
            token=unsigned_token({"alg": "HS256", "typ": "JWT", "kid": fake.kid}, now_claims, pem),
        ),
        "a token for another service URL": fake.post(
            message("j"), token=fake.token(service_url="https://evil.example/teams/")
        ),
        "a key endorsed for another channel": fake.post(
            message("k"), token=fake.token(key=signing_key("webchat-only"), kid="webchat-key")
        ),
        "truncated body": fake.post(message("l"), body=b'{"type": "message", "id": "1'),
        "not a POST": fake.post(message("m"), method="PUT"),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert teams.adapter().refused == len(forged)
    genuine = message("genuine")
    assert (await fake.post(genuine))[0] == 200
    await eventually(lambda: teams.driver.texts() == ["echo: genuine"], what="the reply")
    # A replayed activity (a valid token, the same activity id) is taken and starts no turn.
    assert (await fake.post(genuine))[0] == 200
    await teams.driver.say("next")
    await eventually(lambda: len(teams.driver.texts()) == 2, what="the second reply")
    assert teams.turns() == ["done", "done"]


async def test_a_stranger_pairs_and_a_group_hears_only_a_mention(
    start: Start, fake: FakeTeams
) -> None:
    teams = await start()
    # Mallory is not in allow_from: no turn, she is offered pairing in her own chat.
    status, _ = await fake.post(fake.activity("hi", sender=MALLORY_ID, conversation="a:1mallory"))
    assert status == 200
    await eventually(
        lambda: any(p.conversation == "a:1mallory" for p in fake.posted), what="a pairing answer"
    )
    assert teams.turns() == []
    group = {"conversationType": "groupChat", "id": "19:abc@thread.v2", "isGroup": True}
    await fake.post(
        fake.activity("chatter", conversation="19:abc@thread.v2") | {"conversation": group}
    )
    mention = {
        "type": "mention",
        "text": "<at>Habakkuk</at>",
        "mentioned": {"id": f"28:{APP_ID}", "name": "Habakkuk"},
    }
    addressed = fake.activity("<at>Habakkuk</at> ping", entities=[mention])
    addressed["conversation"] = group
    assert (await fake.post(addressed))[0] == 200
    await eventually(
        lambda: [p.text for p in fake.posted if p.conversation == group["id"]] == ["echo: ping"],
        what="the group reply",
    )
    assert teams.turns() == ["done"]


async def test_service_urls_are_kept_per_conversation_in_a_private_file(
    start: Start, fake: FakeTeams, home: Home
) -> None:
    teams = await start()
    await teams.driver.say("hello")
    await eventually(lambda: teams.driver.texts() == ["echo: hello"], what="the reply")
    path = home.root / "channels" / "teams-teams.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert ServiceUrls(path).get(CONVERSATION) == fake.service_url
    assert conversation_of(chat_of("19:a%b@thread;messageid=1")) == "19:a%b@thread;messageid=1"
    assert ":" not in chat_of(CONVERSATION)


async def test_the_bot_token_is_cached_and_fetched_again_when_called_stale(
    start: Start, fake: FakeTeams
) -> None:
    teams = await start()
    await teams.driver.say("one")
    await eventually(lambda: teams.driver.texts() == ["echo: one"], what="the first reply")
    assert fake.token_requests == 1  # connect's token served the reply too
    fake.revoke_tokens()  # the Connector now calls it stale (401): fetched again, once
    await teams.driver.say("two")
    await eventually(
        lambda: teams.driver.texts() == ["echo: one", "echo: two"], what="the second reply"
    )
    assert fake.token_requests == 2


async def test_a_token_is_renewed_five_minutes_before_it_expires(fake: FakeTeams) -> None:
    now = [1000.0]
    fake.expires_in = 3600
    async with aiohttp.ClientSession() as http:
        token = BotToken(
            f"{fake.base_url}/botframework.com/oauth2/v2.0/token",
            APP_ID,
            fake.password,
            lambda: http,
            clock=lambda: now[0],
        )
        first = await token.get()
        now[0] += 3600 - 301
        assert await token.get() == first
        now[0] += 2  # inside the last five minutes
        assert await token.get() != first
    assert fake.token_requests == 2


async def test_an_unknown_key_id_refetches_the_keys_at_most_once_a_minute(
    fake: FakeTeams,
) -> None:
    now = [5000.0]
    keys = KeySet(metadata_url=f"{fake.base_url}/v1/.well-known/openidconfiguration")
    keys.clock = lambda: now[0]
    rules = token_rules(APP_ID)
    async with aiohttp.ClientSession() as http:
        await keys.ready_for(fake.token(), http)
        assert keys.check(fake.token(), rules) is not None
        assert fake.key_fetches == 1
        await keys.ready_for(fake.token(), http)  # a known kid: no fetch
        # The keys rotate: the first token naming the new key fetches them again...
        rotated = signing_key("rotated")
        fake.published.append(jwk_of(rotated, "rotated-kid", ["msteams"]))
        now[0] += 61
        new = fake.token(key=rotated, kid="rotated-kid")
        # Requests arriving together wait for one fetch, and each then finds the key.
        await asyncio.gather(*(keys.ready_for(new, http) for _ in range(10)))
        assert keys.check(new, rules) is not None and fake.key_fetches == 2
        # ...but a flood of made-up kids fetches at most once a minute.
        for n in range(20):
            await keys.ready_for(fake.token(key=rotated, kid=f"made-up-{n}"), http)
        assert fake.key_fetches == 2
        now[0] += 61
        await keys.ready_for(fake.token(key=rotated, kid="made-up-again"), http)
        assert fake.key_fetches == 3


async def test_approval_by_an_adaptive_card_button(start: Start, fake: FakeTeams) -> None:
    approval = textwrap.dedent(
        """
        - text: "Let me run it."
          tool_calls:
            - name: exec
              arguments: {command: "echo approved-run"}
        - "all done"
        """
    )
    teams = await start(approval, mode="workspace")
    await teams.driver.say("run the thing")
    await eventually(
        lambda: any(p.actions() for p in fake.posted), what="the card with its buttons"
    )
    [card] = [p for p in fake.posted if p.actions()]
    assert {a["type"] for a in card.actions()} == {"Action.Submit"}
    await teams.driver.press("✅ Approve")
    await eventually(lambda: any("all done" in t for t in teams.driver.texts()), what="done")
    # The answered card shows its text alone: no button to press twice.
    await eventually(lambda: card.actions() == [], what="the buttons to go")
    assert "Approval needed" in card.text


async def test_a_refused_password_is_fatal_and_requests_get_503(
    start: Start, fake: FakeTeams
) -> None:
    fake.refuse_password = True
    teams = await start(wait=False)
    await eventually(lambda: teams.state() == "fatal", what="the account to be fatal")
    status, text = await fake.post(fake.activity("while down"))
    assert status == 503 and "restarting" in text
    assert teams.turns() == []


def test_config_names_a_bad_app_id(home: Home) -> None:
    base = "channels:\n  t:\n    type: teams\n    password_env: P\n"
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.t.app_id: 'nope' is not"):
        parse_config(base + "    app_id: nope\n", home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.t.app_id: a teams channel needs this"):
        parse_config(base, home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.t.account_sid: is not a setting"):
        parse_config(base + f"    app_id: {APP_ID}\n    account_sid: x\n", home.config_path, home)
    config = parse_config(base + f"    app_id: {APP_ID}\n", home.config_path, home)
    assert config.channels["t"].app_id == APP_ID


async def test_setup_logs_in_with_the_app_id_and_password(fake: FakeTeams) -> None:
    setup = platform_module("teams").SETUP
    config = ChannelConfig(type="teams", app_id=APP_ID, password_env="P")
    config.base_url = fake.base_url
    assert APP_ID in await setup.check(config, {"P": fake.password})
    with pytest.raises(SetupCheckFailed, match="refused"):
        await setup.check(config, {"P": "wrong"})


def test_setup_writes_the_password_as_a_variable(home: Home) -> None:
    from habakkuk.services.channel_setup import ChannelPlan, ChannelSetup

    home.config_path.write_text(mock_config(), encoding="utf-8")
    setup = platform_module("teams").SETUP
    answers = {"app_id": APP_ID, "password_env": "s3cret", "allow_from": ALICE}
    draft = ChannelSetup(home).prepare(ChannelPlan(setup, "work", answers))
    assert draft.config.app_id == APP_ID and draft.config.password_env
    assert "s3cret" not in draft.text


SEND_FILE = """
- text: "Sending it."
  tool_calls:
    - name: send_file
      arguments: {path: "report.txt"}
- "sent"
"""


async def test_a_file_goes_by_consent_card_into_the_persons_onedrive(
    start: Start, fake: FakeTeams, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_bytes(b"numbers\n")
    fake.auto_accept = False
    teams = await start(SEND_FILE)
    await teams.driver.say("send me the report")
    await eventually(lambda: any(p.consent for p in fake.posted), what="the consent card")
    [offer] = [p for p in fake.posted if p.consent]
    assert offer.consent is not None
    assert (offer.consent["name"], offer.consent["content"]["sizeInBytes"]) == ("report.txt", 8)
    assert fake.uploaded == {}  # nothing leaves before the person allows it
    assert (await fake.answer_consent(offer, accept=True))[0] == 200
    assert list(fake.uploaded.values()) == [b"numbers\n"]
    assert teams.driver.files() == [("report.txt", b"numbers\n")]
    # The Connector retrying that answer uploads and shows nothing more.
    assert (await fake.answer_consent(offer, accept=True))[0] == 200
    assert len(fake.uploaded) == 1 and len(teams.driver.files()) == 1


async def test_a_file_allowed_after_its_hour_is_said_to_be_gone(
    start: Start, fake: FakeTeams, home: Home
) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_bytes(b"numbers\n")
    fake.auto_accept = False
    teams = await start(SEND_FILE)
    await teams.driver.say("send me the report")
    await eventually(lambda: any(p.consent for p in fake.posted), what="the consent card")
    [offer] = [p for p in fake.posted if p.consent]
    teams.adapter().media = MediaShelf()  # what a restart or the hour leaves: nothing
    assert (await fake.answer_consent(offer, accept=True))[0] == 200
    assert fake.uploaded == {}
    assert any("no longer offered" in p.text for p in fake.posted)


async def test_a_declined_file_is_never_uploaded(start: Start, fake: FakeTeams, home: Home) -> None:
    workspace = home.default_workspace("main")
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "report.txt").write_bytes(b"numbers\n")
    fake.auto_accept = False
    teams = await start(SEND_FILE)
    await teams.driver.say("send me the report")
    await eventually(lambda: any(p.consent for p in fake.posted), what="the consent card")
    [offer] = [p for p in fake.posted if p.consent]
    assert (await fake.answer_consent(offer, accept=False))[0] == 200
    assert fake.uploaded == {} and teams.driver.files() == []
