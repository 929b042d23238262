"""A reply as speech: Markdown stripped, cut at a sentence."""

from __future__ import annotations

from habakkuk.voice.speakable import cut_at_sentence, speakable, strip_markdown


def test_markup_is_stripped_and_the_words_stay() -> None:
    reply = (
        "## Your board\n\n"
        "- **Fix** the `login` bug, see [the issue](https://x.example/1)\n"
        "- _Write_ the report\n\n"
        "```python\nprint('hi')\n```\n"
        "> Done soon!"
    )
    assert strip_markdown(reply) == (
        "Your board. Fix the login bug, see the issue. Write the report. (code omitted). Done soon!"
    )


def test_a_long_reply_is_cut_after_the_last_whole_sentence() -> None:
    text = "First one. Second one! Third, which is long? Fourth."
    assert cut_at_sentence(text, 30) == "First one. Second one!"
    assert cut_at_sentence(text, 200) == text


def test_one_long_sentence_is_cut_at_a_word() -> None:
    assert cut_at_sentence("alpha beta gamma delta", 13) == "alpha beta…"


def test_speakable_does_both() -> None:
    assert speakable("**Yes.** It is done. More words here.", 20) == "Yes. It is done."
