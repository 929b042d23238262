"""FitTable: long text gives way with "…", then the least needed columns are left out, so
no column runs off the edge; the cells keep their whole text; a resize lays it out again."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from habakkuk.widgets.fit_table import FitTable, Row
from tests.helpers import eventually
from tests.tui.conftest import drawn

LABELS = ("name", "when", "status", "agent")
ROWS: list[Row] = [
    ("a", [Text("a name long enough to be cut somewhere"), "0 8 * * 1-5", "ok", "main"]),
    ("b", [Text("short"), "@daily", Text("error: exit 1"), "ops"]),
]


class OneTable(App[None]):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def compose(self) -> ComposeResult:
        table = FitTable(id="t", shrink={"name": 8, "status": 6}, drop=("agent", "when"))
        table.styles.width = self.width
        yield table


async def test_text_gives_way_then_columns_are_left_out_and_a_resize_lays_out_again() -> None:
    app = OneTable(80)
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(FitTable)
        table.fill(LABELS, ROWS)
        await pilot.pause()
        assert table.shown_labels == LABELS  # 80 cells: everything fits, nothing cut
        assert "a name long enough to be cut somewhere" in drawn(table)[1]
        table.styles.width = 40
        # The name and the status give way (down to 8 and 6 cells), each cut with "…".
        await eventually(lambda: "…" in drawn(table)[1], what="the name cut")
        lines = drawn(table)
        assert table.shown_labels == LABELS and all(len(line) <= 40 for line in lines)
        assert lines[1].split() == ["a", "name", "…", "0", "8", "*", "*", "1-5", "ok", "main"]
        assert lines[2].split() == ["short", "@daily", "error:", "…", "ops"]
        table.styles.width = 26
        # Shrunk, they still do not fit: the agent, then the `when` are left out.
        await eventually(lambda: table.shown_labels == ("name", "status"), what="two columns")
        lines = drawn(table)
        assert all(len(line) <= 26 for line in lines)
        assert lines[2].split() == ["short", "error:", "exit", "1"]
        # The cells keep their whole text: only the drawing is cut.
        assert str(table.get_row_at(0)[0]) == "a name long enough to be cut somewhere"
        table.styles.width = 80
        await eventually(lambda: table.shown_labels == LABELS, what="every column back")


async def test_rows_added_later_that_need_more_room_lay_the_table_out_again() -> None:
    app = OneTable(40)
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(FitTable)
        table.fill(LABELS, [("b", ROWS[1][1])])
        await pilot.pause()
        assert table.shown_labels == LABELS
        table.move_cursor(row=0)
        table.extend([("a", ROWS[0][1])])
        await pilot.pause()
        assert table.row_count == 2 and table.cursor_row == 0
        assert all(len(line) <= 40 for line in drawn(table))  # not 75 cells wide
        assert "…" in drawn(table)[2]
        table.set_cell("b", "status", Text("ok"))
        await pilot.pause()
        assert str(table.get_row_at(0)[table.shown_labels.index("status")]) == "ok"
