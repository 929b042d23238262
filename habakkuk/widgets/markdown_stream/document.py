"""The streaming Markdown document: volumes of finished blocks, and a tail rebuilt per render.

See the package docstring for how it stays fast; this module is the container, the
volumes are in volume.py, their pictures in picture.py.
"""

from __future__ import annotations

import itertools
import re
import time
from typing import TYPE_CHECKING, Any

from textual.geometry import Region, Size, Spacing
from textual.layout import DockArrangeResult
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock

from habakkuk.widgets.bidi import visual_block
from habakkuk.widgets.markdown_stream.blocks import last_boundary, updatable, update_in_place
from habakkuk.widgets.markdown_stream.fence import StreamingFence
from habakkuk.widgets.markdown_stream.gc_policy import FULL_COLLECTIONS
from habakkuk.widgets.markdown_stream.picture import Draft, draft_style, estimate_height
from habakkuk.widgets.markdown_stream.textual_private import parse_blocks, set_document_source
from habakkuk.widgets.markdown_stream.volume import HistorySource, MarkdownVolume

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token
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


class StreamingMarkdown(Markdown):
    """A Markdown document, given whole (history) or fed by fragments (a streaming reply).

    `feed` only buffers; a timer renders the buffer at most every RENDER_INTERVAL,
    rebuilding only the last block (see the package docstring), so a fast model never
    starves key presses. (Rendering less often while renders are slow was measured:
    fewer but larger renders gave a better median and a worse p95 and maximum.)
    """

    DEFAULT_CSS = """
    StreamingMarkdown { margin: 0; padding: 0 1; background: transparent; }
    """

    def __init__(
        self,
        text: str = "",
        *,
        build_lines: int = 0,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """`text` is a whole reply from history, shown lazily (see the package docstring);
        its last `build_lines` estimated lines are built at once."""
        # History is not rendered by Markdown in one shot (it would build every block).
        super().__init__(None, name=name, id=id, classes=classes)
        self.text = text
        self._history = bool(text)
        # History: not parsed yet (a leaf of estimated height) until near view.
        self._history_pending = self._history
        self._history_opening = False
        self._build_lines = build_lines
        self._draft: Draft | None = None  # what it draws until parsed
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
                HistorySource(lines[start:end], start, references)
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

    def history_blocks(self, source: HistorySource) -> list[MarkdownBlock]:
        """The blocks of a history volume's lines, as a one-shot render of the reply has them."""
        env: dict[str, Any] = {"references": dict(source.references)}
        # Ended by a line break, as the lines are in the reply (a table's range counts it).
        tokens = self._md_parser().parse("\n".join(source.lines) + "\n", env)
        blocks = list(parse_blocks(self, tokens))
        for block in blocks:
            start, end = block.source_range
            block.source_range = (start + source.first_line, end + source.first_line)
        return blocks

    def render_line(self, y: int) -> Strip:
        """A history reply not parsed yet: its source, as a draft."""
        if self._history_pending:
            if self._draft is None:
                self._draft = Draft(self.text.split("\n"))
            return self._draft.line(y, self.content_size.width, draft_style(self))
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
        set_document_source(self, self.text)
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
            cut_index, cut_line = last_boundary(tokens, region.count("\n"))
        sealed = self._build(tokens[:cut_index], tail=False) if cut_index else []
        tail = self._build(tokens[cut_index:], tail=True)
        # With a cut the old tail is among the finished blocks now, rebuilt as one-shot would.
        kept = 0 if cut_index else updatable(self._tail, tail)
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
            update_in_place(old_block, new_block)
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
            blocks = list(parse_blocks(self, tokens))
        finally:
            self._building_tail = False
        for block in blocks:
            start, end = block.source_range
            block.source_range = (start + self._sealed_lines, end + self._sealed_lines)
        return blocks

    def get_block_class(self, block_name: str) -> type[MarkdownBlock]:
        """Tail code fences skip language guessing (see StreamingFence); text blocks draw
        right-to-left lines in visual order (widgets/bidi.py; code is left as written)."""
        if block_name in ("fence", "code_block"):
            return StreamingFence if self._building_tail else super().get_block_class(block_name)
        return visual_block(super().get_block_class(block_name))

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
        while kept < min(len(old), len(blocks)) and update_in_place(old[kept], blocks[kept]):
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
