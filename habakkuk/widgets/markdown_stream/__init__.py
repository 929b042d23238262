"""The streaming Markdown virtualiser: fragments shown at most every 80 ms, never blocking input.

Rendering a growing reply from scratch (or letting one container re-lay out
every block it holds) costs time in proportion to the whole reply, so a long
reply made key presses wait. Here the work per render is bounded by the last
block instead:

- Everything before the last top-level block boundary of the text is finished:
  no later text can change it (a block that has been followed by another block
  is closed). Those blocks are built once and mounted into a *volume*, a
  container that is full after VOLUME_BLOCKS blocks and then never laid out
  again (its arrangement stays cached).
- Only the last block, the tail, is parsed and rebuilt on each render.

- A finished volume far from the screen is *frozen*: its lines are rendered
  once (a cached picture of its blocks at this width) and it stands in for its
  blocks as one leaf of the same height, so a layout pass no longer visits
  them. It thaws (its blocks are laid out and shown again) as soon as it comes
  within a screen of the visible area, and when the width or theme changes.
  Even a jump straight to a frozen volume shows the right text: the picture is
  what its blocks draw.

A reply loaded from history (`StreamingMarkdown(text)`) gets the same
structure, lazily, since a session may hold hundreds of long replies:

- Until it comes within a screen of view it is not even parsed: it is one
  leaf whose height is estimated from its text (a few lines per source line).
- Then it is parsed once, to find its top-level blocks, and split into volumes
  that keep only their source lines; a volume builds its blocks (parsing its
  lines again) when it comes within a screen of view, and until then is a leaf
  of estimated height. Far from view again (more than two screens), it is
  frozen into a picture and its blocks are dropped; further still (more than
  PICTURE_SCREENS screens), the picture is dropped too and only the exact
  height it had remains. Memory then grows with the text, not with the
  blocks or pictures of everything read so far.
- Whatever has no blocks or picture yet draws its Markdown source as plain,
  dim lines, wrapped the way its height was estimated: a jump far into the
  history (Home, the scroll bar) shows the text at once, and the rendered
  blocks replace it a moment later, instead of blank lines.
- An estimate that turns out wrong moves what is below it: MessageView moves
  its scroll position by as much, so what the reader looks at stays put.
- MessageView.load builds the replies at the bottom, where a session opens, at
  once (`build_lines`).

The final blocks are the blocks of a one-shot render of the whole text, with
the same spacing. One document-wide Markdown feature breaks the "finished"
argument: a link reference definition (`[id]: url`) changes links anywhere in
the document, so a reply that defines one is rendered again in one piece when
it ends.

Modules: document.py, the container (StreamingMarkdown); volume.py, the volumes;
picture.py, what stands in for blocks not laid out (a frozen volume's picture, a
draft); blocks.py, which blocks are finished or updatable in place; fence.py, a
streaming code fence; gc_policy.py, short full collections while a reply streams;
textual_private.py, the only module that touches Textual's private names (Textual
is pinned exactly for it; tests/tui/test_textual_private_canary.py guards it).
"""

from habakkuk.widgets.markdown_stream.document import (
    PICTURE_SCREENS,
    RENDER_INTERVAL,
    VOLUME_BLOCKS,
    StreamingMarkdown,
)
from habakkuk.widgets.markdown_stream.gc_policy import FULL_COLLECTIONS
from habakkuk.widgets.markdown_stream.picture import estimate_height
from habakkuk.widgets.markdown_stream.volume import MarkdownVolume

__all__ = [
    "FULL_COLLECTIONS",
    "PICTURE_SCREENS",
    "RENDER_INTERVAL",
    "VOLUME_BLOCKS",
    "MarkdownVolume",
    "StreamingMarkdown",
    "estimate_height",
]
