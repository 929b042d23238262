"""The delivery payload codec: the formats queued jobs carry, and what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from habakkuk.channels.adapter import Address, Button
from habakkuk.channels.delivery_types import (
    FileDelivery,
    MalformedDelivery,
    PollDelivery,
    ReplyDelivery,
    TextDelivery,
    from_payload,
    to_payload,
)

TO = Address("tg", "42")

# Payloads exactly as the producers before the typed deliveries stored them.
OLD_PAYLOADS: list[tuple[dict[str, Any], Any]] = [
    ({"kind": "text", "to": "tg:42", "text": "paired"}, TextDelivery(TO, "paired")),
    (
        {"kind": "text", "to": "tg:42:7", "text": "hi", "reply_to": "11"},
        TextDelivery(Address("tg", "42", "7"), "hi", reply_to="11"),
    ),
    (
        {
            "kind": "text",
            "to": "tg:42",
            "text": "Approve?",
            "buttons": [[{"text": "Yes", "data": "fy|n|0"}, {"text": "No", "data": "fy|n|1"}]],
        },
        TextDelivery(TO, "Approve?", buttons=((Button("Yes", "fy|n|0"), Button("No", "fy|n|1")),)),
    ),
    (
        {"kind": "file", "to": "tg:42", "path": "/b/x.md", "name": "s.md", "caption": "c"},
        FileDelivery(TO, Path("/b/x.md"), "s.md", "c"),
    ),
    (
        {
            "kind": "poll",
            "to": "tg:42",
            "question": "Lunch?",
            "options": ["pizza", "salad"],
            "multiple": True,
        },
        PollDelivery(TO, "Lunch?", ("pizza", "salad"), True),
    ),
    (
        {"kind": "reply", "turn": "turn:tg:42:5", "to": "tg:42", "reply_to": "5"},
        ReplyDelivery(TO, "turn:tg:42:5", "5"),
    ),
    (
        {"kind": "reply", "turn": "turn:tg:42:5", "to": "tg:42", "reply_to": None},
        ReplyDelivery(TO, "turn:tg:42:5"),
    ),
]


# A voice note (a file with the voice flag and its length) and a reply read aloud.
VOICE_PAYLOADS: list[tuple[dict[str, Any], Any]] = [
    (
        {
            "kind": "file",
            "to": "tg:42",
            "path": "/b/n.ogg",
            "name": "n.ogg",
            "caption": "",
            "voice": True,
            "duration": 2.5,
        },
        FileDelivery(TO, Path("/b/n.ogg"), "n.ogg", voice=True, duration=2.5),
    ),
    (
        {"kind": "reply", "turn": "t1", "to": "tg:42", "reply_to": "5", "voice": "only"},
        ReplyDelivery(TO, "t1", "5", voice="only"),
    ),
]


@pytest.mark.parametrize(("payload", "expected"), VOICE_PAYLOADS)
def test_a_voice_note_and_a_spoken_reply_keep_their_voice(payload: Any, expected: Any) -> None:
    assert from_payload(payload) == expected
    assert to_payload(expected) == payload


@pytest.mark.parametrize(("payload", "expected"), OLD_PAYLOADS)
def test_a_payload_queued_by_an_older_version_parses_and_stores_the_same(
    payload: dict[str, Any], expected: Any
) -> None:
    assert from_payload(payload) == expected
    assert to_payload(expected) == payload


def test_lenient_old_forms_still_parse() -> None:
    # A text delivery without a kind, a numeric message id, a file without name or caption.
    assert from_payload({"to": "tg:42", "text": "x", "reply_to": 9}) == TextDelivery(
        TO, "x", reply_to="9"
    )
    assert from_payload({"kind": "file", "to": "tg:42", "path": "/a"}) == FileDelivery(
        TO, Path("/a")
    )
    empty_reply = {"kind": "text", "to": "tg:42", "text": "x", "reply_to": ""}
    assert from_payload(empty_reply) == TextDelivery(TO, "x")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (["tg:42", "x"], "the payload is list, not an object"),
        ({"kind": "text", "text": "x"}, "to: missing"),
        ({"kind": "text", "to": "nowhere", "text": "x"}, "to: 'nowhere' is not CHANNEL:CHAT"),
        ({"kind": "text", "to": "tg:42"}, "text: missing"),
        ({"kind": "text", "to": "tg:42", "text": 5}, "text: expected a string, got int"),
        ({"kind": "text", "to": "tg:42", "text": "x", "buttons": "yes"}, "buttons: expected rows"),
        ({"kind": "text", "to": "tg:42", "text": "x", "reply_to": [1]}, "reply_to: expected"),
        ({"kind": "file", "to": "tg:42"}, "path: missing"),
        ({"kind": "poll", "to": "tg:42", "question": "q", "options": "ab"}, "options: expected"),
        (
            {"kind": "poll", "to": "tg:42", "question": "q", "options": ["a"], "multiple": "no"},
            "multiple: expected true or false",
        ),
        ({"kind": "reply", "to": "tg:42"}, "turn: missing"),
        ({"kind": "reply", "to": "tg:42", "turn": "t", "voice": "loud"}, "voice: expected one"),
        (
            {"kind": "file", "to": "tg:42", "path": "/x", "voice": True, "duration": "2s"},
            "duration: expected seconds",
        ),
        ({"kind": "sticker", "to": "tg:42"}, "unknown delivery kind 'sticker'"),
    ],
)
def test_a_malformed_payload_is_refused_naming_the_field(payload: Any, message: str) -> None:
    with pytest.raises(MalformedDelivery) as caught:
        from_payload(payload)
    assert message in str(caught.value)
