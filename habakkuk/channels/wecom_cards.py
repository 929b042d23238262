"""WeCom's button cards: an approval or a question goes as a template card of the
`button_interaction` kind, each button's `key` the gateway's callback data; a press comes
back on the app's callback as the event `template_card_event`
(https://developer.work.weixin.qq.com/document/path/90236 and /90240), and the card is
then greyed with the event's ResponseCode (/94888).

- A card: `main_title.title` (the prompt's first line, WeCom shows 36 characters),
  `sub_title_text` (the rest, 160 characters), `task_id` (unique per app, at most 128
  bytes of letters, digits and `_-@`) and 1 to 6 buttons whose `key` (at most 1024 bytes)
  is what the gateway gave the button (`fy|<nonce>|<index>`). A prompt longer than a card
  holds goes first as a text message, the card after it.
- A press: `<Event>template_card_event</Event>` with TaskId, EventKey (the button's key),
  CardType and ResponseCode. WeCom retries a callback it got no answer to: the press's id
  derives from its fields, so the gateway takes it once.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .adapter import Button, Callback, InboundMessage

TITLE_CHARS = 36  # main_title.title
SUBTITLE_CHARS = 160  # sub_title_text
MAX_BUTTONS = 6  # button_list of a button_interaction card
KEY_BYTES = 1024  # a button's key
BUTTON_CHARS = 64  # a greyed button's replace_name, kept short
_CARDS = 256  # cards remembered, to grey them once answered


@dataclass(frozen=True)
class CardParts:
    """What one prompt becomes: text sent before the card (when the card cannot hold it)
    and the card itself (the `template_card` of message/send)."""

    before: str
    card: dict[str, Any]


def fits(buttons: list[list[Button]]) -> bool:
    """Whether the buttons fit one card (else the prompt goes as text, answered by a word)."""
    flat = [b for row in buttons for b in row]
    return 0 < len(flat) <= MAX_BUTTONS and all(len(b.data.encode()) <= KEY_BYTES for b in flat)


def card_parts(chunk: str, buttons: list[list[Button]]) -> CardParts:
    """The card of a prompt with its buttons (`fits(buttons)` holds)."""
    first, _, rest = chunk.strip().partition("\n")
    title, sub = (first, rest.strip()) if len(first) <= TITLE_CHARS else ("", chunk.strip())
    before = ""
    if len(sub) > SUBTITLE_CHARS:  # the whole prompt goes first; the card names it
        before, sub = chunk, ""
        title = title or first[: TITLE_CHARS - 1] + "…"
    card: dict[str, Any] = {
        "card_type": "button_interaction",
        "task_id": f"hb-{secrets.token_hex(16)}",
        "button_list": [
            # style 2 is red (a refusal), 1 blue
            {"text": b.text, "style": 2 if b.text.startswith("❌") else 1, "key": b.data}
            for row in buttons
            for b in row
        ],
    }
    if title:
        card["main_title"] = {"title": title}
    if sub:
        card["sub_title_text"] = sub
    return CardParts(before, card)


@dataclass
class SentCard:
    """A card sent to one member: the response_code that can still update it, and what
    its greyed button should say (the gateway's notice for a press)."""

    user: str
    code: str
    notice: str = ""
    pressed: bool = False


class SentCards:
    """The newest cards, by task_id (the id send_text returns for a card)."""

    def __init__(self) -> None:
        self._cards: OrderedDict[str, SentCard] = OrderedDict()

    def sent(self, task_id: str, user: str, code: str) -> None:
        self._cards[task_id] = SentCard(user, code)
        self._trim()

    def pressed(self, task_id: str, user: str, code: str) -> None:
        """A press brought a fresh response_code (the send's may be spent)."""
        card = self._cards.setdefault(task_id, SentCard(user, code))
        card.code, card.pressed = code or card.code, True
        self._cards.move_to_end(task_id)
        self._trim()

    def noticed(self, task_id: str, text: str) -> None:
        card = self._cards.get(task_id)
        if card is not None:
            card.notice = text

    def take(self, task_id: str) -> SentCard | None:
        """The card to grey now, once; None while a press still waits for its notice
        (the gateway greys it again right after answering the press)."""
        card = self._cards.get(task_id)
        if card is None or not card.code or (card.pressed and not card.notice):
            return None
        return self._cards.pop(task_id)

    def _trim(self) -> None:
        while len(self._cards) > _CARDS:
            self._cards.popitem(last=False)


def press(fields: dict[str, str], account: str) -> InboundMessage | None:
    """A template_card_event as the gateway's button press; None when it is not one."""
    sender, task = fields.get("FromUserName", ""), fields.get("TaskId", "")
    key, code = fields.get("EventKey", ""), fields.get("ResponseCode", "")
    if fields.get("Event") != "template_card_event" or not (sender and task and key):
        return None
    created = fields.get("CreateTime", "")
    # A retried callback carries the same fields: the same id, taken once.
    digest = hashlib.sha256(f"{task}\n{key}\n{code}\n{created}\n{sender}".encode())
    return InboundMessage(
        channel=account,
        chat=sender,
        message_id=task,
        sender=sender,
        callback=Callback(f"card-{digest.hexdigest()[:32]}", key, task),
    )
