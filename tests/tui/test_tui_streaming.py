"""Streamed Markdown: incremental rendering ends where a one-shot render of the text does."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock, MarkdownFence

from habakkuk.engine.events import ModelReplied, TurnEnded, TurnReset, TurnText
from habakkuk.widgets.markdown_stream import (
    VOLUME_BLOCKS,
    MarkdownVolume,
    StreamingMarkdown,
)
from habakkuk.widgets.message_view import MessageView
from tests.tui.conftest import TurnIds

MIXED = """\
# Title

First paragraph with *emphasis*, **strong** and `code`.
It continues on a second line.

Setext heading
--------------

- one
- two
  - nested
- three

1. first

2. second (a loose list)

> quoted text
> that goes on

```python
def hello() -> None:
    print("hi")
```

| name | value |
|------|-------|
| a    | 1     |
| b    | 2     |

***

A paragraph
#hashtag is not a heading
***bold italic*** is not a rule

```
plain fence without a language
x = 1
```

    indented code

<div>an html block</div>

Last paragraph with a https://example.com link.
"""

REFERENCES = """\
See [the site] and [later].

[the site]: https://example.com

More text.

[later]: https://example.org "Later"
"""

# Many short blocks: more than one volume fills up.
MANY = "".join(
    f"Paragraph {i} of many.\n\n" + ("```\ncode\n```\n\n" if i % 7 == 0 else "")
    for i in range(VOLUME_BLOCKS * 2 + 5)
)


class Side(App[None]):
    """A streamed document and its one-shot render side by side (same width)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield StreamingMarkdown(id="streamed")
            yield Markdown(id="flat")


def signature(blocks: list[MarkdownBlock]) -> list[Any]:
    """What each block and its nested blocks show, in document order."""

    def one(block: Widget) -> Any:
        content = getattr(block, "_content", None)
        shown = content.plain if content is not None else ""
        if isinstance(block, MarkdownFence):
            code = block._highlighted_code
            shown = (block.code, block.lexer, [(s.start, s.end, str(s.style)) for s in code.spans])
        nested = [one(b) for b in block.query_children(MarkdownBlock)]
        for child in block.children:
            if not isinstance(child, MarkdownBlock):
                nested += [one(b) for b in child.query(MarkdownBlock)]
        return (type(block).__name__, shown, nested)

    return [one(b) for b in blocks]


def layout_of(widget: Widget, blocks: list[MarkdownBlock]) -> list[tuple[int, int]]:
    """Each block's top (relative to the widget) and height on screen."""
    top = widget.region.y
    return [(b.region.y - top, b.region.height) for b in blocks]


def chunks(text: str, how: str) -> list[str]:
    if how == "chars":
        return list(text)
    if how == "lines":
        return text.splitlines(keepends=True)
    rng = random.Random(how)
    pieces, index = [], 0
    while index < len(text):
        size = rng.randint(1, 14)
        pieces.append(text[index : index + size])
        index += size
    return pieces


async def stream_and_compare(text: str, how: str, *, size: tuple[int, int] = (70, 300)) -> None:
    app = Side()
    async with app.run_test(size=size) as pilot:
        streamed = app.query_one("#streamed", StreamingMarkdown)
        flat = app.query_one("#flat", Markdown)
        for piece in chunks(text, how):
            streamed.feed(piece)
            # Render at every delta: every intermediate state is exercised.
            await streamed.flush()
        await streamed.finish()
        await flat.update(text.replace("\r\n", "\n"))
        await pilot.pause()
        streamed_blocks = streamed.blocks()
        flat_blocks = [c for c in flat.children if isinstance(c, MarkdownBlock)]
        assert signature(streamed_blocks) == signature(flat_blocks)
        # Same spacing too: volumes carry their blocks' outer margins.
        assert layout_of(streamed, streamed_blocks) == layout_of(flat, flat_blocks)
        assert streamed.region.height == flat.region.height


@pytest.mark.parametrize("how", ["chars", "lines", "seed-1", "seed-2"])
async def test_streamed_markdown_ends_with_the_blocks_of_a_one_shot_render(how: str) -> None:
    await stream_and_compare(MIXED, how)


async def test_code_fences_split_across_deltas_end_as_one_shot_fences() -> None:
    text = "Before.\n\n```python\nfor i in range(3):\n    print(i)\n```\n\nAfter.\n\n```\nraw\n"
    # Splits inside the opening backticks, the info string and the closing fence.
    await stream_and_compare(text, "chars")
    await stream_and_compare(text, "seed-fences")


async def test_many_blocks_fill_several_volumes_and_still_match() -> None:
    await stream_and_compare(MANY, "lines", size=(70, 600))


async def test_carriage_returns_split_across_deltas_are_one_line_break() -> None:
    await stream_and_compare("a line\r\n\r\n# heading\r\nbody\r\n", "chars")


async def test_a_reference_definition_renders_the_whole_reply_again_at_the_end() -> None:
    # Links defined below their use only resolve in a whole-document render.
    await stream_and_compare(REFERENCES, "lines")


async def test_finished_blocks_are_mounted_once_and_never_rebuilt() -> None:
    app = Side()
    async with app.run_test(size=(70, 100)):
        streamed = app.query_one("#streamed", StreamingMarkdown)
        streamed.feed("First paragraph.\n\nSecond")
        await streamed.flush()
        assert streamed.blocks()[0].parent is streamed
        streamed.feed(" paragraph.\n")
        await streamed.flush()
        first = streamed.blocks()[0]
        assert isinstance(first.parent, MarkdownVolume)
        for word in ["\n", "Third ", "one.\n\n```\ncode", "\n```\n\nEnd"]:
            streamed.feed(word)
            await streamed.flush()
            assert streamed.blocks()[0] is first
        await streamed.finish()
        assert streamed.blocks()[0] is first
        assert [type(b).__name__ for b in streamed.blocks()] == [
            "MarkdownParagraph",
            "MarkdownParagraph",
            "MarkdownParagraph",
            "MarkdownFence",
            "MarkdownParagraph",
        ]


async def test_a_block_start_on_the_line_being_written_is_not_final() -> None:
    app = Side()
    async with app.run_test(size=(70, 40)):
        streamed = app.query_one("#streamed", StreamingMarkdown)
        streamed.feed("para\n#")
        await streamed.flush()
        # "#" alone is an empty heading, but the line is not finished yet.
        assert not any(isinstance(c, MarkdownVolume) for c in streamed.children)
        streamed.feed("hashtag\n")
        await streamed.finish()
        assert [type(b).__name__ for b in streamed.blocks()] == ["MarkdownParagraph"]
        assert "#hashtag" in streamed.blocks()[0]._content.plain


async def test_full_collections_skip_older_objects_only_while_a_reply_streams() -> None:
    app = Side()
    async with app.run_test(size=(70, 40)):
        assert gc.get_freeze_count() == 0
        streamed = app.query_one("#streamed", StreamingMarkdown)
        streamed.feed("streaming")
        assert gc.get_freeze_count() > 0
        await streamed.finish()
        assert gc.get_freeze_count() == 0
    assert gc.get_freeze_count() == 0


async def test_full_collections_are_unfrozen_when_the_app_closes_mid_stream() -> None:
    app = Side()
    async with app.run_test(size=(70, 40)):
        streamed = app.query_one("#streamed", StreamingMarkdown)
        streamed.feed("a reply that never finishes")
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


class OneView(App[None]):
    def compose(self) -> ComposeResult:
        yield MessageView()


# The one turn the events belong to.
TURN = TurnIds(session="ses_1", turn="turn_1")


async def test_a_turn_reset_mid_stream_leaves_only_the_retry_rendered_as_one_shot() -> None:
    retry = "Retry reply:\n\n```sh\necho ok\n```\n\n- done\n"
    app = OneView()
    async with app.run_test(size=(70, 60)) as pilot:
        view = app.query_one(MessageView)
        view.session = "ses_1"
        for piece in ["Partial ", "answer\n\n```py", "thon\nprint("]:
            await view.handle(TurnText(**TURN, text=piece))
        first = app.query_one(StreamingMarkdown)
        await first.flush()
        await view.handle(TurnReset(**TURN))
        for piece in chunks(retry, "seed-reset"):
            await view.handle(TurnText(**TURN, text=piece))
        await view.handle(ModelReplied(**TURN, model="m", usage={}, stop_reason="end_turn"))
        await view.handle(TurnEnded(**TURN, status="done", reply=retry))
        await pilot.pause()
        shown = list(app.query(StreamingMarkdown))
        assert len(shown) == 1 and shown[0] is not first
        flat = Markdown(retry)
        await view.mount(flat)
        await pilot.pause()
        assert signature(shown[0].blocks()) == signature(
            [c for c in flat.children if isinstance(c, MarkdownBlock)]
        )
        assert not shown[0].streaming


async def test_a_message_sent_while_a_reply_streams_goes_after_it_and_the_reply_stays_whole() -> (
    None
):
    app = OneView()
    async with app.run_test(size=(70, 30)) as pilot:
        view = app.query_one(MessageView)
        view.session = "ses_1"
        await view.handle(TurnText(**TURN, text="The first part, "))
        await view.add_user("and one more thing")  # queued while the reply streams
        await view.handle(TurnText(**TURN, text="then the rest."))
        await view.handle(ModelReplied(**TURN, model="m", usage={}, stop_reason="end_turn"))
        await view.handle(TurnEnded(**TURN, status="done", reply=""))
        await pilot.pause()
        replies = list(app.query(StreamingMarkdown))
        assert [r.text for r in replies] == ["The first part, then the rest."]
        assert [type(w).__name__ for w in view.children] == ["StreamingMarkdown", "UserMessage"]
