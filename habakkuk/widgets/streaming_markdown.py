"""Markdown that streams: fragments are shown at most every 80 ms, never blocking input.

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
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size, Spacing
from textual.layout import DockArrangeResult
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock, MarkdownFence

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token
    from textual.layout import WidgetPlacement
    from textual.screen import Screen
    from textual.theme import Theme

# The spec's bound on re-rendering while text streams in.
RENDER_INTERVAL = 0.08
# Finished blocks per volume: a render lays out the volumes (cached) and the tail,
# so the cost grows with blocks / VOLUME_BLOCKS + VOLUME_BLOCKS. Freezing a volume
# draws all its lines at once (about 10 ms for 8 paragraphs here, 45 ms for 32), and
# frozen volumes are single leaves, so volumes are small.
VOLUME_BLOCKS = 8
# A history volume further than this many screens from view keeps no picture, only its height.
PICTURE_SCREENS = 8
_NEWLINES = re.compile(r"\r\n?")


def estimate_height(lines: list[str], width: int) -> int:
    """Lines that Markdown source lines probably take at `width` columns (before layout).

    Additive over lines, so a reply's estimate is the sum of its volumes' estimates.
    """
    # Lists, quotes and fences indent their text a little.
    width = max(width - 4, 8)
    return sum(-(-len(line) // width) if line else 1 for line in lines)


class _Draft:
    """Markdown source lines drawn as plain text, wrapped as `estimate_height` counts them."""

    __slots__ = ("_rows", "_width", "lines")

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._width = -1
        self._rows: list[str] = []

    def line(self, y: int, width: int, style: Style) -> Strip:
        """Row `y` of the draft at `width` cells (blank past its end)."""
        if width != self._width:
            room = max(width - 4, 8)
            self._rows = [
                line[start : start + room]
                for line in self.lines
                for start in (range(0, len(line), room) if line else (0,))
            ]
            self._width = width
        text = self._rows[y] if 0 <= y < len(self._rows) else ""
        return Strip([Segment(text, style)]).crop_extend(0, width, style)


def _draft_style(widget: Widget) -> Style:
    return widget.visual_style.rich_style + Style(dim=True)


class _HistorySource:
    """What a history volume builds its blocks from: lines of the reply, parsed again."""

    __slots__ = ("draft", "first_line", "lines", "references")

    def __init__(self, lines: list[str], first_line: int, references: dict[str, Any]) -> None:
        self.lines = lines
        self.first_line = first_line
        # Link reference definitions of the whole reply (they apply anywhere in it).
        self.references = references
        self.draft = _Draft(lines)


class MarkdownVolume(Widget):
    """Finished top-level blocks of a streamed document, laid out once they are full.

    A complete volume can be frozen (see the module docstring): `freeze` renders its
    blocks into lines and from then on the volume draws those lines and arranges no
    children; `thaw` brings the blocks back.
    """

    # Textual spaces paragraphs with `Markdown > MarkdownParagraph`; in a volume they are
    # one level down.
    DEFAULT_CSS = """
    MarkdownVolume { height: auto; width: 1fr; layout: vertical; }
    MarkdownVolume > MarkdownParagraph { margin: 0 0 1 0; }
    """

    def __init__(self, *blocks: Widget, source: _HistorySource | None = None) -> None:
        super().__init__(*blocks)
        self.count = len(blocks)
        # While frozen: the lines the blocks draw, and the width and theme they were drawn at.
        self._picture: list[Strip] | None = None
        self._picture_key: tuple[int, str] = (0, "")
        # History volumes (see the module docstring) build and drop their blocks.
        self.source = source
        self.built = source is None or bool(blocks)
        self._build_scheduled = False
        self._known_height: tuple[int, int] | None = None
        self._operations: asyncio.Lock | None = None

    @property
    def frozen(self) -> bool:
        """True while the volume shows a picture of its blocks instead of the blocks."""
        return self._picture is not None

    def picture_matches(self) -> bool:
        """The picture was drawn at the current width and theme."""
        return self._picture_key == (self.size.width, self.app.theme)

    def freeze(self) -> bool:
        """Stand in for the blocks with a picture of them at the current width.

        The blocks stay mounted, unarranged. Returns False when there is nothing laid
        out to draw (not yet arranged, or already frozen).
        """
        from textual._compositor import Compositor

        size = self.size
        if self._picture is not None or not self.children or not size.area:
            return False
        # The volume's own compositor draws exactly what the screen's would (its blocks are
        # already arranged for this width, so this only renders them).
        compositor = Compositor()
        compositor.reflow(self, size)
        self._picture = compositor.render_strips(size)
        self._picture_key = (size.width, self.app.theme)
        self._clear_arrangement_cache()
        if self.source is not None:
            # A history volume can build its blocks again: drop them (get_content_height
            # keeps the height).
            self._known_height = (size.width, size.height)
            self.built = False
            self.call_later(self._drop_blocks)
        else:
            # The same height as the blocks: nothing around the volume moves.
            self.styles.height = size.height
        self.refresh(layout=True)
        return True

    def forget_picture(self) -> None:
        """A history volume far away: keep only its height (and its source, as a draft)."""
        if self.source is not None and not self.built and self._picture is not None:
            self._picture = None
            self.refresh()

    def build(self) -> None:
        """A history volume near view: build and show its blocks (soon, not at once)."""
        if self.source is not None and not self.built and not self._build_scheduled:
            self._build_scheduled = True
            self.call_later(self._build_blocks)

    def _lock(self) -> asyncio.Lock:
        if self._operations is None:
            self._operations = asyncio.Lock()
        return self._operations

    async def _build_blocks(self) -> None:
        async with self._lock():
            self._build_scheduled = False
            markdown = self.parent
            if self.built or self.source is None or not isinstance(markdown, StreamingMarkdown):
                return
            if not self.children:
                blocks = markdown.history_blocks(self.source)
                self.count = len(blocks)
                # Mounted while the picture (or blank) still stands in: arrange ignores them.
                await self.mount_all(blocks)
            # Then one step with no await: the blocks replace the picture in the next pass.
            self.built = True
            self._picture = None
            self._clear_arrangement_cache()
            self.refresh(layout=True)

    async def _drop_blocks(self) -> None:
        async with self._lock():
            if not self.built:
                await self.remove_children()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """A history volume without its blocks: the height they had, else an estimate."""
        if self.built or self.source is None:
            return super().get_content_height(container, viewport, width)
        known = self._known_height
        if known is not None and known[0] == width:
            return known[1]
        return estimate_height(self.source.lines, width)

    def thaw(self) -> None:
        """Lay out and show the blocks again."""
        if self.source is not None:
            self.build()
            return
        if self._picture is None:
            return
        self._picture = None
        self._clear_arrangement_cache()
        self.styles.height = None
        self.refresh(layout=True)

    def render_line(self, y: int) -> Strip:
        """A history volume with neither blocks nor picture: its source, as a draft."""
        if self.source is not None and not self.built and self._picture is None:
            return self.source.draft.line(y, self.size.width, _draft_style(self))
        return super().render_line(y)

    def render_lines(self, crop: Region) -> list[Strip]:
        """While frozen, the picture; otherwise what a container draws."""
        picture = self._picture
        if picture is None:
            return super().render_lines(crop)
        x1, x2 = crop.column_span
        blank = Strip.blank(self._picture_key[0])
        return [
            (picture[y] if y < len(picture) else blank).crop_extend(x1, x2, None)
            for y in crop.line_range
        ]

    async def action_link(self, href: str) -> None:
        """A link clicked in the picture is a link clicked in the document."""
        markdown = self.parent
        if isinstance(markdown, Markdown):
            self.post_message(Markdown.LinkClicked(markdown, href))

    def process_layout(self, placements: list[WidgetPlacement]) -> list[WidgetPlacement]:
        """Vertical, minus the outer margins of the first and last block.

        The volume carries those margins itself (see `StreamingMarkdown.pre_layout`),
        so they collapse with the neighbouring blocks exactly as in one flat document.
        """
        if not placements:
            return placements
        top = placements[0].margin.top
        if top:
            placements = [p._replace(region=p.region.translate((0, -top))) for p in placements]
        first = placements[0]
        placements[0] = first._replace(margin=Spacing(0, *first.margin[1:]))
        last = placements[-1]
        top_, right, _bottom, left = last.margin
        placements[-1] = last._replace(margin=Spacing(top_, right, 0, left))
        return placements

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        if self._picture is not None or not self.built:
            # Frozen (or blocks not built): the picture stands in, a layout pass stops here.
            return DockArrangeResult([], set(), Spacing())
        # Blocks are all of auto height: the available height never matters, and a fixed
        # one keeps every block's box model cached while the document grows.
        return super().arrange(Size(size.width, 0), optimal)


class StreamingFence(MarkdownFence):
    """A code fence still streaming: without a language, no guessing (it is done once, when
    the fence is finished, exactly as a one-shot render does)."""

    @classmethod
    def highlight(cls, code: str, language: str, ansi: bool = False, dark: bool = False) -> Any:
        if not language:
            _warm_lexers()
            language = "text"
        return super().highlight(code, language, ansi, dark)


_lexers_warm = False


def _warm_lexers() -> None:
    """Guessing a fence's language imports every Pygments lexer the first time (a few
    hundred ms): do that on a thread while the fence still streams."""
    global _lexers_warm
    if _lexers_warm:
        return
    _lexers_warm = True

    def warm() -> None:
        from pygments.lexers import guess_lexer

        guess_lexer("x = 1\n")

    threading.Thread(target=warm, name="habakkuk-lexers", daemon=True).start()


class _FullCollections:
    """Full garbage collections kept short while replies stream.

    A full collection walks every object in the process; with the widgets of a long
    reply that takes 100 ms or more, which a key press would wait for. While a reply
    streams, what survived the last full collection is frozen (`gc.freeze`), so the
    next one walks only what is newer. When the streams end everything is unfrozen
    and collected as usual (nothing frozen is leaked).
    """

    def __init__(self) -> None:
        self.holders = 0

    def hold(self) -> None:
        self.holders += 1
        if self.holders == 1:
            gc.freeze()
            gc.callbacks.append(self._collected)

    def release(self) -> None:
        if self.holders == 0:
            return
        self.holders -= 1
        if self.holders == 0:
            gc.callbacks.remove(self._collected)
            gc.unfreeze()

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            gc.freeze()


FULL_COLLECTIONS = _FullCollections()


class StreamingMarkdown(Markdown):
    """A Markdown document, given whole (history) or fed by fragments (a streaming reply).

    `feed` only buffers; a timer renders the buffer at most every RENDER_INTERVAL,
    rebuilding only the last block (see the module docstring), so a fast model never
    starves key presses. (Rendering less often while renders are slow was measured:
    fewer but larger renders gave a better median and a worse p95 and maximum.)
    """

    DEFAULT_CSS = """
    StreamingMarkdown { margin: 0; padding: 0 1; background: transparent; }
    """

    def __init__(self, text: str = "", *, build_lines: int = 0, **kwargs: object) -> None:
        """`text` is a whole reply from history, shown lazily (see the module docstring);
        its last `build_lines` estimated lines are built at once."""
        # History is not rendered by Markdown in one shot (it would build every block).
        super().__init__(None, **kwargs)  # type: ignore[arg-type]
        self.text = text
        self._history = bool(text)
        # History: not parsed yet (a leaf of estimated height) until near view.
        self._history_pending = self._history
        self._history_opening = False
        self._build_lines = build_lines
        self._draft: _Draft | None = None  # what it draws until parsed
        self.renders = 0
        self._buffered = False
        self._flush_timer: Timer | None = None
        self._flush_scheduled = False
        self._last_render = 0.0
        self._started = False
        self._holding_gc = False
        self._parser: MarkdownIt | None = None
        # Streaming state: the text up to _sealed_chars (_sealed_lines lines) is in volumes.
        self._sealed_chars = 0
        self._sealed_lines = 0
        self._volumes: list[MarkdownVolume] = []
        self._tail: list[MarkdownBlock] = []
        self._building_tail = False
        self._has_references = False
        self._pending_cr = False
        self._finished = False

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, fragment: str) -> None:
        """Add streamed text; it appears within RENDER_INTERVAL."""
        if not fragment:
            return
        # Markdown knows one line break, "\n"; a "\r\n" split across fragments is one.
        if self._pending_cr and fragment.startswith("\n"):
            fragment = fragment[1:]
        self._pending_cr = fragment.endswith("\r")
        fragment = _NEWLINES.sub("\n", fragment)
        if not fragment:
            return
        if not self._started:
            self._started = True
            self._hold_gc()
        self.text += fragment
        self._buffered = True
        if not self._flush_scheduled:
            self._flush_scheduled = True
            wait = RENDER_INTERVAL - (time.monotonic() - self._last_render)
            if wait > 0:
                self._flush_timer = self.set_timer(wait, self.flush)
            else:
                # A zero-delay Timer is not allowed; run it as soon as the widget is free.
                self.call_later(self.flush)

    async def flush(self) -> None:
        """Render what has been fed so far (the timer calls this; tests may too)."""
        self._flush_timer = None
        self._flush_scheduled = False
        if not self._buffered:
            return
        async with self.lock:
            if not self._buffered:
                return
            self._buffered = False
            self._last_render = time.monotonic()
            self.renders += 1
            await self._render_tail()

    async def finish(self) -> None:
        """Show whatever is buffered and stop streaming."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        await self.flush()
        if self._started:
            async with self.lock:
                await self._render_tail(final=True)
        # No block is added any more: the last volume may freeze too.
        self._finished = True
        self._release_gc()

    @property
    def streaming(self) -> bool:
        return self._buffered or self._flush_scheduled

    def blocks(self) -> list[MarkdownBlock]:
        """The document's top-level blocks in order (inside volumes or not)."""
        found: list[MarkdownBlock] = []
        for child in self.children:
            if isinstance(child, MarkdownVolume):
                found.extend(c for c in child.children if isinstance(c, MarkdownBlock))
            elif isinstance(child, MarkdownBlock):
                found.append(child)
        return found

    def on_mount(self) -> None:
        self.screen.screen_layout_refresh_signal.subscribe(self, self._layout_refreshed)
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        if self._history_pending and self._build_lines > 0:
            # After Markdown's own mount handler, which clears the (empty) document.
            self._open_history_soon()

    # -- history ---------------------------------------------------------------------------

    @property
    def source(self) -> str:
        """The Markdown source shown (a history reply's whole text, built or not)."""
        return self.text if self._history else super().source

    def build_from_end(self, lines: int) -> None:
        """Before mounting: build the blocks of the last `lines` estimated lines at once."""
        self._build_lines = lines

    def _open_history_soon(self) -> None:
        if not self._history_opening:
            self._history_opening = True
            self.call_later(self._open_history)

    async def _open_history(self) -> None:
        """Parse a history reply into volumes; build those of its last `build_lines` lines
        and those near the screen now."""
        async with self.lock:
            if not self._history_pending:
                return
            self._history_pending = False
            self._draft = None
            self.refresh()  # its own lines were the draft; the volumes draw from now on
            self._finished = True
            lines = self.text.split("\n")
            env: dict[str, Any] = {}
            tokens = self._md_parser().parse(self.text, env)
            references = env.get("references") or {}
            starts = [
                token.map[0]
                for token in tokens
                if token.level == 0 and token.map is not None and token.nesting >= 0
            ]
            cuts = [0, *starts[VOLUME_BLOCKS::VOLUME_BLOCKS], len(lines)]
            sources = [
                _HistorySource(lines[start:end], start, references)
                for start, end in itertools.pairwise(cuts)
                if start < end
            ]
            width = self.size.width or 80
            heights = [estimate_height(source.lines, width) for source in sources]
            near = self._near_view(heights)
            budget = self._build_lines
            volumes: list[MarkdownVolume] = []
            for index in reversed(range(len(sources))):
                source = sources[index]
                if budget > 0 or near[index]:
                    # Built at once: at the bottom where a session opens, or in view now
                    # (a jump here), which saves the volume a layout pass as a draft.
                    budget -= heights[index]
                    volume = MarkdownVolume(*self.history_blocks(source), source=source)
                else:
                    volume = MarkdownVolume(source=source)
                volumes.append(volume)
            volumes.reverse()
            self._volumes = volumes
            if volumes:
                await self.mount_all(volumes)

    def _near_view(self, heights: list[int]) -> list[bool]:
        """Whether each volume, at its estimated place in this reply, is near the screen
        (the `_layout_refreshed` rule: within a screen above or below it)."""
        region = self.content_region
        if not region:
            return [False] * len(heights)
        screen_height = self.screen.size.height
        near: list[bool] = []
        top = region.y
        for height in heights:
            near.append(top < 2 * screen_height and top + height > -screen_height)
            top += height
        return near

    def history_blocks(self, source: _HistorySource) -> list[MarkdownBlock]:
        """The blocks of a history volume's lines, as a one-shot render of the reply has them."""
        env: dict[str, Any] = {"references": dict(source.references)}
        # Ended by a line break, as the lines are in the reply (a table's range counts it).
        tokens = self._md_parser().parse("\n".join(source.lines) + "\n", env)
        blocks = list(self._parse_markdown(tokens))
        for block in blocks:
            start, end = block.source_range
            block.source_range = (start + source.first_line, end + source.first_line)
        return blocks

    def render_line(self, y: int) -> Strip:
        """A history reply not parsed yet: its source, as a draft."""
        if self._history_pending:
            if self._draft is None:
                self._draft = _Draft(self.text.split("\n"))
            return self._draft.line(y, self.content_size.width, _draft_style(self))
        return super().render_line(y)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """A history reply not parsed yet: an estimate from its text."""
        if self._history_pending:
            return estimate_height(self.text.split("\n"), width)
        return super().get_content_height(container, viewport, width)

    def on_unmount(self) -> None:
        self._release_gc()

    def _hold_gc(self) -> None:
        if not self._holding_gc:
            self._holding_gc = True
            FULL_COLLECTIONS.hold()

    def _release_gc(self) -> None:
        if self._holding_gc:
            self._holding_gc = False
            FULL_COLLECTIONS.release()

    # -- rendering ---------------------------------------------------------------------------

    async def _render_tail(self, *, final: bool = False) -> None:
        """Seal the blocks the new text finished, rebuild the tail."""
        self._markdown = self.text
        if final and self._has_references:
            await self._render_whole()
            return
        region = self.text[self._sealed_chars :]
        env: dict[str, Any] = {}
        tokens = self._md_parser().parse(region, env)
        if env.get("references"):
            self._has_references = True
        if final:
            cut_index, cut_line = len(tokens), region.count("\n")
        else:
            cut_index, cut_line = _last_boundary(tokens, region.count("\n"))
        sealed = self._build(tokens[:cut_index], tail=False) if cut_index else []
        tail = self._build(tokens[cut_index:], tail=True)
        # With a cut the old tail is among the finished blocks now, rebuilt as one-shot would.
        kept = 0 if cut_index else _updatable(self._tail, tail)
        stale, fresh = self._tail[kept:], tail[kept:]
        # New blocks are mounted hidden while the old ones stay on screen: mounting takes a
        # few turns of the loop, and the screen keeps drawing (key presses) meanwhile.
        for block in sealed + fresh:
            block.display = False
        await self._seal(sealed)
        if fresh:
            await self.mount_all(fresh)
        # Then one swap with no await in it, so no frame shows half of it.
        for old_block, new_block in zip(self._tail[:kept], tail[:kept], strict=True):
            _update_in_place(old_block, new_block)
        for block in stale:
            block.display = False
        for block in sealed + fresh:
            block.display = True
        self._tail = self._tail[:kept] + fresh
        removals = [block.remove() for block in stale]
        for removal in removals:
            await removal
        if cut_line:
            lines = region.split("\n")
            self._sealed_chars += sum(len(line) + 1 for line in lines[:cut_line])
            self._sealed_lines += cut_line

    def _md_parser(self) -> MarkdownIt:
        if self._parser is None:
            from markdown_it import MarkdownIt

            self._parser = MarkdownIt("gfm-like")
        return self._parser

    def _build(self, tokens: list[Token], *, tail: bool) -> list[MarkdownBlock]:
        self._building_tail = tail
        try:
            blocks = list(self._parse_markdown(tokens))
        finally:
            self._building_tail = False
        for block in blocks:
            start, end = block.source_range
            block.source_range = (start + self._sealed_lines, end + self._sealed_lines)
        return blocks

    def get_block_class(self, block_name: str) -> type[MarkdownBlock]:
        """Tail code fences skip language guessing (see StreamingFence)."""
        if self._building_tail and block_name in ("fence", "code_block"):
            return StreamingFence
        return super().get_block_class(block_name)

    async def _seal(self, blocks: list[MarkdownBlock]) -> None:
        while blocks:
            volume = self._volumes[-1] if self._volumes else None
            if volume is None or volume.count >= VOLUME_BLOCKS:
                volume = MarkdownVolume()
                self._volumes.append(volume)
                await self.mount(volume)
            room = VOLUME_BLOCKS - volume.count
            batch, blocks = blocks[:room], blocks[room:]
            volume.count += len(batch)
            await volume.mount_all(batch)

    async def _replace_tail(self, blocks: list[MarkdownBlock]) -> None:
        """Show `blocks` as the tail, updating blocks of the same kind in place."""
        old = self._tail
        kept = 0
        while kept < min(len(old), len(blocks)) and _update_in_place(old[kept], blocks[kept]):
            kept += 1
        for stale in old[kept:]:
            await stale.remove()
        self._tail = old[:kept] + blocks[kept:]
        if blocks[kept:]:
            await self.mount_all(blocks[kept:])

    async def _render_whole(self) -> None:
        """One-shot render of the whole text (a reference definition changed earlier links)."""
        await self._replace_tail([])
        for volume in self._volumes:
            await volume.remove()
        self._volumes = []
        self._sealed_chars = self._sealed_lines = 0
        blocks = self._build(list(self._md_parser().parse(self.text)), tail=False)
        self._sealed_chars = len(self.text)
        self._sealed_lines = self.text.count("\n")
        if blocks:
            await self.mount_all(blocks)

    # -- virtualization ------------------------------------------------------------------------

    def _layout_refreshed(self, screen: Screen[Any]) -> None:
        """After each layout pass (streaming or scrolling): freeze the complete volumes far
        from the screen, thaw those near it.

        Near is within one screen height above or below the visible area; far is more than
        two (the gap keeps a volume at the edge from flipping back and forth).
        """
        height = screen.size.height
        if self._history_pending:
            region = self.region
            if region and region.y < 2 * height and region.bottom > -height:
                self._open_history_soon()
            return
        if not self._volumes:
            return
        for volume in self._volumes:
            region = volume.region
            if not region:
                continue
            if volume.source is not None:
                self._virtualize_history(volume, region, height)
            elif volume.frozen:
                near = region.y < 2 * height and region.bottom > -height
                if near or not volume.picture_matches():
                    volume.thaw()
            elif (volume.count >= VOLUME_BLOCKS or self._finished) and (
                region.bottom < -2 * height or region.y > 3 * height
            ):
                volume.freeze()

    @staticmethod
    def _virtualize_history(volume: MarkdownVolume, region: Region, height: int) -> None:
        """Build a history volume near view; freeze it far away; far beyond, keep its height."""
        near = region.y < 2 * height and region.bottom > -height
        far = region.bottom < -2 * height or region.y > 3 * height
        if volume.built:
            if far:
                volume.freeze()
        elif near:
            volume.build()
        elif volume.frozen and (
            not volume.picture_matches()
            or region.bottom < -PICTURE_SCREENS * height
            or region.y > (PICTURE_SCREENS + 1) * height
        ):
            volume.forget_picture()

    def _theme_changed(self, theme: Theme) -> None:
        # Pictures hold the old colours: draw the blocks again (they refreeze later). History
        # volumes far away keep their height only; near ones are built again.
        for volume in self._volumes:
            if volume.source is not None:
                volume.forget_picture()
            else:
                volume.thaw()

    # -- layout --------------------------------------------------------------------------------

    def pre_layout(self, layout: Any) -> None:
        """Give each volume the outer margins of its first and last block (see
        MarkdownVolume.process_layout)."""
        for volume in self._volumes:
            children = volume.displayed_children
            if not children:
                continue
            top = children[0].styles.margin.top
            bottom = children[-1].styles.margin.bottom
            if volume.styles.margin != Spacing(top, 0, bottom, 0):
                volume.styles.margin = Spacing(top, 0, bottom, 0)

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        # As in MarkdownVolume: a fixed available height keeps the children's box models cached.
        return super().arrange(Size(size.width, 0), optimal)


def _last_boundary(tokens: list[Token], complete_lines: int) -> tuple[int, int]:
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


def _updatable(old: list[MarkdownBlock], new: list[MarkdownBlock]) -> int:
    """How many leading blocks of `old` can show the blocks of `new` in place."""
    count = 0
    for old_block, new_block in zip(old, new, strict=False):
        if type(old_block) is not type(new_block):
            break
        if not isinstance(new_block, MarkdownFence) and (new_block._blocks or old_block.children):
            # Lists, quotes and tables hold blocks of their own: rebuild them.
            break
        count += 1
    return count


def _update_in_place(old: MarkdownBlock, new: MarkdownBlock) -> bool:
    """Make the mounted `old` show `new` when only its inline content or code changed."""
    if type(old) is not type(new):
        return False
    if isinstance(old, MarkdownFence) and isinstance(new, MarkdownFence):
        old._copy_context(new)
        old.source_range = new.source_range
        old.set_content(new._highlighted_code)
        return True
    if new._blocks or old.children:
        # Lists, quotes and tables hold blocks of their own: rebuild them.
        return False
    old._copy_context(new)
    old.source_range = new.source_range
    old.set_content(new._content)
    return True
