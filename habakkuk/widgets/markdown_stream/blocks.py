"""Which streamed blocks are finished, and which can show new content in place."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets.markdown import MarkdownBlock, MarkdownFence

from habakkuk.widgets.markdown_stream.textual_private import holds_blocks, show_block_as

if TYPE_CHECKING:
    from markdown_it.token import Token


def last_boundary(tokens: list[Token], complete_lines: int) -> tuple[int, int]:
    """Where the finished blocks end: (token index, line) of the last top-level block start
    that has a block before it and lies on a complete line, or (0, 0).

    A block start on the line still being written is not final: "#" starts a heading
    that interrupts the paragraph above, "#hashtag" continues that paragraph.
    """
    starts = [
        (index, token.map[0])
        for index, token in enumerate(tokens)
        if token.level == 0 and token.map is not None and token.nesting >= 0
    ]
    for position in range(len(starts) - 1, 0, -1):
        index, line = starts[position]
        if line < complete_lines:
            return index, line
    return 0, 0


def updatable(old: list[MarkdownBlock], new: list[MarkdownBlock]) -> int:
    """How many leading blocks of `old` can show the blocks of `new` in place."""
    count = 0
    for old_block, new_block in zip(old, new, strict=False):
        if type(old_block) is not type(new_block):
            break
        if not isinstance(new_block, MarkdownFence) and (
            holds_blocks(new_block) or old_block.children
        ):
            # Lists, quotes and tables hold blocks of their own: rebuild them.
            break
        count += 1
    return count


def update_in_place(old: MarkdownBlock, new: MarkdownBlock) -> bool:
    """Make the mounted `old` show `new` when only its inline content or code changed."""
    if type(old) is not type(new):
        return False
    if not isinstance(old, MarkdownFence) and (holds_blocks(new) or old.children):
        # Lists, quotes and tables hold blocks of their own: rebuild them.
        return False
    old.source_range = new.source_range
    show_block_as(old, new)
    return True
