"""A volume: finished top-level blocks of a document, laid out once, frozen far from view."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from textual.geometry import Region, Size, Spacing
from textual.layout import DockArrangeResult
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Markdown

from habakkuk.widgets.markdown_stream.picture import Draft, Picture, draft_style, estimate_height
from habakkuk.widgets.markdown_stream.textual_private import forget_arrangement, replace_placement

if TYPE_CHECKING:
    from textual.layout import WidgetPlacement
    from textual.widgets.markdown import MarkdownBlock


class HistorySource:
    """What a history volume builds its blocks from: lines of the reply, parsed again."""

    __slots__ = ("draft", "first_line", "lines", "references")

    def __init__(self, lines: list[str], first_line: int, references: dict[str, Any]) -> None:
        self.lines = lines
        self.first_line = first_line
        # Link reference definitions of the whole reply (they apply anywhere in it).
        self.references = references
        self.draft = Draft(lines)


@runtime_checkable
class HistoryDocument(Protocol):
    """The document a history volume belongs to: it parses the volume's lines."""

    def history_blocks(self, source: HistorySource) -> list[MarkdownBlock]: ...


class MarkdownVolume(Widget):
    """Finished top-level blocks of a streamed document, laid out once they are full.

    A complete volume can be frozen (see the package docstring): `freeze` renders its
    blocks into lines and from then on the volume draws those lines and arranges no
    children; `thaw` brings the blocks back.
    """

    # Textual spaces paragraphs with `Markdown > MarkdownParagraph`; in a volume they are
    # one level down.
    DEFAULT_CSS = """
    MarkdownVolume { height: auto; width: 1fr; layout: vertical; }
    MarkdownVolume > MarkdownParagraph { margin: 0 0 1 0; }
    """

    def __init__(self, *blocks: Widget, source: HistorySource | None = None) -> None:
        super().__init__(*blocks)
        self.count = len(blocks)
        # While frozen: the lines the blocks draw, at the width and theme they were drawn at.
        self._picture: Picture | None = None
        # History volumes (see the package docstring) build and drop their blocks.
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
        return self._picture is not None and self._picture.matches(self)

    def freeze(self) -> bool:
        """Stand in for the blocks with a picture of them at the current width.

        The blocks stay mounted, unarranged. Returns False when there is nothing laid
        out to draw (not yet arranged, or already frozen).
        """
        size = self.size
        if self._picture is not None or not self.children or not size.area:
            return False
        # Its blocks are already arranged for this width, so this only renders them.
        self._picture = Picture(self)
        forget_arrangement(self)
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
            if self.built or self.source is None or not isinstance(markdown, HistoryDocument):
                return
            if not self.children:
                blocks = markdown.history_blocks(self.source)
                self.count = len(blocks)
                # Mounted while the picture (or blank) still stands in: arrange ignores them.
                await self.mount_all(blocks)
            # Then one step with no await: the blocks replace the picture in the next pass.
            self.built = True
            self._picture = None
            forget_arrangement(self)
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
        forget_arrangement(self)
        self.styles.height = None
        self.refresh(layout=True)

    def render_line(self, y: int) -> Strip:
        """A history volume with neither blocks nor picture: its source, as a draft."""
        if self.source is not None and not self.built and self._picture is None:
            return self.source.draft.line(y, self.size.width, draft_style(self))
        return super().render_line(y)

    def render_lines(self, crop: Region) -> list[Strip]:
        """While frozen, the picture; otherwise what a container draws."""
        if self._picture is None:
            return super().render_lines(crop)
        return self._picture.lines(crop)

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
            placements = [
                replace_placement(p, region=p.region.translate((0, -top))) for p in placements
            ]
        first = placements[0]
        placements[0] = replace_placement(first, margin=Spacing(0, *first.margin[1:]))
        last = placements[-1]
        top_, right, _bottom, left = last.margin
        placements[-1] = replace_placement(last, margin=Spacing(top_, right, 0, left))
        return placements

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        if self._picture is not None or not self.built:
            # Frozen (or blocks not built): the picture stands in, a layout pass stops here.
            return DockArrangeResult([], set(), Spacing())
        # Blocks are all of auto height: the available height never matters, and a fixed
        # one keeps every block's box model cached while the document grows.
        return super().arrange(Size(size.width, 0), optimal)
