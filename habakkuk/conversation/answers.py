"""Approval answers: what a person answers with, as the typed decision, in every surface.

The decision is an `Answer` (engine.toolkit.approvals: allow_once, allow_session, deny),
the one type the approval hub, the approvals service and every surface pass. A person
gives it in one of two ways, each read here and nowhere else:

- by name (`answer_named`): a chat button's choice (`ANSWERS`, in the order the buttons
  show them), the terminal's y/a/n keys and the dashboard's buttons (which name it), and
  an answer recorded in control.db by another process;
- by a word typed in reply (`answer_word`): one table for the gateway (every channel,
  the web chat included) and the terminal's approval prompt. Words are grouped by
  language so another one is a line here; a message is matched whole, after
  lower-casing and dropping punctuation, so "Yes!" approves and "yes, but first…" does
  not, and "always" allows for the session.
"""

from __future__ import annotations

import re

from habakkuk.engine.toolkit.approvals import Answer

# Every answer, in the order a chat shows them as buttons (a button's data is its index).
ANSWERS: tuple[Answer, ...] = ("allow_once", "deny", "allow_session")

# language -> (yes, no)
WORDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "en": (
        frozenset(
            {"yes", "y", "yep", "yeah", "ok", "okay", "sure", "approve", "approved", "allow"}
        ),
        frozenset({"no", "n", "nope", "deny", "denied"}),
    ),
    "fr": (frozenset({"oui"}), frozenset({"non"})),
    "es": (frozenset({"sí", "si"}), frozenset()),
    "de": (frozenset({"ja"}), frozenset({"nein"})),
    "pt": (frozenset({"sim"}), frozenset({"não", "nao"})),
    "ru": (frozenset({"да"}), frozenset({"нет"})),
}
ALWAYS_WORDS = frozenset({"always", "yes always", "allow always"})
YES_WORDS = frozenset().union(*(yes for yes, _ in WORDS.values()))
NO_WORDS = frozenset().union(*(no for _, no in WORDS.values()))


def normalize(text: str) -> str:
    """Lower case, punctuation and runs of spaces folded to one space."""
    return re.sub(r"[\s.!?,;:]+", " ", text.strip().lower()).strip()


def answer_named(name: str) -> Answer | None:
    """The answer `name` names exactly ("allow_once", "allow_session", "deny"), or None."""
    for answer in ANSWERS:
        if name == answer:
            return answer
    return None


def answer_word(text: str) -> Answer | None:
    """The approval answer a typed message means, or None when it is not a yes/no word."""
    word = normalize(text)
    if word in ALWAYS_WORDS:
        return "allow_session"
    if word in YES_WORDS:
        return "allow_once"
    if word in NO_WORDS:
        return "deny"
    return None
