"""What a reply is read aloud as: its Markdown stripped to sentences, cut at a sentence."""

from __future__ import annotations

from habakkuk.voice.spoken_text import cut, reply_speech, spoken


def test_markdown_is_formatting_not_words() -> None:
    markdown = (
        "# Today\n\nYou have **three** cards, see [the board](http://x/board).\n\n"
        "- buy `oat milk`\n- call Sam\n\n```sh\nrm -rf build\n```\n\n"
        "| card | due |\n|---|---|\n| tax | Friday |\n"
    )
    assert spoken(markdown).splitlines() == [
        "Today.",
        "You have three cards, see the board.",
        "buy oat milk.",
        "call Sam.",
        "(code).",
        "card, due.",
        "tax, Friday.",
    ]


def test_a_long_reply_is_cut_after_the_last_sentence_that_fits() -> None:
    text = "First sentence here. Second one is longer! Third never fits at all."
    assert cut(text, 50) == "First sentence here. Second one is longer!"
    assert cut(text, 500) == text


def test_one_long_sentence_is_cut_at_a_word() -> None:
    assert cut("word " * 30, 23) == "word word word word…"


def test_reply_speech_strips_then_cuts() -> None:
    assert reply_speech("**Done.** The *build* passed. Details follow below.", 30) == (
        "Done. The build passed."
    )
