"""Yes/no words are the catalogs': the web chat answers approvals as every chat does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import get_args

import pytest

from habakkuk.conversation.answers import ANSWERS, answer_named, answer_word, words
from habakkuk.engine.i18n import LANGUAGES, use_language
from habakkuk.engine.toolkit.approvals import APPROVAL_VERBS, Answer
from tests.conftest import mock_config
from tests.server.conftest import ServeFactory
from tests.server.test_chat import script


@pytest.mark.parametrize(
    ("language", "text", "answer"),
    [("en", "Yes!", "allow_once"), ("en", "always", "allow_session"), ("en", "stop", None),
     ("en", "cancel", None), ("en", "yes, but first", None), ("fr", "oui", "allow_once"),
     ("fr", "Non.", "deny"), ("fr", "yes", "allow_once"), ("de", "Nein.", "deny"),
     ("pt-BR", "não", "deny"), ("ja", "はい。", "allow_once"), ("ar", "نعم", "allow_once"),
     ("hi", "हाँ।", "allow_once"), ("zh", "总是允许", "allow_session"),
     ("yo", "Bẹ́ẹ̀ni", "allow_once"),
     ("en", "oui", None), ("de", "oui", None)],
)  # fmt: skip
def test_a_typed_word_means_one_answer_in_the_chats_language_and_english(
    language: str, text: str, answer: str | None
) -> None:
    with use_language(language):
        assert answer_word(text) == answer


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_says_yes_no_and_always_without_overlap(language: str) -> None:
    yes, no, always = (words(kind, language) for kind in ("yes", "no", "always"))
    assert yes and no and always
    assert not (yes & no) and not (yes & always) and not (no & always)
    # Read together with English's: none of its words means the opposite in English.
    english = {kind: words(kind, "en") for kind in ("yes", "no", "always")}
    assert not ((yes | always) & english["no"]) and not (no & (english["yes"] | english["always"]))


def test_a_name_means_its_answer_and_nothing_else_is_one() -> None:
    # The chat buttons, the terminal's keys and an answer recorded in control.db name
    # the decision; every answer the hub takes is named once, and only exactly.
    assert sorted(ANSWERS) == sorted(get_args(Answer)) == sorted(APPROVAL_VERBS)
    assert [answer_named(name) for name in ANSWERS] == list(ANSWERS)
    for other in ("maybe", "yes", "Allow_once", "allow_once ", ""):
        assert answer_named(other) is None


async def test_the_web_chat_takes_the_same_words_as_the_chats(
    serve: ServeFactory, tmp_path: Path
) -> None:
    served = await serve(mock_config(script(tmp_path / "go"), mode="ask"))
    with served.runtime.bus.subscribe(lambda e: e.kind == "approval.pending") as pending:
        sent = await served.post_json("/api/chat", {"conversation": "w", "text": "run it"})
        await asyncio.wait_for(pending.get(), 30)
    # "stop" denied in the web chat only; now it is a message like in every chat.
    stop = await served.post_json("/api/chat", {"conversation": "w", "text": "stop"})
    assert stop["message"] == "queued"
    assert [a.id for a in served.runtime.approvals.pending]
    always = await served.post_json("/api/chat", {"conversation": "w", "text": "Always."})
    assert always["message"].startswith("Approved for this session")
    outcome = await asyncio.wait_for(served.runtime.turns.wait_turn(sent["turn"]), 30)
    assert outcome.reply == "Ran it."
