"""The Signal adapter's parts: style ranges in UTF-16 units, envelopes, errors, SSE lines."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from habakkuk.channels.adapter import (
    Address,
    FatalAdapterError,
    InboundMessage,
    RetryAfter,
    SendError,
    Undeliverable,
)
from habakkuk.channels.signal import MAX_EDITS, SignalAdapter, is_person
from habakkuk.channels.signal_format import SIGNAL_LIMIT, signal_chunks, styled, utf16_len
from habakkuk.channels.signal_wire import SseEvent, mapped_error, parse_error, parse_event
from habakkuk.channels.tasks import cancel_and_wait
from habakkuk.engine.channel_config import ChannelConfig
from tests.channels.fake_signal import ALICE_NUMBER, ALICE_UUID, BOT_NUMBER, GROUP_ID, FakeSignal
from tests.helpers import eventually


def one(markdown: str) -> tuple[str, list[str]]:
    [chunk] = signal_chunks(markdown)
    body = styled(chunk)
    return body.text, body.text_style


def test_styles_count_utf16_units_past_emoji_outside_the_bmp() -> None:
    text, styles = one("🎉🎉 **done** ~~old~~ `x`")
    assert text == "🎉🎉 done old x"
    assert styles == ["5:4:BOLD", "10:3:STRIKETHROUGH", "14:1:MONOSPACE"]
    assert utf16_len("🎉") == 2


def test_nested_styles_headings_code_blocks_links_and_quotes() -> None:
    text, styles = one(
        "# Plan\n\n**bold _both_**\n\n```py\nx = 1\n```\n\n> said\n\n[docs](https://e.org)"
    )
    assert text == "Plan\n\nbold both\n\nx = 1\n\n> said\n\ndocs (https://e.org)"
    assert "0:4:BOLD" in styles and "6:9:BOLD" in styles and "11:4:ITALIC" in styles
    assert "17:5:MONOSPACE" in styles
    assert len(styles) == 4  # <pre><code> is one MONOSPACE range, not two


def test_escaped_markup_comes_back_as_the_characters_written() -> None:
    assert one("a < b & c > d") == ("a < b & c > d", [])


def test_a_long_reply_is_cut_into_chunks_signal_sends_inline() -> None:
    paragraph = "\n".join(["**word** " * 10] * 30)  # lines of 90 characters
    reply = "\n\n".join([paragraph] * 3)
    chunks = signal_chunks(reply)
    assert len(chunks) > 1
    bodies = [styled(c) for c in chunks]
    assert all(len(b.text) <= SIGNAL_LIMIT for b in bodies)
    assert " ".join(b.text for b in bodies).split() == reply.replace("**", "").split()
    for body in bodies:
        for style in body.styles:
            assert style.start + style.length <= utf16_len(body.text)


@pytest.mark.parametrize(
    ("error", "expected", "words"),
    [
        ({"code": -1, "message": "Failed to send message", "data": None}, Undeliverable, "-1"),
        (
            {
                "code": -1,
                "message": "Failed to send message",
                "data": {"response": {"results": [{"type": "NETWORK_FAILURE"}]}},
            },
            SendError,
            "Failed",
        ),
        ({"code": -4, "message": "untrusted identities"}, Undeliverable, "safety number"),
        ({"code": -3, "message": "Unable to check"}, SendError, "-3"),
        ({"code": -32603, "message": "Failed: x (IOException)"}, SendError, "IOException"),
        (
            {"code": -32602, "message": "Specified account does not exist"},
            FatalAdapterError,
            f"no account {BOT_NUMBER}",
        ),
    ],
)
def test_signal_cli_errors_map_to_what_the_delivery_worker_needs(
    error: dict[str, Any], expected: type[Exception], words: str
) -> None:
    mapped = mapped_error("send", parse_error(error), BOT_NUMBER)
    assert type(mapped) is expected
    assert words in str(mapped)


def test_a_rate_limit_waits_as_long_as_signal_asks() -> None:
    results = [{"type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": 7}, {"type": "SUCCESS"}]
    error = {"code": -5, "message": "rate limiting", "data": {"response": {"results": results}}}
    mapped = mapped_error("send", parse_error(error), BOT_NUMBER)
    assert isinstance(mapped, RetryAfter) and mapped.seconds == 7
    bare = mapped_error("send", parse_error({"code": -5, "message": "x"}), BOT_NUMBER)
    assert isinstance(bare, RetryAfter) and bare.seconds == 60


def test_sse_lines_make_events_and_comments_are_skipped() -> None:
    event = SseEvent()
    assert event.feed(":") is None
    assert event.feed("event:receive") is None
    assert event.feed('data:{"a":') is None
    assert event.feed("data: 1}") is None
    done = event.feed("")
    assert done is not None and done.name == "receive" and done.data == ['{"a":', "1}"]
    assert SseEvent().feed("") is None  # a blank line alone is no event


def adapter() -> SignalAdapter:
    config = ChannelConfig(type="signal", base_url="http://127.0.0.1:1", account=BOT_NUMBER)
    config.name = "sig"
    return SignalAdapter(config)


def envelope(data: dict[str, Any], **source: Any) -> str:
    body = {
        "sourceNumber": ALICE_NUMBER,
        "sourceUuid": ALICE_UUID,
        "sourceName": "Alice",
        "timestamp": 1700000000123,
        "dataMessage": {"timestamp": 1700000000123, **data},
        **source,
    }
    return json.dumps({"account": BOT_NUMBER, "envelope": body})


def test_a_mention_after_an_emoji_is_found_by_utf16_offset() -> None:
    text = "👋 \ufffc hi \ufffc"
    mentions = [
        {"number": BOT_NUMBER, "uuid": None, "start": 3, "length": 1},  # 👋 is two units
        {"number": ALICE_NUMBER, "uuid": ALICE_UUID, "start": 8, "length": 1},
    ]
    parsed = parse_event(
        envelope({"message": text, "mentions": mentions, "groupInfo": {"groupId": GROUP_ID}})
    )
    assert parsed is not None
    message = adapter().convert(parsed)
    assert message is not None
    assert message.text == f"👋 hi @{ALICE_NUMBER}"
    assert (message.chat, message.is_group, message.addressed) == (GROUP_ID, True, True)
    assert message.message_id == f"1700000000123@{ALICE_UUID}"
    assert (message.sender, message.sender_aliases) == (ALICE_UUID, [ALICE_NUMBER])


def test_the_jsonrpc_notification_form_is_read_too() -> None:
    wrapped = {
        "jsonrpc": "2.0",
        "method": "receive",
        "params": json.loads(envelope({"message": "hi"})),
    }
    parsed = parse_event(json.dumps(wrapped))
    assert parsed is not None and parsed.data is not None and parsed.data.text == "hi"
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_event("[1]")


def test_our_own_envelopes_teach_our_uuid_and_are_not_messages() -> None:
    ours = adapter()
    own = parse_event(
        envelope({"message": "from my phone"}, sourceNumber=BOT_NUMBER, sourceUuid="b0b")
    )
    assert own is not None and ours.convert(own) is None
    assert ours.self_uuid == "b0b"
    quoted = parse_event(
        envelope(
            {
                "message": "this",
                "groupInfo": {"groupId": GROUP_ID},
                "quote": {"id": 5, "authorUuid": "b0b"},
            }
        )
    )
    assert quoted is not None
    message = ours.convert(quoted)
    assert message is not None and message.addressed


def test_voice_notes_audio_photos_and_documents_get_their_kinds() -> None:
    files = [
        {"id": "v", "contentType": "audio/aac", "filename": None, "size": 3},
        {"id": "a", "contentType": "audio/mpeg", "filename": "song.mp3"},
        {"id": "p", "contentType": "image/jpeg", "filename": None},
        {"id": "d", "contentType": "application/pdf", "filename": "x.pdf"},
    ]
    parsed = parse_event(envelope({"attachments": files}))
    assert parsed is not None
    message = adapter().convert(parsed)
    assert message is not None
    kinds = [(a.kind, a.name, a.file_id) for a in message.attachments]
    assert kinds == [
        ("voice", "voice.aac", f"v|{ALICE_UUID}"),
        ("audio", "song.mp3", f"a|{ALICE_UUID}"),
        ("photo", "photo.jpg", f"p|{ALICE_UUID}"),
        ("document", "x.pdf", f"d|{ALICE_UUID}"),
    ]


def test_a_chat_is_a_person_by_uuid_or_number_else_a_group() -> None:
    assert is_person(ALICE_UUID) and is_person(ALICE_NUMBER)
    assert not is_person(GROUP_ID)


async def test_edits_stop_at_signals_limit_and_a_reaction_is_removed_by_name(
    signal_cli: FakeSignal,
) -> None:
    config = ChannelConfig(type="signal", base_url=signal_cli.base_url, account=BOT_NUMBER)
    config.name = "sig"
    ours = SignalAdapter(config)
    to = Address("sig", ALICE_UUID)
    try:
        sent = await ours.send_text(to, ours.render("draft")[0], silent=True)
        for index in range(MAX_EDITS):
            await ours.edit_text(to, sent, ours.render(f"draft **{index}**")[0])
        with pytest.raises(Undeliverable, match="at most 10 edits"):
            await ours.edit_text(to, sent, ours.render("one too many")[0])
        [message] = signal_cli.messages()
        assert (message.text, message.styles, message.edits) == ("draft 9", ["6:1:BOLD"], 10)
        assert not message.urgent

        person = f"1700000000123@{ALICE_UUID}"
        await ours.react(to, person, "👀")
        await ours.react(to, person, None)
        await ours.react(to, person, None)  # nothing left to remove: no call
        added, removed = (c.params for c in signal_cli.of("sendReaction"))
        assert (added["emoji"], added.get("remove")) == ("👀", None)
        assert (removed["emoji"], removed["remove"]) == ("👀", True)
        assert removed["targetAuthor"] == ALICE_UUID
        assert removed["targetTimestamp"] == 1700000000123
    finally:
        await ours.close()


async def test_a_daemon_that_is_not_there_is_a_send_error_to_retry() -> None:
    config = ChannelConfig(type="signal", base_url="http://127.0.0.1:9", account=BOT_NUMBER)
    config.name = "sig"
    ours = SignalAdapter(config)
    try:
        with pytest.raises(SendError, match=r"^send: ClientConnectorError") as raised:
            await ours.send_text(Address("sig", ALICE_UUID), "hi")
        assert not isinstance(raised.value, Undeliverable)
    finally:
        await ours.close()


# -- messages of different chats at once, of one chat in order ----------------------------

BOB_UUID = "b0b00000-0000-4000-8000-000000000043"


def adapter_of(signal_cli: FakeSignal) -> SignalAdapter:
    config = ChannelConfig(type="signal", base_url=signal_cli.base_url, account=BOT_NUMBER)
    config.name = "sig"
    return SignalAdapter(config)


async def test_a_slow_chat_does_not_hold_up_another_and_each_keeps_its_order(
    signal_cli: FakeSignal,
) -> None:
    ours = adapter_of(signal_cli)
    release = asyncio.Event()
    handled: list[str] = []

    async def inbox(message: InboundMessage) -> None:
        if message.text == "slow":
            await release.wait()
        handled.append(message.text)

    run = asyncio.create_task(ours.run(inbox, lambda: None))
    try:
        await eventually(lambda: bool(signal_cli.streams), what="the event stream")
        signal_cli.message("slow")
        signal_cli.message("after slow")  # Alice's chat: waits for "slow"
        signal_cli.message("elsewhere", uuid=BOB_UUID, number=None, name="Bob")
        signal_cli.message("in the group", group=GROUP_ID)  # Alice, but another chat
        await eventually(
            lambda: sorted(handled) == ["elsewhere", "in the group"], what="the other chats"
        )
        release.set()
        await eventually(lambda: len(handled) == 4, what="Alice's chat")
        assert handled[2:] == ["slow", "after slow"]
        assert not run.done()
    finally:
        await cancel_and_wait(run)
        await ours.close()
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("signal:")] == []


async def test_a_message_the_gateway_cannot_take_ends_the_run_with_its_error(
    signal_cli: FakeSignal,
) -> None:
    ours = adapter_of(signal_cli)
    held = asyncio.Event()
    cancelled: list[str] = []

    async def inbox(message: InboundMessage) -> None:
        if message.text == "slow":
            held.set()
            try:
                await asyncio.Event().wait()  # never set: only the run's end stops it
            except asyncio.CancelledError:
                cancelled.append(message.text)
                raise
        raise OSError("disk I/O error")

    run = asyncio.create_task(ours.run(inbox, lambda: None))
    try:
        await eventually(lambda: bool(signal_cli.streams), what="the event stream")
        signal_cli.message("slow", uuid=BOB_UUID, number=None, name="Bob")
        await held.wait()
        signal_cli.message("cannot be written")  # while Bob's message is still in flight
        with pytest.raises(OSError, match="disk I/O error"):
            await asyncio.wait_for(run, 15)
        assert cancelled == ["slow"]
    finally:
        await cancel_and_wait(run)
        await ours.close()
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("signal:")] == []


async def test_messages_in_flight_when_the_stream_drops_still_go_in(
    signal_cli: FakeSignal,
) -> None:
    ours = adapter_of(signal_cli)
    release = asyncio.Event()
    handled: list[str] = []

    async def inbox(message: InboundMessage) -> None:
        if message.text == "slow":
            await release.wait()
        handled.append(message.text)

    run = asyncio.create_task(ours.run(inbox, lambda: None))
    try:
        await eventually(lambda: bool(signal_cli.streams), what="the event stream")
        signal_cli.message("slow")
        await eventually(lambda: signal_cli.connections == 1, what="the first stream")
        signal_cli.drop_streams()
        await eventually(lambda: not signal_cli.streams, what="the stream dropped")
        release.set()
        await eventually(lambda: handled == ["slow"], what="the message in flight")
        await eventually(lambda: signal_cli.connections == 2, what="the stream reopened")
        signal_cli.message("after the drop")
        await eventually(lambda: handled == ["slow", "after the drop"], what="the next one")
    finally:
        await cancel_and_wait(run)
        await ours.close()
