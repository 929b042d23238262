"""Yes/no words: what a typed reply to an approval prompt means, in every surface.

One table for the gateway (every channel, the web chat included) and the
terminal's approval prompt. Words are grouped by language so another one is a
line here; a message is matched whole, after lower-casing and dropping
punctuation, so "Yes!" approves and "yes, but first…" does not.
"""

from __future__ import annotations

import re
from typing import Literal

Answer = Literal["allow_once", "deny", "allow_session"]

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
