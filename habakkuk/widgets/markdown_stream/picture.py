"""What stands in for blocks that are not laid out: a frozen volume's picture, a draft.

A `Picture` is the lines a volume's blocks drew once, at one width and theme; a frozen
volume draws it instead of arranging its blocks. A `Draft` is Markdown source drawn as
plain lines, wrapped the way `estimate_height` counts them, for what has neither blocks
nor a picture yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from habakkuk.widgets.bidi import visual_strip
from habakkuk.widgets.markdown_stream.textual_private import draw_widget

if TYPE_CHECKING:
    from textual.geometry import Region
    from textual.widget import Widget


def estimate_height(lines: list[str], width: int) -> int:
    """Lines that Markdown source lines probably take at `width` columns (before layout).

    Additive over lines, so a reply's estimate is the sum of its volumes' estimates.
    """
    # Lists, quotes and fences indent their text a little.
    width = max(width - 4, 8)
    return sum(-(-len(line) // width) if line else 1 for line in lines)


class Picture:
    """The lines a widget and its arranged children drew, and the width and theme they
    were drawn at."""

    __slots__ = ("key", "strips")

    def __init__(self, widget: Widget) -> None:
        """Draw `widget` (its children already arranged at its size) once."""
        size = widget.size
        self.strips = draw_widget(widget, size)
        self.key: tuple[int, str] = (size.width, widget.app.theme)

    def matches(self, widget: Widget) -> bool:
        """It was drawn at the widget's current width and the app's current theme."""
        return self.key == (widget.size.width, widget.app.theme)

    def lines(self, crop: Region) -> list[Strip]:
        """The picture's lines in `crop` (blank below its end)."""
        picture = self.strips
        x1, x2 = crop.column_span
        blank = Strip.blank(self.key[0])
        return [
            (picture[y] if y < len(picture) else blank).crop_extend(x1, x2, None)
            for y in crop.line_range
        ]


class Draft:
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
        return visual_strip(Strip([Segment(text, style)]).crop_extend(0, width, style))


def draft_style(widget: Widget) -> Style:
    """The style a draft is drawn in: the widget's own, dimmed."""
    return widget.visual_style.rich_style + Style(dim=True)
