"""Each platform's page, told apart by text and labels (spec 000 "Meetings": Reading the
page). Patterns are in the regular-expression subset Python and JavaScript share (no
lookbehind, no named groups), matched without case: the page script finds elements with
the same patterns `classify` reads probes with.

A probe holds the page's visible text (captions and chat cut out, so nothing a person
says can decide a state), the labels of its visible clickable elements (switches end in
" [on]" or " [off]") and of its text fields, and whether a captions region is present.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The states a page can be in.
LAUNCHER, PRE_JOIN, LOBBY, IN_CALL = "launcher", "pre-join", "lobby", "in call"
DENIED, ENDED, INVALID, UNKNOWN = "denied", "ended", "invalid link", "unknown"


@dataclass(frozen=True)
class Probe:
    """What one probe of the page saw."""

    title: str = ""
    text: str = ""
    buttons: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    captions: bool = False

    @classmethod
    def from_page(cls, value: Any) -> Probe:
        """The probe script's answer as a value (an empty probe for anything else)."""
        if not isinstance(value, Mapping):
            return cls()
        return cls(
            title=str(value.get("title") or ""),
            text=str(value.get("text") or ""),
            buttons=tuple(str(b) for b in value.get("buttons") or ()),
            fields=tuple(str(f) for f in value.get("fields") or ()),
            captions=bool(value.get("captions")),
        )

    def fingerprint(self) -> str:
        """What must change for the page to count as having moved on."""
        return "\n".join([self.title, self.text[:2000], *self.buttons, *self.fields])


@dataclass(frozen=True)
class Platform:
    """One platform's patterns (each a regular expression, matched without case)."""

    name: str
    # State by page text (checked first, in this order), then by controls.
    ended_text: str
    denied_text: str
    invalid_text: str
    lobby_text: str
    alone_text: str
    launcher_button: str
    join_button: str  # "Ask to join" / "Join now" on the pre-join page
    leave_button: str  # present only in the call
    leave_confirm: str
    name_field: str
    mute_buttons: tuple[str, ...]  # turn off microphone, turn off camera
    dismiss_buttons: str  # cookie banners, tips
    captions_on: tuple[str, ...]  # the path to turn captions on, deepest last
    captions_off: str  # the control showing captions are on already
    chat_button: str
    chat_field: str
    captions_region: str  # CSS selector of the captions container
    caption_block: str  # CSS selector of one block inside it
    chat_region: str  # CSS selector of the chat panel (cut out of probes)
    shortcut: str = ""  # a key that toggles captions (Meet's "c")
    extra: Mapping[str, str] = field(default_factory=dict)


MEET = Platform(
    name="meet",
    ended_text=r"you left the meeting|the call has ended|you've been removed from the meeting|"
    r"you have been removed from the meeting",
    denied_text=r"you can't join this call|someone in the call denied your request|"
    r"your request to join was declined",
    invalid_text=r"check your meeting code|invalid video call name|meeting code.{0,20}invalid",
    lobby_text=r"asking to be let in|please wait until a meeting host brings you into the call|"
    r"you'll join the call when someone lets you in",
    alone_text=r"you're the only one here|no one else is here",
    launcher_button=r"^continue on this browser$",
    join_button=r"^(ask to join|join now)$",
    leave_button=r"^leave call$",
    leave_confirm=r"^(just leave the call|leave call)$",
    name_field=r"your name",
    mute_buttons=(r"^turn off microphone", r"^turn off camera"),
    dismiss_buttons=r"^(got it|dismiss|accept all|reject all|close|ok)$",
    captions_on=(r"^turn on captions",),
    captions_off=r"^turn off captions",
    chat_button=r"^chat with everyone|^open chat",
    chat_field=r"send a message",
    captions_region='[role="region"][aria-label*="aption" i]',
    caption_block=":scope > div[data-block], :scope > div",
    chat_region='[aria-label*="chat" i][role="complementary"], aside[aria-label*="chat" i]',
    shortcut="c",
)

ZOOM = Platform(
    name="zoom",
    ended_text=r"this meeting has been ended by (the )?host|the meeting has ended|"
    r"you have been removed|you left the meeting",
    denied_text=r"the host has removed you|you have been denied entry|"
    r"host has declined your request",
    invalid_text=r"invalid meeting id|this meeting link is invalid|meeting does not exist",
    lobby_text=r"please wait, the meeting host will let you in soon|"
    r"waiting for the host to start|host has joined. we've let them know you're here",
    alone_text=r"you are the only (one|participant) in (this|the) meeting",
    launcher_button=r"^join from your browser$",
    join_button=r"^join$",
    leave_button=r"^leave$",
    leave_confirm=r"^leave meeting$",
    name_field=r"your name",
    mute_buttons=(r"^mute$|^mute my microphone", r"^stop video$"),
    dismiss_buttons=r"^(got it|accept cookies|ok|close|i agree)$",
    captions_on=(r"^(captions|show captions|more)$", r"^show captions$|^enable captions$"),
    captions_off=r"^hide captions$",
    chat_button=r"^(open the )?chat( panel)?$",
    chat_field=r"type message|message to everyone",
    captions_region='[class*="caption" i][aria-live], [aria-label*="aption" i][role="region"]',
    caption_block=":scope > div",
    chat_region='[class*="chat-container" i], [aria-label*="chat" i][role="complementary"]',
)

TEAMS = Platform(
    name="teams",
    ended_text=r"you've been removed from this meeting|the meeting has ended|you left the meeting|"
    r"this meeting has ended",
    denied_text=r"sorry, but you were denied access to the meeting|your request to join was denied",
    invalid_text=r"this link is invalid|we couldn't find the meeting|meeting not found",
    lobby_text=r"someone in the meeting should let you in soon|"
    r"when the meeting starts, we'll let people know you're waiting",
    alone_text=r"you're the only one here|waiting for others to join",
    launcher_button=r"^continue on this browser$",
    join_button=r"^join now$",
    leave_button=r"^(leave|hang up)$",
    leave_confirm=r"^leave$",
    name_field=r"type your name|your name",
    mute_buttons=(
        r"^(turn off|mute) microphone|^mic(rophone)? \[on\]",
        r"^(turn off )?camera \[on\]|^turn camera off",
    ),
    dismiss_buttons=r"^(got it|dismiss|accept|close|ok)$",
    captions_on=(r"^more$|^more actions$", r"^language and speech$", r"^turn on live captions$"),
    captions_off=r"^turn off live captions$",
    chat_button=r"^(show conversation|chat)$",
    chat_field=r"type a message|type a new message",
    captions_region='[data-tid="closed-caption-renderer-wrapper"], '
    '[aria-label*="aption" i][role="region"]',
    caption_block=':scope [data-tid="closed-caption-message"], :scope > div',
    chat_region='[data-tid="chat-pane"], [aria-label*="chat" i][role="complementary"]',
)

PLATFORMS = {p.name: p for p in (MEET, ZOOM, TEAMS)}


def matches(pattern: str, text: str) -> bool:
    """Whether `pattern` finds `text` (without case)."""
    return re.search(pattern, text, re.IGNORECASE) is not None


def any_label(pattern: str, labels: tuple[str, ...]) -> bool:
    """Whether any label matches `pattern`."""
    return any(matches(pattern, label) for label in labels)


def classify(platform: Platform, probe: Probe) -> str:
    """The state the probe shows (UNKNOWN when nothing matches)."""
    if matches(platform.ended_text, probe.text):
        return ENDED
    if matches(platform.denied_text, probe.text):
        return DENIED
    if matches(platform.invalid_text, probe.text):
        return INVALID
    if any_label(platform.leave_button, probe.buttons):
        return IN_CALL
    if matches(platform.lobby_text, probe.text):
        return LOBBY
    if any_label(platform.join_button, probe.buttons):
        return PRE_JOIN
    if any_label(platform.launcher_button, probe.buttons):
        return LAUNCHER
    return UNKNOWN
