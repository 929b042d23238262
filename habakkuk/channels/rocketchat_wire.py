"""Rocket.Chat's wire details the adapter builds on: message ids of our own choosing,
approval buttons as message-attachment actions and their presses read back, and the
server's two ways of writing a time.

- Ids: `chat.sendMessage` takes the message's own `_id` and the server stores one message
  per id, so an id derived from the delivery and its part makes a retried send post once.
  Rocket.Chat's ids (Meteor's Random.id) are 17 characters of an alphabet without the
  look-alikes (0, 1, I, O, U, V and l).
- Buttons: an attachment's `actions` of `type: button` with `msg_in_chat_window: true` and
  `msg_processing_type: sendMessage` make the person's client post the button's `msg` into
  the room as the person (the realtime API has no callback of its own). That `msg` is the
  button's label followed by its data in brackets, `✅ Approve [fy|<nonce>|0]`: the nonce
  names one prompt, so a press on an old prompt's button is told it expired instead of
  answering the newer prompt a bare "yes" would; the label keeps it readable in the room.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any

from .adapter import Button
from .deliveries import SENDING

ID_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz"
ID_LENGTH = 17
# A press: the button's data in brackets at the end of the person's message.
_PRESS = re.compile(r"\[(fy\|[0-9A-Za-z]{1,32}\|\d{1,3})\]\s*$")


def derived_id(seed: str) -> str:
    """A Rocket.Chat message id (17 characters of its alphabet) derived from `seed`."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    out = []
    for _ in range(ID_LENGTH):
        number, digit = divmod(number, len(ID_ALPHABET))
        out.append(ID_ALPHABET[digit])
    return "".join(out)


def send_id() -> str:
    """The id of the message this send creates: derived from the delivery job and its part
    (a retry repeats it), or "" outside a delivery (the server picks one)."""
    sending = SENDING.get()
    if sending is None:
        return ""
    return derived_id(f"{sending.job}\x00{sending.chunk}")


def buttons_id(message_id: str) -> str:
    """The id of the message carrying the buttons of message `message_id` (derived, so the
    buttons can be removed knowing only the prompt's message, and post once)."""
    return derived_id(f"{message_id}\x00buttons")


def notice_id(press_id: str) -> str:
    """The id of the notice answering the press `press_id` (posted once)."""
    return derived_id(f"{press_id}\x00notice")


def press_text(button: Button) -> str:
    """What a press of `button` posts as the person: its label, then its data."""
    return f"{button.text} [{button.data}]"


def button_attachments(buttons: list[list[Button]]) -> list[dict[str, Any]]:
    """One attachment per row of buttons, each pressed by posting its press_text."""
    return [
        {
            "button_alignment": "horizontal",
            "actions": [
                {
                    "type": "button",
                    "text": button.text,
                    "msg": press_text(button),
                    "msg_in_chat_window": True,
                    "msg_processing_type": "sendMessage",
                }
                for button in row
            ],
        }
        for row in buttons
        if row
    ]


def pressed(text: str) -> str | None:
    """The button data a message carries when it is a press (see press_text), else None."""
    found = _PRESS.search(text)
    return found.group(1) if found else None


def stamp_ms(value: object) -> int | None:
    """A message time in milliseconds: the realtime API's `{"$date": ms}` or the REST API's
    ISO 8601 string; None when it is neither."""
    if isinstance(value, dict):
        value = value.get("$date")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    return None


def iso_ms(ms: int) -> str:
    """Milliseconds as the ISO 8601 time the REST API's `oldest` takes."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
