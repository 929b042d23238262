"""A Slack chunk a crash may have posted is looked for by its metadata before it is posted
again (habakkuk/channels/slack_sent.py), against the fake's conversations.history and
conversations.replies (tests/channels/fake_slack_history.py)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from habakkuk.channels.adapter import Address
from habakkuk.channels.deliveries import SENDING, Sending
from habakkuk.channels.delivery_types import TextDelivery
from habakkuk.channels.slack import SlackAdapter
from habakkuk.channels.slack_sent import PAGE
from habakkuk.engine.channel_config import ChannelConfig
from tests.channels.fake_slack import BOT_TOKEN, DM, TEAM, FakeSlack

CHANNEL = "C0007"
DM_TO = Address("sl", f"{TEAM}-{DM}")


@pytest.fixture
async def adapter(slack: FakeSlack) -> AsyncIterator[SlackAdapter]:
    config = ChannelConfig(type="slack", base_url=slack.base_url)
    config.name = "sl"
    made = SlackAdapter(config, slack.app_token, slack.bot_token)
    yield made
    await made.close()


@pytest.fixture
def delivering() -> Iterator[None]:
    """Sends inside the delivery job `delivery:1` (as the delivery worker sets it)."""
    token = SENDING.set(Sending("delivery:1", TextDelivery(DM_TO, "x")))
    yield
    SENDING.reset(token)


def sending(chunk: int, attempted: float = 0.0) -> None:
    current = SENDING.get()
    assert current is not None
    SENDING.set(Sending(current.job, current.delivery, chunk=chunk, attempted=attempted))


@pytest.mark.usefixtures("delivering")
async def test_a_chunk_whose_send_started_before_is_found_and_not_posted_again(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    started = time.time()
    sending(0)
    ts = await adapter.send_text(DM_TO, "first")
    slack.message("and a word from the person meanwhile")
    sending(0, attempted=started)  # resumed: the record of chunk 0 was lost
    assert await adapter.send_text(DM_TO, "first") == ts
    sending(1, attempted=started)  # started, never posted: posted now
    other = await adapter.send_text(DM_TO, "second")
    assert other != ts and slack.texts() == ["first", "second"]
    assert [p.metadata for p in slack.posted] == [
        {"event_type": "habakkuk_delivery", "event_payload": {"delivery": "delivery:1", "chunk": i}}
        for i in (0, 1)
    ]
    looked = slack.of("conversations.history")
    assert len(looked) == 2 and all(c.params["include_all_metadata"] is True for c in looked)
    # oldest: the attempt less the clocks' margin (Slack's clock is not ours)
    assert all(float(c.params["oldest"]) < started - 60 for c in looked)


@pytest.mark.usefixtures("delivering")
async def test_a_chunk_in_a_thread_is_looked_for_among_the_threads_replies(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    parent = slack.message("a question", channel=CHANNEL, channel_type="channel")
    thread = str(parent["payload"]["event"]["ts"])
    to = Address("sl", f"{TEAM}-{CHANNEL}", thread)
    started = time.time()
    sending(0)
    ts = await adapter.send_text(to, "in the thread")
    sending(0, attempted=started)
    assert await adapter.send_text(to, "in the thread") == ts
    assert [p.thread_ts for p in slack.posted] == [thread]
    [looked] = slack.of("conversations.replies")
    assert looked.params["ts"] == thread and looked.params["channel"] == CHANNEL
    assert not slack.of("conversations.history")  # a thread's replies are not in it


@pytest.mark.usefixtures("delivering")
async def test_the_look_pages_through_a_busy_chat(adapter: SlackAdapter, slack: FakeSlack) -> None:
    started = time.time()
    sending(3)
    ts = await adapter.send_text(DM_TO, "early")
    for i in range(PAGE + 20):  # the person writes on: the chunk is on the second page
        slack.message(f"line {i}")
    sending(3, attempted=started)
    assert await adapter.send_text(DM_TO, "early") == ts
    pages = slack.of("conversations.history")
    assert len(pages) == 2 and pages[1].params["cursor"]
    assert slack.texts() == ["early"]


async def test_outside_a_delivery_nothing_is_looked_for_and_no_metadata_goes(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    await adapter.send_text(DM_TO, "a progress note")
    assert slack.posted[0].metadata == {} and not slack.of("conversations.history")


# -- the fake's history methods, as Slack documents them ---------------------------------


async def call(slack: FakeSlack, method: str, **params: object) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{slack.base_url}/{method}",
            json=params,
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        ) as response,
    ):
        body = await response.json()
    assert isinstance(body, dict)
    return body


async def test_the_fake_history_is_newest_first_in_its_window_with_metadata_on_request(
    slack: FakeSlack,
) -> None:
    said = [str(slack.message(f"m{i}")["payload"]["event"]["ts"]) for i in range(4)]
    slack.message("in a thread", thread_ts=said[0])  # a reply: not in the history
    page = await call(slack, "conversations.history", channel=DM, oldest=said[1], limit=2)
    assert [m["text"] for m in page["messages"]] == ["m3", "m2"]
    assert page["has_more"] is False
    everything = await call(slack, "conversations.history", channel=DM, limit=3)
    assert everything["has_more"] is True
    cursor = everything["response_metadata"]["next_cursor"]
    rest = await call(slack, "conversations.history", channel=DM, limit=3, cursor=cursor)
    assert [m["text"] for m in rest["messages"]] == ["m0"]
    exact = await call(
        slack, "conversations.history", channel=DM, oldest=said[2], latest=said[2], inclusive=True
    )
    assert [m["text"] for m in exact["messages"]] == ["m2"]
    thread = await call(slack, "conversations.replies", channel=DM, ts=said[0])
    assert [m["text"] for m in thread["messages"]] == ["m0", "in a thread"]
    missing = await call(slack, "conversations.replies", channel=DM, ts="1.000001")
    assert missing == {"ok": False, "error": "thread_not_found"}
