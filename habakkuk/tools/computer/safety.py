"""The computer's safety rules (spec 000 "Computer", Safety), apart from the tools.

* Text the agent would type (or an app it would open, with its arguments) is refused
  in every mode when it holds a credential the log redactor knows the shape of, a
  private key, one of the configured secret values or a Luhn-valid card number: a
  screen the agent reads may ask for them, and a page or a document may have planted
  one in the turn.
* An app in `confirm_apps` (its process name or window title, matched without case),
  in front or being opened, needs a human in every mode; so does any action while
  such a list is set and the app in front cannot be told.
* Each run of a turn takes at most `max_actions` actions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from habakkuk.engine.redact import REDACTOR

ACTIONS_COUNTER = "computer.actions"


def typing_refusal(text: str, extra_values: Iterable[str] = ()) -> str | None:
    """Why `text` may not be typed (what it holds, never the value), or None."""
    from habakkuk.engine.secret_scan import find_secret  # its patterns: on first use

    found = find_secret(text, (*REDACTOR.values, *extra_values))
    if found is None:
        return None
    return f"the text holds {found}; the computer tools never type credentials or card numbers"


@dataclass(frozen=True)
class FrontApp:
    """The app in front: its process name and window title ("" when unknown)."""

    process: str = ""
    title: str = ""

    @property
    def known(self) -> bool:
        return bool(self.process or self.title)

    def describe(self) -> str:
        if self.process and self.title:
            return f"{self.process} ({self.title})"
        return self.process or self.title or "unknown"


def confirm_app(names: Iterable[str], *candidates: str) -> str | None:
    """The first entry of `names` that one of `candidates` (a process name, a window
    title, an app being opened) matches without case, or None. A process name matches an
    entry equal to it (or to its file name); a title matches an entry it contains."""
    wanted = [name.strip().casefold() for name in names if name.strip()]
    for candidate in candidates:
        text = candidate.strip().casefold()
        if not text:
            continue
        base = text.rsplit("/", 1)[-1]
        for name in wanted:
            if name in (text, base) or name in text:
                return name
    return None


def front_confirmation(names: list[str], front: FrontApp | None) -> str | None:
    """Why an action needs a human because of the app in front, or None."""
    if not names:
        return None
    if front is None or not front.known:
        return "the app in front cannot be told and confirm_apps is set"
    matched = confirm_app(names, front.process, front.title)
    if matched is None:
        return None
    return f"the app in front, {front.describe()}, is in confirm_apps ({matched})"
