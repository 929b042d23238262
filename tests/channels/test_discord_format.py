"""Discord's Markdown out: nearly as written, in chunks under 2000 with code blocks intact."""

from __future__ import annotations

from habakkuk.channels.discord_format import DISCORD_LIMIT, discord_chunks


def test_markdown_discord_renders_goes_out_as_written() -> None:
    text = "# Title\n\n**bold** *it* ~~gone~~ `code` [link](https://x.org)\n\n> quoted\n- item"
    assert discord_chunks(text) == [text]


def test_a_deep_heading_becomes_bold_and_a_table_a_code_block() -> None:
    text = "#### Small heading\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    assert discord_chunks(text) == [
        "**Small heading**\n\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n```"
    ]


def test_long_prose_is_cut_between_paragraphs_under_the_limit() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 150 for i in range(12)]
    text = "\n\n".join(paragraphs)
    chunks = discord_chunks(text)
    assert len(chunks) > 1 and all(len(c) <= DISCORD_LIMIT for c in chunks)
    assert " ".join(chunks).split() == text.split()
    assert all(c.startswith("paragraph") for c in chunks)  # never mid-paragraph
    assert discord_chunks(text) == chunks  # deterministic: a retry resumes at an index


def test_a_code_block_too_big_is_fenced_again_in_every_chunk() -> None:
    code = "\n".join(f"print({i})" for i in range(400))
    chunks = discord_chunks(f"```python\n{code}\n```")
    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk) <= DISCORD_LIMIT
        assert chunk.startswith("```python\n") and chunk.endswith("\n```")
    body = [ln for c in chunks for ln in c.splitlines() if not ln.startswith("```")]
    assert body == code.splitlines()


def test_one_line_too_long_is_cut_at_spaces() -> None:
    line = "word " * 1000
    chunks = discord_chunks(line)
    assert all(len(c) <= DISCORD_LIMIT for c in chunks)
    assert " ".join(chunks).split() == line.split()


def test_an_empty_text_is_still_one_chunk() -> None:
    assert discord_chunks("") == ["…"]
