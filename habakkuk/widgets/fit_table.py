"""A DataTable whose columns fit its width: long text gives way, cut with "…", and the
least needed columns are left out, so no column runs off the right edge at 80 cells.

Textual's DataTable sizes each column to its widest cell and scrolls sideways: at 80
columns a long note title pushed its date off the screen, and the schedules' streak and
agent were out of sight. A FitTable is given its rows whole (`fill`, `extend`) and lays
them out for the width it has, again whenever that width changes:

- `shrink`: columns that may be narrower than their text, each down to a width, in the
  order they give way; their cells end in "…" where cut;
- `drop`: columns left out, in this order, while the others cannot fit even shrunk (the
  screen shows the same value elsewhere, its pane).

The cells keep their whole text (`get_row_at` returns it); only the drawing is cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import CursorType

Cell = str | Text
Row = tuple[str | None, Sequence[Cell]]  # (row key, a cell per label)


class FitTable(DataTable[Cell]):
    """Rows laid out for the width the table has (see the module's docstring)."""

    def __init__(
        self,
        *,
        shrink: Mapping[str, int] | None = None,
        drop: Sequence[str] = (),
        id: str | None = None,
        cursor_type: CursorType = "row",
        zebra_stripes: bool = True,
    ) -> None:
        super().__init__(id=id, cursor_type=cursor_type, zebra_stripes=zebra_stripes)
        self._shrink = dict(shrink or {})
        self._drop = tuple(drop)
        self.labels: tuple[str, ...] = ()
        self._rows: list[Row] = []
        self._layout: tuple[tuple[str, ...], tuple[int | None, ...]] | None = None
        self._natural: list[int] = []

    # -- what is shown -----------------------------------------------------------------------

    @property
    def shown_labels(self) -> tuple[str, ...]:
        """The columns shown now (the others were left out for want of room)."""
        return self._layout[0] if self._layout is not None else self.labels

    def fill(self, labels: Sequence[str], rows: Sequence[Row]) -> None:
        """Show `rows` (each a key and a cell per label) in place of what was shown; the
        cursor goes to the first row (move it after)."""
        self.labels = tuple(labels)
        self._rows = list(rows)
        self._natural = [cell_len(label) for label in self.labels]
        self._measure(self._rows)
        self._lay_out(keep_cursor=False)

    def extend(self, rows: Sequence[Row]) -> None:
        """Add rows at the end (the next page); all are laid out again if they need it."""
        self._rows.extend(rows)
        self._measure(rows)
        if self._choose() != self._layout:
            self._lay_out(keep_cursor=True)
        else:
            self._add(rows)

    def set_cell(self, key: str, label: str, cell: Cell) -> None:
        """Change one cell of row `key` (shown or not)."""
        column = self.labels.index(label)
        for index, (row_key, cells) in enumerate(self._rows):
            if row_key == key:
                changed = list(cells)
                changed[column] = cell
                self._rows[index] = (row_key, changed)
                break
        else:
            return
        self._natural[column] = max(self._natural[column], _width(cell))
        if self._choose() != self._layout:
            self._lay_out(keep_cursor=True)
        elif label in self.shown_labels:
            self.update_cell(key, label, self._cell(label, cell))

    # -- laying out --------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        if self._rows and self._choose() != self._layout:
            self._lay_out(keep_cursor=True)

    def _measure(self, rows: Sequence[Row]) -> None:
        for _, cells in rows:
            for column, cell in enumerate(cells):
                self._natural[column] = max(self._natural[column], _width(cell))

    def _choose(self) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
        """The columns to show and the width of each (None: its text's width)."""
        # Room for the vertical scrollbar when the rows overflow the height (more rows do
        # not resize the table: `extend` chooses again).
        room = self.content_region.width
        if len(self._rows) + int(self.show_header) > self.content_region.height:
            room -= self.styles.scrollbar_size_vertical
        natural = dict(zip(self.labels, self._natural, strict=True))
        shown = list(self.labels)
        dropping = list(self._drop)
        while True:
            widths: dict[str, int | None] = dict.fromkeys(shown)
            if self.content_region.width <= 0:
                break  # not laid out yet: on_resize lays it out again
            # Every column has a cell's padding on each side.
            excess = sum(natural[label] + 2 * self.cell_padding for label in shown) - room
            for label, narrowest in self._shrink.items():
                if excess <= 0:
                    break
                if label in widths and natural[label] > narrowest:
                    cut = min(excess, natural[label] - narrowest)
                    widths[label] = natural[label] - cut
                    excess -= cut
            if excess <= 0 or not dropping:
                break
            left_out = dropping.pop(0)
            if left_out in shown:
                shown.remove(left_out)
        return tuple(shown), tuple(widths[label] for label in shown)

    def _lay_out(self, *, keep_cursor: bool) -> None:
        row = self.cursor_row
        self._layout = self._choose()
        shown, widths = self._layout
        self.clear(columns=True)
        for label, width in zip(shown, widths, strict=True):
            self.add_column(label, width=width, key=label)
        self._add(self._rows)
        if keep_cursor and self._rows:
            self.move_cursor(row=min(max(row, 0), len(self._rows) - 1))

    def _add(self, rows: Sequence[Row]) -> None:
        shown = self.shown_labels
        columns = [self.labels.index(label) for label in shown]
        for key, cells in rows:
            self.add_row(*(self._cell(shown[i], cells[c]) for i, c in enumerate(columns)), key=key)

    def _cell(self, label: str, cell: Cell) -> Cell:
        if label not in self._shrink:
            return cell
        # Cut at the column's width with "…" (a Text as it is would be cropped bare).
        text = cell.copy() if isinstance(cell, Text) else Text(cell)
        text.no_wrap = True
        text.overflow = "ellipsis"
        return text


def _width(cell: Cell) -> int:
    """The widest line of a cell, in cells."""
    plain = cell.plain if isinstance(cell, Text) else cell
    return max((cell_len(line) for line in plain.split("\n")), default=0)
