"""Approval answers: what a person answers with, as the typed decision, in every surface.

The decision is an `Answer` (engine.toolkit.approvals: allow_once, allow_session, deny),
the one type the approval hub, the approvals service and every surface pass. A person
gives it in one of two ways, each read here and nowhere else:

- by name (`answer_named`): a chat button's choice (`ANSWERS`, in the order the buttons
  show them), the terminal's y/a/n keys and the dashboard's buttons (which name it), and
  an answer recorded in control.db by another process;
- by a word typed in reply (`answer_word`): one reading for the gateway (every channel,
  the web chat included) and the terminal's approval prompt. The words are the catalogs'
  (`answers.yes`, `answers.no`, `answers.always`, comma-separated): the language in use
  (the chat's `language:`) and English are taken, so "oui" approves in a French chat and
  "yes" everywhere. A message is matched whole, after lower-casing and dropping
  punctuation, so "Yes!" approves and "yes, but first…" does not, and "always" allows
  for the session.
"""

from __future__ import annotations

import re
import unicodedata

from habakkuk.engine.i18n import DEFAULT, catalog, current_language, known, t
from habakkuk.engine.toolkit.approvals import Answer

# Every answer, in the order a chat shows them as buttons (a button's data is its index).
ANSWERS: tuple[Answer, ...] = ("allow_once", "deny", "allow_session")


# What a chat is told once an approval is answered, by answer (catalog keys).
_VERDICTS: dict[Answer, str] = {
    "allow_once": "chat.approved",
    "deny": "chat.denied",
    "allow_session": "chat.approved_session",
}


def verdict(answer: Answer) -> str:
    """ "Approved", "Denied" or "Approved for this session", in the language in use."""
    return t(_VERDICTS[answer])


def answered_from(answer: Answer, by: str) -> str:
    """The notice a chat gets when its approval was answered elsewhere ("Approved from
    the dashboard."); `by` is the surface that answered (terminal, dashboard)."""
    key = f"chat.answered_from.{by}"
    if known(key):
        return t(key, verdict=verdict(answer))
    return t("chat.answered_from.elsewhere", verdict=verdict(answer), by=by)


def words(kind: str, language: str) -> frozenset[str]:
    """The `answers.<kind>` words (yes, no, always) of `language`, normalized."""
    listed = catalog(language).get(f"answers.{kind}", "")
    return frozenset(filter(None, (normalize(word) for word in listed.split(","))))


def normalize(text: str) -> str:
    """Lower case (NFC, so a typed accent matches the catalog's), punctuation (Latin,
    CJK, Arabic, Devanagari) and runs of spaces folded to one space."""
    folded = unicodedata.normalize("NFC", text.strip().lower())
    return re.sub(r"[\s.!?,;:。！？、，،؛؟।]+", " ", folded).strip()


def answer_named(name: str) -> Answer | None:
    """The answer `name` names exactly ("allow_once", "allow_session", "deny"), or None."""
    for answer in ANSWERS:
        if name == answer:
            return answer
    return None


def answer_word(text: str) -> Answer | None:
    """The approval answer a typed message means, or None when it is not a yes/no word."""
    word = normalize(text)
    languages = {DEFAULT, current_language()}
    for kind, answer in _KINDS:
        if any(word in words(kind, language) for language in languages):
            return answer
    return None


# Checked in this order: "yes always" is an always before it could be anything else.
_KINDS: tuple[tuple[str, Answer], ...] = (
    ("always", "allow_session"),
    ("yes", "allow_once"),
    ("no", "deny"),
)
