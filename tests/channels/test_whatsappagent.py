"""WhatsApp agents end to end: the fake agent platform (tests/channels/fake_wa_agent.py) is
long-polled for updates, and reads the replies back from its /messages."""

from __future__ import annotations

import itertools
import json
import stat
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from habakkuk.channels import whatsappagent
from habakkuk.channels.platforms import SetupCheckFailed, platform_module
from habakkuk.channels.whatsappagent import POLL_SPACING
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_wa_agent import (
    AGENT_KEY,
    ALICE,
    QUICK_SPACING,
    AgentDriver,
    FakeAgentPlatform,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"
ACCOUNT = "agent"


@dataclass
class Agent:
    """A runtime with a whatsappagent account polling the fake."""

    runtime: Runtime
    fake: FakeAgentPlatform
    driver: AgentDriver
    home: Home

    def turns(self) -> list[str]:
        return [r["status"] for r in rows(self.home, "SELECT status FROM jobs WHERE kind='turn'")]

    def state(self) -> str:
        assert self.runtime.channels is not None
        return self.runtime.channels.supervisor.states().get(ACCOUNT, "")

    def saved(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.state_file().read_text())
        return found

    def state_file(self) -> Any:
        return self.home.channels_dir / f"whatsappagent-{ACCOUNT}.json"


Start = Callable[..., Awaitable[Agent]]


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeAgentPlatform]:
    async with FakeAgentPlatform() as found:
        monkeypatch.setenv("WA_AGENT_KEY", AGENT_KEY)
        yield found


@pytest.fixture
def start(
    runtime_factory: Any, fake: FakeAgentPlatform, home: Home, monkeypatch: pytest.MonkeyPatch
) -> Start:
    """Open a runtime with the agent account (polls spaced quickly unless `real_spacing`)."""

    async def _start(script: str = ECHO, *, wait: bool = True, real_spacing: bool = False) -> Agent:
        if not real_spacing:
            monkeypatch.setattr(whatsappagent, "POLL_SPACING", QUICK_SPACING)
        driver = AgentDriver(fake)
        channel = f"channels:\n  {ACCOUNT}:\n" + textwrap.indent(
            driver.channel_yaml(ACCOUNT), "    "
        )
        runtime: Runtime = await runtime_factory(mock_config(script, mode="full", extra=channel))
        runtime.start_workers()
        assert runtime.channels is not None
        await runtime.channels.started()
        if wait:
            up = await runtime.channels.supervisor.wait_adapter(ACCOUNT, timeout=PROCESS_BOUND)
            assert up is not None
        return Agent(runtime, fake, driver, home)

    return _start


async def test_the_offset_is_saved_after_each_batch_and_polls_are_spaced(
    start: Start, fake: FakeAgentPlatform
) -> None:
    agent = await start(real_spacing=True)
    await agent.driver.say("one")
    await eventually(lambda: agent.driver.texts() == ["echo: one"], what="the first reply")
    await eventually(lambda: agent.state_file().exists(), what="the state file")
    assert agent.saved() == {"next_offset": 1}
    assert stat.S_IMODE(agent.state_file().stat().st_mode) == 0o600
    await agent.driver.say("two")
    await eventually(lambda: agent.driver.texts() == ["echo: one", "echo: two"], what="two")
    await eventually(lambda: agent.saved() == {"next_offset": 2}, what="the second offset")
    await eventually(lambda: fake.polls[-1][1] == 2, what="a poll from offset 2")
    starts = [at for at, _ in fake.polls]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # the fake notes each poll's arrival, not its start: allow the loopback's jitter (a
    # poller without the spacing asks again within milliseconds)
    assert all(gap >= POLL_SPACING - 0.25 for gap in gaps), gaps
    offsets = [offset for _, offset in fake.polls]
    assert offsets == sorted(offsets) and set(offsets) == {0, 1, 2}


async def test_the_first_start_skips_messages_over_ten_minutes_old(
    start: Start, fake: FakeAgentPlatform
) -> None:
    fake.push(ALICE, "from last week", age=7 * 86400)
    fake.push(ALICE, "from a quarter hour ago", age=900)
    fake.push(ALICE, "from five minutes ago", age=300)
    agent = await start()
    await eventually(
        lambda: agent.driver.texts() == ["echo: from five minutes ago"], what="the recent one"
    )
    await eventually(
        lambda: agent.state_file().exists() and agent.saved() == {"next_offset": 3},
        what="the offset",
    )
    assert len(agent.turns()) == 1


async def test_a_restart_reads_on_from_the_saved_offset(
    start: Start, fake: FakeAgentPlatform, home: Home
) -> None:
    home.channels_dir.mkdir(parents=True, exist_ok=True)
    (home.channels_dir / f"whatsappagent-{ACCOUNT}.json").write_text('{"next_offset": 1}\n')
    fake.push(ALICE, "already answered")  # update 0, before the saved offset
    fake.push(ALICE, "an hour old, after the offset", age=3600)  # not a first start: taken
    agent = await start()
    await eventually(
        lambda: agent.driver.texts() == ["echo: an hour old, after the offset"], what="the reply"
    )
    assert fake.polls[0][1] == 1


async def test_a_second_poller_409_is_fatal(start: Start, fake: FakeAgentPlatform) -> None:
    fake.conflict = True
    agent = await start(wait=False)
    await eventually(lambda: agent.state() == "fatal", what="the account to be fatal")


async def test_an_invalid_key_is_fatal(start: Start, fake: FakeAgentPlatform) -> None:
    fake.refuse_key = True
    agent = await start(wait=False)
    await eventually(lambda: agent.state() == "fatal", what="the account to be fatal")


async def test_a_send_answered_204_without_a_body_is_sent(
    start: Start, fake: FakeAgentPlatform
) -> None:
    fake.empty_sends = True
    agent = await start()
    await agent.driver.say("hello")
    await eventually(lambda: agent.driver.texts() == ["echo: hello"], what="the reply")
    await eventually(
        lambda: (
            [r["status"] for r in rows(agent.home, "SELECT status FROM jobs WHERE kind <> 'turn'")]
            == ["done"]
        ),
        what="the delivery to be done once",
    )


async def test_setup_checks_the_key(fake: FakeAgentPlatform) -> None:
    setup = platform_module("whatsappagent").SETUP
    config = ChannelConfig(type="whatsappagent", token_env="K", base_url=fake.base_url)
    fake.push(ALICE, "waiting")
    assert "1 update(s) waiting" in await setup.check(config, {"K": AGENT_KEY})
    with pytest.raises(SetupCheckFailed, match="refused the key"):
        await setup.check(config, {"K": "wrong"})
    fake.conflict = True
    with pytest.raises(SetupCheckFailed, match="another program polls"):
        await setup.check(config, {"K": AGENT_KEY})


async def test_a_file_comes_in_with_the_key_from_metas_hosts_only(
    start: Start, fake: FakeAgentPlatform, home: Home
) -> None:
    agent = await start()
    fake.push_file(ALICE, "notes.txt", b"apples\n", "text/plain", "read this")
    await eventually(
        lambda: any("echo: read this" in t for t in agent.driver.texts()), what="the reply"
    )
    [saved] = (home.default_workspace("main") / "inbox").iterdir()
    assert saved.name.endswith("notes.txt") and saved.read_bytes() == b"apples\n"
    # a file on any other host is never fetched with the agent's key
    attachment = {"id": "9", "url": "https://evil.example/f", "mime_type": "text/plain"}
    fake.push(ALICE, "and this", attachments=[attachment | {"name": "evil.txt"}])
    await eventually(
        lambda: any("could not be downloaded" in t for t in agent.driver.texts()),
        what="the reply saying the file could not be fetched",
    )
    assert len(list((home.default_workspace("main") / "inbox").iterdir())) == 1
