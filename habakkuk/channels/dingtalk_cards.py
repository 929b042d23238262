"""DingTalk's approval buttons: an ActionCard whose buttons say something for the person.

A robot of an internal app in HTTP mode has two kinds of buttons: interactive cards,
whose presses call back the route (callbackRouteKey) registered for a card template made
in DingTalk's card builder, and ActionCards
(https://open.dingtalk.com/document/development/robot-message-type), whose buttons open
an actionURL. We use ActionCards: an actionURL of
`dtmd://dingtalkclient/sendMessage?content=<text>` makes the DingTalk client send <text>
into the chat as the person, so a press arrives as their message through the same signed
callback every message takes, and needs no card template, no second callback and no
setup beyond the robot's. The text a button sends is its label and its callback data
(`✅ Approve [fy|<nonce>|0]`): the nonce names one prompt, so a press on an old card
answers nothing newer (the gateway says it expired).

The card goes by the message's session webhook (`msgtype: actionCard` with `btns`) or
through the robot OpenAPI (`msgKey` sampleActionCard for one button, sampleActionCard2 to
sampleActionCard5 for two to five: `actionTitleN`/`actionURLN`). In a group the robot
hears only messages that @mention it and a button's message does not, so group prompts
stay typed; so do prompts of more than five choices. An ActionCard cannot be edited: an
answered card keeps its buttons, and a press on it is told the prompt expired (the
gateway's notice for a press goes back as a text in the answer to the press's message).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from .adapter import Button

SEND_MESSAGE = "dtmd://dingtalkclient/sendMessage?content="
MAX_BUTTONS = 5  # sampleActionCard5
TITLE_CHARS = 30  # what the chat list shows of a card
# The gateway's callback data at the end of what a button sends: `[fy|<nonce>|<index>]`.
_DATA = r"fy\|[0-9a-f]{4,32}\|\d{1,3}"
_PRESSED = re.compile(rf"\s*\[({_DATA})\]\s*$")


def fits(buttons: list[list[Button]] | None) -> bool:
    """Whether these buttons can go as an ActionCard (else the prompt goes as text)."""
    flat = [b for row in buttons or [] for b in row]
    return 0 < len(flat) <= MAX_BUTTONS and all(re.fullmatch(_DATA, b.data) for b in flat)


def said_by(button: Button) -> str:
    """What pressing `button` sends into the chat as the person."""
    return f"{button.text} [{button.data}]"


def action_url(button: Button) -> str:
    """The button's actionURL: the DingTalk client sends `said_by(button)` when pressed."""
    return SEND_MESSAGE + quote(said_by(button), safe="")


def pressed(text: str) -> str | None:
    """The callback data a button's message carries, or None for a message a person wrote
    (typed words and commands go on as they are)."""
    found = _PRESSED.search(text)
    return found.group(1) if found else None


def title(text: str) -> str:
    """The card's title: its first line, as the chat list shows it."""
    first = text.strip().split("\n", 1)[0].strip()
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1] + "…"


def session_card(text: str, buttons: list[list[Button]]) -> dict[str, Any]:
    """The body of a session webhook post: an ActionCard with its buttons stacked."""
    flat = [b for row in buttons for b in row]
    return {
        "msgtype": "actionCard",
        "actionCard": {
            "title": title(text),
            "text": text,
            "btnOrientation": "0",  # one under another
            "btns": [{"title": b.text, "actionURL": action_url(b)} for b in flat],
        },
    }


def robot_card(text: str, buttons: list[list[Button]]) -> tuple[str, dict[str, str]]:
    """The msgKey and msgParam of the OpenAPI's ActionCard with these buttons."""
    flat = [b for row in buttons for b in row]
    param = {"title": title(text), "text": text}
    if len(flat) == 1:
        param |= {"singleTitle": flat[0].text, "singleURL": action_url(flat[0])}
        return "sampleActionCard", param
    for n, button in enumerate(flat, start=1):
        param |= {f"actionTitle{n}": button.text, f"actionURL{n}": action_url(button)}
    return f"sampleActionCard{len(flat)}", param
