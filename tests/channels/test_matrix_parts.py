"""The Matrix adapter's parts: ids in addresses, sync parsing, HTML out, error mapping,
the setup check."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.channels.adapter import (
    Address,
    FatalAdapterError,
    RetryAfter,
    SendError,
    Undeliverable,
)
from habakkuk.channels.format_matrix import MATRIX_LIMIT, plain_body, render_chunks
from habakkuk.channels.matrix import SETUP, build, check_setup
from habakkuk.channels.matrix_api import MatrixClient, MatrixError, mapped_error
from habakkuk.channels.matrix_events import (
    decode_id,
    encode_id,
    parse_sync,
    without_reply_fallback,
)
from habakkuk.channels.platforms import SetupCheckFailed
from habakkuk.engine.channel_config import ChannelConfig
from tests.channels.fake_matrix import ALICE, BOT, FakeMatrix


@pytest.mark.parametrize(
    "matrix_id", ["!abc:example.org", "!x:host:8448", "$event:server", "$opaque", "!a%b:c"]
)
def test_a_matrix_id_round_trips_through_an_address(matrix_id: str) -> None:
    address = Address.parse(f"mx:{encode_id(matrix_id)}:{encode_id('$root:server')}")
    assert decode_id(address.chat) == matrix_id
    assert decode_id(address.thread) == "$root:server"


def sync_body(**rooms: Any) -> dict[str, Any]:
    return {"next_batch": "s9", "rooms": rooms}


def message(event_id: str, sender: str = ALICE, /, **content: Any) -> dict[str, Any]:
    return {
        "type": "m.room.message",
        "event_id": event_id,
        "sender": sender,
        "origin_server_ts": 1700000000000,
        "content": {"msgtype": "m.text", "body": "hi", **content},
    }


def test_a_sync_answer_becomes_rooms_messages_and_invites() -> None:
    thread = {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
              "m.in_reply_to": {"event_id": "$last"}}  # fmt: skip
    body = sync_body(
        join={
            "!r:s": {
                "summary": {"m.joined_member_count": 3},
                "state": {"events": [{"type": "m.room.encryption", "state_key": ""}]},
                "timeline": {
                    "events": [
                        message("$1", body="hello", **{"m.mentions": {"user_ids": [BOT]}}),
                        message("$2", BOT),  # our own: left out
                        message("$3", **{"m.relates_to": thread}),
                        message("$4", **{"m.relates_to": {"rel_type": "m.replace"}}),
                        {"type": "m.room.member", "state_key": ALICE, "content": {}},
                    ]
                },
            }
        },
        invite={
            "!i:s": {
                "invite_state": {
                    "events": [
                        {"type": "m.room.name", "state_key": "", "sender": ALICE},
                        {
                            "type": "m.room.member",
                            "state_key": BOT,
                            "sender": ALICE,
                            "content": {"membership": "invite"},
                        },
                    ]
                }
            }
        },
    )
    batch = parse_sync(body, BOT)
    assert batch.next_batch == "s9"
    [room] = batch.rooms
    assert (room.joined_count, room.encrypted, room.members_changed) == (3, True, True)
    first, threaded, edit = room.messages
    assert (first.body, first.mentions, first.ts) == ("hello", (BOT,), 1700000000000)
    # a thread's fallback reply is no reply the person wrote
    assert (threaded.thread, threaded.reply_to) == ("$root", "")
    assert edit.edit
    assert [(i.room, i.inviter) for i in batch.invites] == [("!i:s", ALICE)]


def test_a_voice_note_and_a_captioned_file_are_read() -> None:
    body = sync_body(
        join={
            "!r:s": {
                "timeline": {
                    "events": [
                        message(
                            "$v",
                            msgtype="m.audio",
                            body="Voice message.ogg",
                            url="mxc://s/v",
                            info={"mimetype": "audio/ogg", "size": 9},
                            **{"org.matrix.msc3245.voice": {}},
                        ),
                        message(
                            "$f",
                            msgtype="m.file",
                            body="see this",
                            filename="a.pdf",
                            url="mxc://s/f",
                        ),
                    ]
                }
            }
        }
    )
    voice, document = parse_sync(body, BOT).rooms[0].messages
    assert (voice.voice, voice.url, voice.size, voice.mimetype) == (
        True,
        "mxc://s/v",
        9,
        "audio/ogg",
    )
    assert (document.filename, document.body) == ("a.pdf", "see this")


def test_a_reply_fallback_is_cut_from_the_text() -> None:
    quoted = "> <@bot:s> echo: hi\n> more\n\nmy answer"
    assert without_reply_fallback(quoted) == "my answer"
    assert without_reply_fallback("> a quote I wrote") == "> a quote I wrote"


def test_markdown_goes_out_as_html_with_a_plain_body() -> None:
    [chunk] = render_chunks("**bold** and `code`\nnext line\n\n```\na\nb\n```")
    assert chunk == "<b>bold</b> and <code>code</code><br>next line<br><br><pre>a\nb</pre>"
    assert plain_body(chunk) == "bold and code\nnext line\n\na\nb"


def test_a_long_reply_is_cut_into_chunks_under_the_event_size() -> None:
    text = "\n\n".join(["word " * 700] * 6)
    chunks = render_chunks(text)
    assert len(chunks) > 1 and all(len(c) <= MATRIX_LIMIT for c in chunks)
    assert all(len(c.encode()) * 2 < 65536 for c in chunks)
    assert " ".join(plain_body(c) for c in chunks).split() == text.split()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, {"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 2500}, RetryAfter),
        (401, {"errcode": "M_UNKNOWN_TOKEN"}, FatalAdapterError),
        (403, {"errcode": "M_FORBIDDEN"}, Undeliverable),
        (413, {"errcode": "M_TOO_LARGE"}, Undeliverable),
        (502, {}, SendError),
    ],
)
def test_errors_map_to_what_the_delivery_worker_needs(
    status: int, body: dict[str, Any], expected: type[Exception]
) -> None:
    error = mapped_error("send", status, MatrixError.parse(body, status), None)
    assert type(error) is expected or (expected is Undeliverable and isinstance(error, expected))
    if isinstance(error, RetryAfter):
        assert error.seconds == 2.5
    if expected is SendError:
        assert not isinstance(error, Undeliverable)


def test_retry_after_falls_back_to_the_header() -> None:
    error = mapped_error("sync", 429, MatrixError.parse({}, 429), "7")
    assert isinstance(error, RetryAfter) and error.seconds == 7.0


async def test_a_request_error_never_names_the_token(hs: FakeMatrix) -> None:
    client = MatrixClient(hs.base_url, "syt_wrong_secret")
    try:
        with pytest.raises(FatalAdapterError) as caught:
            await client.request("GET", "/account/whoami")
    finally:
        await client.close()
    assert "M_UNKNOWN_TOKEN" in str(caught.value) and "syt_wrong_secret" not in str(caught.value)
    assert hs.calls[-1].path == "/_matrix/client/v3/account/whoami"  # not in the URL either


def matrix_config(hs: FakeMatrix, user: str = BOT) -> ChannelConfig:
    config = ChannelConfig(
        type="matrix", homeserver="https://unused.example", base_url=hs.base_url,
        user_id=user, token_env="MATRIX_TOKEN",
    )  # fmt: skip
    config.name = "mx"
    return config


async def test_the_setup_check_names_the_bot(hs: FakeMatrix) -> None:
    assert await check_setup(matrix_config(hs), {"MATRIX_TOKEN": hs.token}) == BOT


async def test_the_setup_check_refuses_a_wrong_token_or_user(hs: FakeMatrix) -> None:
    with pytest.raises(SetupCheckFailed, match=r"refused the access token: .*M_UNKNOWN_TOKEN"):
        await check_setup(matrix_config(hs), {"MATRIX_TOKEN": "nope"})
    with pytest.raises(
        SetupCheckFailed, match=r"belongs to @bot:fake\.test, not @other:fake\.test"
    ):
        await check_setup(matrix_config(hs, "@other:fake.test"), {"MATRIX_TOKEN": hs.token})
    unreachable = ChannelConfig(type="matrix", homeserver="http://127.0.0.1:9", token_env="T")
    with pytest.raises(SetupCheckFailed, match=r"cannot reach http://127\.0\.0\.1:9: "):
        await check_setup(unreachable, {"T": "x"})


def test_the_setup_step_asks_for_the_homeserver_the_id_and_the_token() -> None:
    assert [f.key for f in SETUP.fields] == ["homeserver", "user_id", "token_env", "allow_from"]
    assert callable(build)
