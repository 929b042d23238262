"""The WhatsApp Business Cloud API end to end: the fake Graph API (tests/channels/fake_graph.py)
calls our HTTP server's /channels/<account> with signed events, and reads the replies back
from its /messages."""

from __future__ import annotations

import json
import stat
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.channels.whatsappcloud import WhatsAppCloudAdapter
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_graph import (
    ACCESS_TOKEN,
    ALICE,
    APP_SECRET,
    MALLORY,
    PHONE_NUMBER_ID,
    FakeWhatsAppCloud,
    GraphError,
    WhatsAppCloudDriver,
    hub_signature,
    text_of,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"
ACCOUNT = "wa"


@dataclass
class Wa:
    """A runtime with a whatsappcloud account, its HTTP server, and the fake calling it."""

    runtime: Runtime
    fake: FakeWhatsAppCloud
    driver: WhatsAppCloudDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def deliveries(self) -> list[dict[str, Any]]:
        return [
            dict(r) for r in rows(self.home, "SELECT status, error FROM jobs WHERE kind <> 'turn'")
        ]

    def adapter(self) -> WhatsAppCloudAdapter:
        assert self.runtime.channels is not None
        found = self.runtime.channels.supervisor.adapter(ACCOUNT)
        assert isinstance(found, WhatsAppCloudAdapter)
        return found

    def state(self) -> str:
        assert self.runtime.channels is not None
        return self.runtime.channels.supervisor.states().get(ACCOUNT, "")

    def windows(self) -> dict[str, float]:
        path = self.home.channels_dir / f"whatsappcloud-{ACCOUNT}.json"
        found: dict[str, float] = json.loads(path.read_text())["windows"]
        return found


Start = Callable[..., Awaitable[Wa]]


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeWhatsAppCloud]:
    """The fake Cloud API; its secrets are in the variables the account names."""
    async with FakeWhatsAppCloud() as found:
        for name, value in WhatsAppCloudDriver(found).env().items():
            monkeypatch.setenv(name, value)
        yield found


@pytest.fixture
def start(runtime_factory: Any, fake: FakeWhatsAppCloud, home: Home) -> Start:
    """Open a runtime with the account (plus `extra` settings), start its server; the
    app's webhook points at it."""

    async def _start(
        script: str = ECHO, *, mode: str = "full", extra: str = "", wait: bool = True
    ) -> Wa:
        driver = WhatsAppCloudDriver(fake)
        entry = driver.channel_yaml(ACCOUNT) + extra
        channel = f"channels:\n  {ACCOUNT}:\n" + textwrap.indent(entry, "    ")
        runtime: Runtime = await runtime_factory(
            mock_config(script, mode=mode, extra=channel + "http: {}\n")
        )
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        fake.webhook_url = f"{server.url}/channels/{ACCOUNT}"
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter(ACCOUNT, timeout=PROCESS_BOUND)
            assert up is not None
        return Wa(runtime, fake, driver, home)

    return _start


async def test_the_handshake_echoes_the_challenge_only_for_our_verify_token(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start()
    assert await fake.handshake(challenge="8745521") == (200, "8745521")
    assert (await fake.handshake(token="not-ours"))[0] == 403
    assert (await fake.handshake(mode="unsubscribe"))[0] == 403
    assert wa.adapter().refused == 2


async def test_a_message_gets_one_reply_and_opens_the_window(
    start: Start, fake: FakeWhatsAppCloud, home: Home
) -> None:
    wa = await start()
    await wa.driver.say("hello")
    await eventually(lambda: wa.driver.texts() == ["echo: hello"], what="the reply")
    [sent] = fake.sent
    assert sent.body["type"] == "text" and sent.to == ALICE
    path = home.channels_dir / f"whatsappcloud-{ACCOUNT}.json"
    await eventually(path.exists, what="the window's file")
    assert time.time() - wa.windows()[ALICE] < 120
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_redelivered_event_starts_no_second_turn(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start()
    event = fake.text(ALICE, "once")
    assert (await fake.post(event))[0] == 200
    await eventually(lambda: wa.driver.texts() == ["echo: once"], what="the reply")
    # Meta retries an event it thinks failed (or replays it): the same wamid, signed again.
    assert (await fake.post(event))[0] == 200
    await wa.driver.say("next")
    await eventually(lambda: len(wa.driver.texts()) == 2, what="the second reply")
    assert wa.driver.texts() == ["echo: once", "echo: next"]
    assert len(wa.turns()) == 2


async def test_forged_requests_get_403_and_start_no_turn(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start()
    genuine = json.dumps(fake.text(ALICE, "genuine")).encode()
    other = json.dumps(fake.text(MALLORY, "other")).encode()
    forged: dict[str, Awaitable[tuple[int, str]]] = {
        "no signature": fake.post(fake.text(ALICE, "a"), signature=""),
        "garbage signature": fake.post(fake.text(ALICE, "b"), signature="sha256=00ff"),
        "wrong key": fake.post(fake.text(ALICE, "c"), secret="not-the-app-secret"),
        "sha1, not sha256": fake.post(
            fake.text(ALICE, "d"), signature="sha1=" + hub_signature(APP_SECRET, b"")[7:47]
        ),
        "body changed after signing": fake.post(
            body=genuine.replace(b"genuine", b"forged!"), signed_body=genuine
        ),
        "truncated body": fake.post(body=genuine[: len(genuine) // 2], signed_body=genuine),
        "signature of another body": fake.post(body=genuine, signed_body=other),
        "bare hex, no sha256= prefix": fake.post(
            body=genuine, signature=hub_signature(APP_SECRET, genuine)[7:]
        ),
        "not JSON, unsigned": fake.post(body=b"\xff\xfe\x00", signature="sha256=zz"),
        "handshake with a wrong verify token": fake.handshake(token="guess"),
    }
    for what, request in forged.items():
        status, _ = await request
        assert status == 403, what
    assert wa.adapter().refused == len(forged)
    assert wa.turns() == [] and fake.sent == []
    assert (await fake.post(body=genuine))[0] == 200
    await eventually(lambda: wa.driver.texts() == ["echo: genuine"], what="the genuine reply")
    # replayed: the genuine event again, signature and all, is taken and dropped
    assert (await fake.post(body=genuine))[0] == 200
    await wa.driver.say("after")
    await eventually(lambda: len(wa.driver.texts()) == 2, what="the next reply")
    assert len(wa.turns()) == 2


async def test_outside_the_window_the_template_carries_the_reply(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start(extra="template: reply_notice\ntemplate_language: de\n")
    stale = fake.message(ALICE, "text", {"body": "an old question"})
    stale["timestamp"] = str(int(time.time()) - 25 * 3600)  # read a day late
    assert (await fake.post(fake.event(stale)))[0] == 200
    await eventually(lambda: wa.driver.texts() == ["echo: an old question"], what="the reply")
    [sent] = fake.sent
    template = sent.body["template"]
    assert sent.body["type"] == "template"
    assert (template["name"], template["language"]) == ("reply_notice", {"code": "de"})


async def test_a_131047_closes_the_window_and_the_template_goes_instead(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start(extra="template: reply_notice\n")
    fake.errors.append(GraphError(400, 131047, "Re-engagement message"))
    await wa.driver.say("are you there?")
    await eventually(lambda: len(fake.sent) == 1, what="the template")
    assert fake.sent[0].body["type"] == "template"
    assert text_of(fake.sent[0]) == "echo: are you there?"
    assert wa.windows()[ALICE] == 0.0  # closed until Alice writes again
    await wa.driver.say("yes")
    await eventually(lambda: len(fake.sent) == 2, what="the free-form reply")
    assert fake.sent[1].body["type"] == "text"


async def test_outside_the_window_without_a_template_the_delivery_fails_saying_why(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start()
    fake.errors.append(GraphError(400, 131047, "Re-engagement message"))
    await wa.driver.say("late")
    await eventually(
        lambda: any(d["status"] == "failed" for d in wa.deliveries()), what="the failure"
    )
    [failed] = [d for d in wa.deliveries() if d["status"] == "failed"]
    assert "24 hours" in failed["error"] and f"channels.{ACCOUNT}.template" in failed["error"]
    assert fake.sent == [] and fake.attempts == 1  # no retry can help


async def test_an_approval_has_reply_buttons_and_a_press_answers_it(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    script = """
- text: "Let me run it."
  tool_calls:
    - name: exec
      arguments: {command: "echo approved-run"}
- "all done"
"""
    wa = await start(script, mode="workspace")
    await wa.driver.say("run the thing")
    await eventually(
        lambda: any(s.body.get("type") == "interactive" for s in fake.sent), what="the buttons"
    )
    [prompt] = [s for s in fake.sent if s.body.get("type") == "interactive"]
    buttons = prompt.body["interactive"]["action"]["buttons"]
    titles = [b["reply"]["title"] for b in buttons]
    assert titles[:2] == ["✅ Approve", "❌ Deny"] and len(titles) == 3
    assert all(len(title) <= 20 for title in titles)  # WhatsApp's longest button title
    assert all(b["reply"]["id"].startswith("fy|") for b in buttons)
    await wa.driver.press("✅ Approve")
    await eventually(lambda: any("all done" in t for t in wa.driver.texts()), what="done")
    assert wa.turns() == ["done"]


async def test_a_revoked_token_makes_the_account_fatal(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start()
    fake.refuse_token = True
    await wa.driver.say("hello")
    await eventually(lambda: wa.state() == "fatal", what="the account to be fatal")
    assert wa.runtime.channels is not None
    assert wa.runtime.channels.supervisor.adapter(ACCOUNT) is None
    status, text = await fake.post(fake.text(ALICE, "while down"))
    assert status == 503 and "restarting" in text


async def test_a_restarting_account_answers_503_so_meta_retries(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    fake.refuse_token = True  # the adapter's check of the number fails: it is not up
    wa = await start(wait=False)
    await eventually(lambda: wa.state() == "fatal", what="the account to be fatal")
    status, text = await fake.post(fake.text(ALICE, "while down"))
    assert status == 503 and "restarting" in text
    assert wa.turns() == []


async def test_events_for_another_number_of_the_app_are_ignored(
    start: Start, fake: FakeWhatsAppCloud
) -> None:
    wa = await start()
    event = fake.text(ALICE, "not for us")
    event["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "999999999"
    assert (await fake.post(event))[0] == 200
    await wa.driver.say("for us")
    await eventually(lambda: wa.driver.texts() == ["echo: for us"], what="the reply")
    assert len(wa.turns()) == 1


def test_config_names_a_bad_phone_number_id_and_template(home: Home) -> None:
    base = (
        "channels:\n  wa:\n    type: whatsappcloud\n    token_env: T\n"
        "    app_secret_env: S\n    verify_token_env: V\n"
    )
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: channels.wa.phone_number_id: 'x'"):
        parse_config(base + "    phone_number_id: x\n", home.config_path, home)
    with pytest.raises(ConfigError, match=r"channels.wa.app_secret_env: a whatsappcloud"):
        parse_config(
            base.replace("    app_secret_env: S\n", "")
            + f"    phone_number_id: '{PHONE_NUMBER_ID}'\n",
            home.config_path,
            home,
        )
    with pytest.raises(ConfigError, match=r"channels.wa.template: 'Hello There'"):
        parse_config(
            base + f"    phone_number_id: '{PHONE_NUMBER_ID}'\n    template: Hello There\n",
            home.config_path,
            home,
        )
    with pytest.raises(ConfigError, match=r"channels.tg.template: is not a setting of a telegram"):
        parse_config(
            "channels:\n  tg:\n    type: telegram\n    token_env: T\n    template: x\n",
            home.config_path,
            home,
        )
    config = parse_config(
        base + f"    phone_number_id: '{PHONE_NUMBER_ID}'\n", home.config_path, home
    )
    assert config.channels["wa"].phone_number_id == PHONE_NUMBER_ID


async def test_setup_checks_the_token_reaches_the_number(fake: FakeWhatsAppCloud) -> None:
    setup = platform_module("whatsappcloud").SETUP
    config = ChannelConfig(
        type="whatsappcloud", phone_number_id=PHONE_NUMBER_ID, token_env="T", base_url=fake.base_url
    )
    assert "Test Business" in await setup.check(config, {"T": ACCESS_TOKEN})
    with pytest.raises(SetupCheckFailed, match="Meta refused the access token"):
        await setup.check(config, {"T": "wrong"})


def test_setup_writes_the_secrets_as_variables(home: Home) -> None:
    from habakkuk.services.channel_setup import ChannelPlan, ChannelSetup

    home.config_path.write_text(mock_config(), encoding="utf-8")
    setup = platform_module("whatsappcloud").SETUP
    answers = {
        "phone_number_id": PHONE_NUMBER_ID,
        "token_env": ACCESS_TOKEN,
        "app_secret_env": APP_SECRET,
        "verify_token_env": "my-verify-token",
        "template": "reply_notice",
        "allow_from": ALICE,
    }
    draft = ChannelSetup(home).prepare(ChannelPlan(setup, "wa", answers))
    assert draft.config.phone_number_id == PHONE_NUMBER_ID
    assert draft.config.template == "reply_notice"
    for secret in (ACCESS_TOKEN, APP_SECRET, "my-verify-token"):
        assert secret not in draft.text


async def test_the_window_runs_24_hours_from_the_last_message_and_survives_a_reload(
    tmp_path: Path,
) -> None:
    from habakkuk.channels.whatsappcloud_window import ServiceWindows

    now = [1_000_000.0]
    path = tmp_path / "whatsappcloud-wa.json"
    windows = ServiceWindows.load(path, clock=lambda: now[0])
    assert not windows.is_open(ALICE)  # never wrote: closed
    windows.opened(ALICE, now[0] - 3600)
    windows.opened(ALICE, now[0] - 7200)  # an older message redelivered: no step back
    assert windows.dirty
    windows.flush()
    again = ServiceWindows.load(path, clock=lambda: now[0])
    assert again.last == {ALICE: now[0] - 3600}
    now[0] += 22 * 3600
    assert again.is_open(ALICE)
    now[0] += 2 * 3600
    assert not again.is_open(ALICE)  # 24 hours since the last message
    again.opened(ALICE, now[0])
    again.closed(ALICE)  # a 131047: closed at once, and written at once
    assert not again.is_open(ALICE)
    assert ServiceWindows.load(path).last == {ALICE: 0.0}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_many_choices_go_as_a_list_and_a_long_prompt_keeps_its_buttons_last(
    fake: FakeWhatsAppCloud, home: Home
) -> None:
    from habakkuk.channels.adapter import Address, Button
    from habakkuk.channels.platforms import AdapterContext
    from habakkuk.channels.whatsappcloud import build

    entry = textwrap.indent(WhatsAppCloudDriver(fake).channel_yaml(ACCOUNT), "    ")
    config = parse_config(
        mock_config(extra=f"channels:\n  {ACCOUNT}:\n{entry}"), home.config_path, home
    ).channels[ACCOUNT]
    context = AdapterContext(WhatsAppCloudDriver(fake).env(), None, home.channels_dir)  # type: ignore[arg-type]  # build reads no store
    adapter = build(config, context)
    adapter.windows.opened(ALICE, time.time())
    to = Address(ACCOUNT, ALICE)
    try:
        choices = [[Button(f"choice number {i} of five", f"fy|n|{i}")] for i in range(5)]
        await adapter.send_text(to, "Pick one", buttons=choices)
        long = "\n".join(f"line {i} " + "x" * 60 for i in range(40))  # ~2.7k characters
        approve = [[Button("✅ Approve", "fy|m|0"), Button("❌ Deny", "fy|m|1")]]
        await adapter.send_text(to, long, buttons=approve)
    finally:
        await adapter.close()
    listed, head, prompt = (s.body for s in fake.sent)
    rows = listed["interactive"]["action"]["sections"][0]["rows"]
    assert listed["interactive"]["type"] == "list"
    assert listed["interactive"]["action"]["button"] == "Choose"
    assert [r["id"] for r in rows] == [f"fy|n|{i}" for i in range(5)]
    assert all(len(r["title"]) <= 24 for r in rows)
    assert head["type"] == "text" and prompt["type"] == "interactive"
    assert len(prompt["interactive"]["body"]["text"]) <= 1024
    assert head["text"]["body"] + "\n" + prompt["interactive"]["body"]["text"] == long
