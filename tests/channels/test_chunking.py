"""Every platform's chunking gives exactly the chunks it gave before the shared chunker.

The expected chunks (chunking_expected.json beside this file) were captured once from the
per-platform chunkers that channels/chunking.py replaced, so a change of any platform's
output, even by a character, fails here. A deliberate change of output regenerates the
file (`python -m tests.channels.test_chunking`) and shows the difference in review.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from habakkuk.channels.discord_format import discord_chunks
from habakkuk.channels.format import markdown_chunks
from habakkuk.channels.format_whatsapp import whatsapp_chunks
from habakkuk.channels.slack_format import mrkdwn_chunks

EXPECTED = Path(__file__).with_name("chunking_expected.json")

_WORDS = " ".join(f"word{i} & <tag{i}>" for i in range(60))
_CODE = "\n".join(f"    v{i} = f({i}) < limit && ok  # {i}" for i in range(12))

CORPUS: dict[str, str] = {
    "empty": "",
    "whitespace": "  \n\t\n   \n",
    "short": "Hello, **world**!",
    "long_paragraph": _WORDS,
    "paragraphs": "\n\n".join(f"Paragraph {i}: {_WORDS[: 30 + 7 * i]}" for i in range(6)),
    "long_code": f"Before the code.\n\n```python\n{_CODE}\n```\n\nAfter the code.",
    "tilde_fence": "~~~\nplain <b> & code\n~~~\ntext right after",
    "unclosed_fence": "Intro\n\n```js\nconst a = 1 < 2;\nconsole.log(a)",
    "empty_fence": "```\n```",
    "quotes": "> quoted **bold** line one\n> quoted line two & more\n\nAfter the quote.\n"
    + "\n".join(f"> quote line {i} with some words in it" for i in range(12)),
    "lists": "# Title\n\n- one\n- two with `code`\n  * nested _italic_\n+ three\n\n---\n\n"
    + "\n".join(f"- item {i} ~~struck~~ and *em*" for i in range(15)),
    "deep_heading": "#### Deep heading\n\n###### Deeper still with many words " + "x " * 40,
    "table": "| a | b |\n|---|---|\n| 1 | 2 |\n| long cell " + "y" * 60 + " | 3 |",
    "one_long_line": "x" * 250,
    "one_long_line_spaces": "start" + " " * 120 + "end " + "z" * 90,
    "emoji_cjk": "😀🎉 日本語のテキスト、とても長い文章です。" * 8 + "\n\n🙂 end",
    "links_bold": "See [the docs](https://example.com/a?b=1&c=2) and **bold _mix_** "
    "or __under__ with [mail](mailto:x@example.com) ~~gone~~ <!channel> <@U123>.",
    "crlf": "line one\r\nline two\r\n\r\n```\r\ncode\r\n```\r\n",
    "code_long_line": "```sh\n" + "echo " + "a&b<c " * 16 + "\n```",
}

Chunker = Callable[[str, int], list[str]]
PLATFORMS: dict[str, tuple[Chunker, int]] = {
    "telegram": (markdown_chunks, 4096),
    "slack": (mrkdwn_chunks, 3000),
    "discord": (discord_chunks, 2000),
    "whatsapp": (whatsapp_chunks, 4000),
}
LIMITS = (30, 80, 0)  # 0: the platform's own limit


def _key(platform: str, case: str, limit: int) -> str:
    return f"{platform}/{case}/{limit}"


def _actual(platform: str, case: str, limit: int) -> list[str]:
    chunker, default = PLATFORMS[platform]
    return chunker(CORPUS[case], limit or default)


def _capture() -> dict[str, list[str]]:
    return {
        _key(platform, case, limit): _actual(platform, case, limit)
        for platform in PLATFORMS
        for case in CORPUS
        for limit in LIMITS
    }


_EXPECTED: dict[str, list[str]] = json.loads(EXPECTED.read_text(encoding="utf-8"))


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_every_platform_chunks_the_corpus_as_it_did_before(platform: str, case: str) -> None:
    for limit in LIMITS:
        assert _actual(platform, case, limit) == _EXPECTED[_key(platform, case, limit)], (
            f"{platform} chunks of {case!r} at limit {limit or 'default'} changed"
        )


def test_the_expected_chunks_cover_every_platform_case_and_limit() -> None:
    assert set(_EXPECTED) == set(_capture())


if __name__ == "__main__":
    EXPECTED.write_text(
        json.dumps(_capture(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
