"""Mattermost sends and catch-up on the fake server (tests/channels/fake_mattermost.py):
a reply whose create the server took but whose answer was lost is retried with the same
`pending_post_id` and posts once; a part a crash cut short is found by its key rather
than posted again; a direct message opened while Habakkuk was down is found when it
comes back, and its post answered once."""

from __future__ import annotations

import textwrap
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.adapter import Address
from habakkuk.channels.deliveries import SENDING, Sending
from habakkuk.channels.delivery_types import TextDelivery
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
from tests.channels.test_mattermost_parts import adapter_for
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

    def delivery() -> list[tuple[str, int]]:
        found = rows(home, "SELECT status, attempts FROM jobs WHERE id LIKE 'reply:%'")
        return [(r["status"], r["attempts"]) for r in found]

    await eventually(lambda: delivery() == [("done", 2)], what="the delivery to finish")
    # (the retry found the post by its key; had it not, the server would have dropped
    # the create by its pending_post_id)
    assert [p.message for p in fake.of() if p.user_id == BOT_ID] == ["echo: hello"]
    assert turns(home) == ["done"]


async def test_a_create_sent_again_within_the_servers_window_posts_once(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    adapter = adapter_for(fake, tmp_path / "mm.json")
    to = Address("mm", DM_CHANNEL)
    token = SENDING.set(Sending("reply:turn:mm:c:p", TextDelivery(to, "one")))
    try:
        first = await adapter.send_text(to, "one")
        assert await adapter.send_text(to, "one") == first  # (no attempt noted: no look)
    finally:
        SENDING.reset(token)
        await adapter.close()
    assert fake.deduplicated == 1
    assert [p.message for p in fake.of() if p.user_id == BOT_ID] == ["one"]


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


async def test_a_part_a_crash_cut_short_is_looked_for_before_it_is_posted_again(
    fake: FakeMattermost, tmp_path: Path
) -> None:
    adapter = adapter_for(fake, tmp_path / "mm.json")
    to = Address("mm", DM_CHANNEL)
    sending = Sending("reply:turn:mm:c:p", TextDelivery(to, "one\n\ntwo"), chunk=0)
    token = SENDING.set(sending)
    try:
        first = await adapter.send_text(to, "one")
        fake.forget_pending()  # the restart came later than the server's 30 seconds
        # The resumed part started before the crash: found by its key, not posted again.
        SENDING.set(replace(sending, attempted=time.time() - 5))
        assert await adapter.send_text(to, "one") == first
        # The next part, never posted, is posted.
        SENDING.set(replace(sending, chunk=1, attempted=time.time() - 5))
        second = await adapter.send_text(to, "two")
    finally:
        SENDING.reset(token)
        await adapter.close()
    assert second != first
    assert [p.message for p in fake.of() if p.user_id == BOT_ID] == ["one", "two"]
