"""Mattermost through a runtime on the fake server (tests/channels/fake_mattermost.py):
a reply whose create the server took but whose answer was lost is retried with the same
`pending_post_id` and posts once; a direct message opened while Habakkuk was down is
found when it comes back, and its post answered once."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from typing import Any

import pytest

from habakkuk.channels.mattermost import pending_post_id
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.channels.e2e_support import rows
from tests.channels.fake_mattermost import (
    BOT_ID,
    DM_CHANNEL,
    TOKEN,
    FakeMattermost,
    MattermostDriver,
)
from tests.conftest import mock_config
from tests.helpers import PROCESS_BOUND, eventually

ECHO = "- 'echo: {input}'"


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeMattermost]:
    async with FakeMattermost() as server:
        monkeypatch.setenv("MATTERMOST_TEST_TOKEN", TOKEN)
        yield server


async def started(runtime_factory: Any, fake: FakeMattermost) -> Runtime:
    """A runtime answering on the fake with the echo script, its account connected."""
    entry = MattermostDriver(fake).channel_yaml("mm")
    config = "channels:\n  mm:\n" + textwrap.indent(entry, "    ")
    runtime: Runtime = await runtime_factory(mock_config(ECHO, mode="full", extra=config))
    runtime.start_workers()
    assert runtime.channels is not None
    await runtime.channels.started()
    up = await runtime.channels.supervisor.wait_adapter("mm", timeout=PROCESS_BOUND)
    assert up is not None
    return runtime


def replies(fake: FakeMattermost, channel: str = DM_CHANNEL) -> list[str]:
    return [p.message for p in fake.of(channel) if p.user_id == BOT_ID]


def turns(home: Home) -> list[str]:
    return [r["status"] for r in rows(home, "SELECT status FROM jobs WHERE kind='turn'")]


async def test_a_send_retried_after_its_answer_was_lost_posts_once(
    runtime_factory: Any, fake: FakeMattermost, home: Home
) -> None:
    await started(runtime_factory, fake)
    fake.lose_answers = 1  # the server stores the reply, the connection drops before its answer
    await fake.say("hello")
    await eventually(lambda: fake.deduplicated == 1, what="the retried send")

    def delivery() -> list[tuple[str, int]]:
        found = rows(home, "SELECT status, attempts FROM jobs WHERE id LIKE 'reply:%'")
        return [(r["status"], r["attempts"]) for r in found]

    await eventually(lambda: delivery() == [("done", 2)], what="the delivery to finish")
    assert [p.message for p in fake.of() if p.user_id == BOT_ID] == ["echo: hello"]
    assert turns(home) == ["done"]


def test_the_pending_post_id_is_the_same_for_the_same_part_of_the_same_delivery() -> None:
    key = pending_post_id("reply:turn:mm:c:p", 0)
    assert key == pending_post_id("reply:turn:mm:c:p", 0)
    assert key != pending_post_id("reply:turn:mm:c:p", 1)
    assert key != pending_post_id("reply:turn:mm:c:q", 0)


async def test_a_direct_message_opened_while_down_is_answered_once(
    runtime_factory: Any, fake: FakeMattermost, home: Home
) -> None:
    runtime = await started(runtime_factory, fake)
    await fake.say("hello")
    await eventually(lambda: len(replies(fake)) == 1, what="the first reply")
    assert runtime.channels is not None
    await runtime.channels.stop()
    await runtime.close()
    # While Habakkuk is down, Alice opens a new direct message with the bot and writes,
    # then writes in the old one too (whose catch-up must not hide the new one's post).
    opened = fake.open_direct()
    asked = await fake.say("are you there?", channel=opened)
    await fake.say("and here?")
    restarted = await started(runtime_factory, fake)
    await eventually(lambda: replies(fake, opened) == ["echo: are you there?"], what="the answer")
    await eventually(lambda: replies(fake) == ["echo: hello", "echo: and here?"], what="both")
    await fake.again(asked)  # the same post over the socket too: seen, not run again
    await fake.say("and now?", channel=opened)
    await eventually(lambda: len(replies(fake, opened)) == 2, what="the live answer")
    assert replies(fake, opened) == ["echo: are you there?", "echo: and now?"]
    assert turns(home) == ["done"] * 4
    assert restarted.channels is not None
