"""Slack's parts on their own: mrkdwn out and in, frames parsed, the Web API's errors
mapped, and the adapter's sends against the fake Slack."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.channels.adapter import (
    Address,
    Attachment,
    Button,
    FatalAdapterError,
    RetryAfter,
    Undeliverable,
    Unsupported,
)
from habakkuk.channels.slack import SlackAdapter
from habakkuk.channels.slack_events import SlackAction, SlackCommand, SlackMessage, parse_frame
from habakkuk.channels.slack_format import (
    SLACK_LIMIT,
    mrkdwn_chunks,
    mrkdwn_to_plain,
    plain_text,
    render_inline,
)
from habakkuk.engine.channel_config import ChannelConfig
from tests.channels.fake_slack import DM, TEAM, FakeSlack

# -- mrkdwn ------------------------------------------------------------------------------


def test_markdown_becomes_mrkdwn() -> None:
    [text] = mrkdwn_chunks(
        "# Plan\n\n**bold** and *it* and ~~gone~~ and `a<b` and [site](https://e.com/?a=1&b=2)\n"
        "- one\n- two\n\n> quoted\n\n```py\nif a < b:\n    pass\n```\nsnake_case_name stays"
    )
    assert text.startswith("*Plan*\n\n")
    assert "*bold* and _it_ and ~gone~ and `a&lt;b` and <https://e.com/?a=1&amp;b=2|site>" in text
    assert "• one\n• two" in text
    assert "> quoted" in text
    assert "```\nif a &lt; b:\n    pass\n```" in text
    assert text.endswith("snake_case_name stays")


@pytest.mark.parametrize(
    "written",
    ["<!channel>", "<!here>", "<!everyone>", "<@U0123ABC>", "<!subteam^S1>", "<#C1|general>"],
)
def test_what_the_model_writes_never_pings_anyone(written: str) -> None:
    rendered = render_inline(f"hey {written} look")
    assert "<" not in rendered and ">" not in rendered
    assert rendered == f"hey {written.replace('<', '&lt;').replace('>', '&gt;')} look"


def test_a_link_label_cannot_break_out_of_its_link() -> None:
    assert render_inline("[a|b>c](https://e.com/x|y)") == "<https://e.com/x%7Cy|a¦b&gt;c>"


def test_chunks_stay_under_slacks_limit_and_are_deterministic() -> None:
    paragraph = "word & <tag> " * 400
    text = "\n\n".join([paragraph] * 3) + "\n\n```\n" + "x < y\n" * 900 + "```"
    chunks = mrkdwn_chunks(text)
    assert len(chunks) > 3 and all(len(c) <= SLACK_LIMIT for c in chunks)
    assert mrkdwn_chunks(text) == chunks
    assert all(c.count("```") % 2 == 0 for c in chunks)  # every code piece closes its fence
    assert mrkdwn_chunks("   ") == ["…"]


def test_incoming_mrkdwn_reads_as_plain_text() -> None:
    text = "<@UBOT> see <https://e.com|the site> &amp; <#C1|general>, <@U2> &lt;3 <!here>"
    assert plain_text(text, strip_user="UBOT") == (
        "see the site (https://e.com) & #general, @U2 <3 @here"
    )


def test_what_the_bot_sent_reads_as_plain_words() -> None:
    sent = mrkdwn_chunks("**Approval needed**: exec\n\n`echo hi` and *it* & <x>\n\n```\na<b\n```")
    assert mrkdwn_to_plain(sent[0]) == "Approval needed: exec\n\necho hi and it & <x>\n\na<b"


# -- frames ------------------------------------------------------------------------------


def test_frames_parse_into_typed_payloads() -> None:
    fake = FakeSlack()
    message = fake.message("hi", files=[fake.share("a.png", b"x", "image/png")])
    frame = parse_frame(_dumps(message))
    assert frame is not None and frame.type == "events_api"
    assert frame.envelope_id == message["envelope_id"]
    assert isinstance(frame.payload, SlackMessage)
    assert (frame.payload.team, frame.payload.channel, frame.payload.subtype) == (
        TEAM,
        DM,
        "file_share",
    )
    assert frame.payload.files[0].url.endswith("/files/F0001/a.png?download=1")
    press = parse_frame(_dumps(fake.press("fy|n|0", message_ts="1.2")))
    assert press is not None and isinstance(press.payload, SlackAction)
    assert (press.payload.value, press.payload.message_ts) == ("fy|n|0", "1.2")
    command = parse_frame(_dumps(fake.command("/habakkuk", "new")))
    assert command is not None and isinstance(command.payload, SlackCommand)
    disconnect = parse_frame('{"type": "disconnect", "reason": "warning"}')
    assert disconnect is not None and disconnect.reason == "warning" and not disconnect.payload
    assert parse_frame("not json") is None and parse_frame("[1]") is None


def _dumps(envelope: dict[str, object]) -> str:
    return json.dumps(envelope)


# -- the adapter against the fake ---------------------------------------------------------


@pytest.fixture
async def adapter(slack: FakeSlack) -> AsyncIterator[SlackAdapter]:
    config = ChannelConfig(type="slack", base_url=slack.base_url)
    config.name = "sl"
    made = SlackAdapter(config, slack.app_token, slack.bot_token)
    yield made
    await made.close()


TO = Address("sl", f"{TEAM}-{DM}")


async def test_a_rate_limit_is_retry_after_its_header(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    slack.rate_limited = 1
    with pytest.raises(RetryAfter, match=r"chat\.postMessage: rate limited") as caught:
        await adapter.send_text(TO, "hi")
    assert caught.value.seconds == 1.0
    assert await adapter.send_text(TO, "hi")  # the next one goes through


async def test_a_refused_token_is_fatal_and_never_quoted(slack: FakeSlack) -> None:
    config = ChannelConfig(type="slack", base_url=slack.base_url)
    config.name = "sl"
    adapter = SlackAdapter(config, slack.app_token, "xoxb-revoked-SECRET")
    try:
        with pytest.raises(FatalAdapterError) as caught:
            await adapter.send_text(TO, "hi")
        assert str(caught.value) == "chat.postMessage: invalid_auth (check the Slack tokens)"
    finally:
        await adapter.close()


@pytest.mark.parametrize("error", ["channel_not_found", "is_archived", "not_in_channel"])
async def test_a_chat_gone_is_undeliverable(
    adapter: SlackAdapter, slack: FakeSlack, error: str
) -> None:
    slack.block(DM, error)
    with pytest.raises(Undeliverable, match=error):
        await adapter.send_text(TO, "hi")


async def test_buttons_are_stripped_even_after_a_restart(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    ts = await adapter.send_text(TO, "Approve?", buttons=[[Button("Yes", "fy|n|0")]])
    assert slack.with_buttons()
    config = adapter.config
    fresh = SlackAdapter(config, slack.app_token, slack.bot_token)  # knows no texts
    try:
        await fresh.strip_buttons(TO, ts)
    finally:
        await fresh.close()
    assert not slack.with_buttons()
    posted = slack.message_at(DM, ts)
    assert posted is not None and posted.text == "Approve?"


async def test_a_download_slack_refuses_says_which_scope(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    shared = slack.share("a.pdf", b"%PDF", "application/pdf")
    url = str(shared["url_private_download"])
    assert await adapter.download(Attachment("document", url, "a.pdf", "application/pdf")) == (
        b"%PDF"
    )
    slack.bot_token = "xoxb-another"  # the file is not ours to read: the sign-in page
    with pytest.raises(Undeliverable, match="the app needs files:read"):
        await adapter.download(Attachment("document", url, "a.pdf", "application/pdf"))


async def test_a_file_slack_refuses_is_unsupported(
    adapter: SlackAdapter, slack: FakeSlack, tmp_path: Path
) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"0" * 10)
    slack.refuse_files("file_upload_size_restricted")
    with pytest.raises(Unsupported, match="file_upload_size_restricted"):
        await adapter.send_file(TO, path)
    slack.refuse_files("")
    file_id = await adapter.send_file(TO, path, caption="here", name="shown.bin")
    assert file_id and [(s.name, s.data, s.comment) for s in slack.shared] == [
        ("shown.bin", b"0" * 10, "here")
    ]
