"""The Board screen: the home's cards by status, as columns (todo, doing, blocked, done)
where the terminal is wide enough, else as rows grouped under a header per status.

Filters: `s` steps the status (open, all, then each status), `f` the agent (any, each
configured agent, unassigned). `a` adds a card, Enter opens one's detail; g assign,
p priority, c comment, x cancel, r reopen and o (open the latest attempt's session) act
on the highlighted card. A blocked card says who must act (a question for you, or a
failure to reopen). The list is one board call (`runtime.board.list_cards`); the screen
follows CardChanged from the bus and reads again every few seconds for changes made by
other processes (the CLI). The screen never opens control.db.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import DataTable, Static

from habakkuk.engine.i18n import t
from habakkuk.screens.base import PollingScreen, on_bus
from habakkuk.screens.board_actions import CARD_ACTIONS, CARD_PALETTE, CardActions
from habakkuk.screens.board_card import BoardCardScreen
from habakkuk.screens.board_form import BoardForm
from habakkuk.screens.board_views import short_id, state_cell
from habakkuk.screens.bus_messages import CardChangedArrived
from habakkuk.screens.list_detail import ListScreen, PaletteEntry
from habakkuk.widgets.fit_table import Cell, FitTable
from habakkuk.widgets.footer import KeyFooter
from habakkuk.work.board_types import STATUSES, USER

if TYPE_CHECKING:
    from habakkuk.work.board_types import Card, NewCard

WIDE = 120  # columns from this width; grouped rows below it
FIRST_PAGE = 60  # rows painted before the rest are added: more than a screenful
LIMIT = 1000  # cards listed in one call
STATUS_FILTERS: tuple[str, ...] = ("open", "all", *STATUSES)
# The columns; cancelled cards join done (both are finished).
COLUMNS: tuple[str, ...] = ("todo", "doing", "blocked", "done")
SHOWN = {"open": ("todo", "doing", "blocked"), "all": COLUMNS, "cancelled": ("done",)}
ANY = None  # the agent filter that lists every card
GROUPED = ("card", "title", "agent", "p", "state")  # the grouped list's columns
Row: TypeAlias = "Card | str"  # a card, or the status of a header row


def column_of(card: Card) -> str:
    return "done" if card.status == "cancelled" else card.status


class BoardScreen(CardActions, ListScreen, PollingScreen):
    """Every card of the home by status; Esc goes back to the chat."""

    refresh_seconds: ClassVar[float] = 3.0

    DEFAULT_CSS = """
    BoardScreen #board-filters { height: 1; padding: 0 1; color: $text-muted; }
    BoardScreen #board-columns { height: 1fr; }
    BoardScreen #board-columns > DataTable { width: 1fr; height: 1fr;
                                             border-right: solid $panel; }
    BoardScreen #board-rows { height: 1fr; }
    BoardScreen .empty { height: auto; padding: 1 2; color: $text-muted; }
    """

    BINDINGS: ClassVar[list[Any]] = [
        Binding("a", "add", "Add", id="board.add"),
        Binding("g", "assign", "Assign", id="board.assign"),
        Binding("p", "priority", "Priority", id="board.priority"),
        Binding("c", "comment", "Comment", id="board.comment"),
        Binding("x", "cancel", "Cancel", id="board.cancel"),
        Binding("r", "reopen", "Reopen", id="board.reopen"),
        Binding("o", "open_attempt", "Open attempt", id="board.open_attempt", show=False),
        Binding("s", "status_filter", "Status", id="board.status"),
        Binding("f", "agent_filter", "Agent", id="board.agent"),
        Binding("escape", "back", "Back", id="board.back", show=False),
    ]
    PALETTE = (
        PaletteEntry("add", "add card", "A card for an agent"),
        PaletteEntry(
            "open", "open card", "The card's body, comments, events and attempts", ("enter",)
        ),
        PaletteEntry("status_filter", "filter by status", "Open, all, or one status"),
        PaletteEntry("agent_filter", "filter by agent", "Any agent, one agent, or unassigned"),
        *CARD_PALETTE,
    )

    def __init__(self) -> None:
        super().__init__(id="board", title="Board")
        self.cards: list[Card] = []
        self.status = "open"
        self.agent: str | None = ANY
        self.wide: bool | None = None  # the layout painted last (None: none yet)
        self.list_calls = 0  # board calls made for the list (the benchmark checks one each)
        self._generation = 0
        self._keep: str | None = None  # the card a pending read puts the cursor on
        self._filters = Static("", id="board-filters")
        # A long state (then title) gives way, cut with "…", so the agent, the priority and
        # the state stay on screen at 80 cells.
        self._columns: dict[str, FitTable] = {
            status: FitTable(
                id=f"board-col-{status}", shrink={"state": 12, status: 12}, zebra_stripes=False
            )
            for status in COLUMNS
        }
        self._rows = FitTable(
            id="board-rows", shrink={"state": 12, "title": 12}, zebra_stripes=False
        )
        # Each table's cards in row order (a status: the header row of the grouped list).
        self._placed: dict[FitTable, list[Row]] = {}
        self._labels: dict[FitTable, tuple[str, ...]] = {
            table: (status, "agent", "p", "state") for status, table in self._columns.items()
        }
        self._labels[self._rows] = GROUPED
        self._counts: dict[str, int] = {}
        self._reading = False

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._filters
        yield self._empty  # at the top, where no toast covers it
        with Horizontal(id="board-columns"):
            yield from self._columns.values()
        yield self._rows
        yield KeyFooter()

    def on_mount(self) -> None:
        for table, labels in self._labels.items():
            table.fill(labels, [])
        self._layout(self.size.width >= WIDE if self.size.width else False)
        self._show_filters()

    def refresh_data(self) -> None:
        # Opening runs both runtime_ready and on_screen_resume: one read is enough.
        if not self._reading:
            self.reload()

    # -- the list ------------------------------------------------------------------------

    def reload(self, keep: str | None = None) -> None:
        """Read the list again (one board call), the cursor on `keep` (default: the
        highlighted card)."""
        self._generation += 1
        # A live update that lands while an add's read is pending must not move the
        # cursor off the card just added: the pending choice stands until painted.
        keep = keep or self._keep or self.selected_id()
        self._keep = keep
        self._load(self._generation, keep)

    @work(group="board-list")
    async def _load(self, generation: int, keep: str | None) -> None:
        if not self.has_runtime:
            return
        board = self.board
        status, agent = self.status, self.agent
        self.list_calls += 1
        self._reading = True
        try:
            found = await self.call(
                lambda: board.list_cards(status=status, assignee=agent, limit=LIMIT)
            )
        finally:
            self._reading = False
        if generation != self._generation or found is None:
            return
        self.cards = found
        self._keep = None
        await self._paint(keep, generation)

    async def _paint(self, keep: str | None, generation: int) -> None:
        """Put `self.cards` on the screen in the layout the width allows."""
        cards = self.cards
        counts: dict[str, int] = {}
        for card in cards:
            counts[card.status] = counts.get(card.status, 0) + 1
        self._counts = counts
        summary = " · ".join(f"{n} {s}" for s, n in counts.items()) or t("tui.board.no_cards")
        needs_you = sum(c.status == "blocked" and c.blocked_kind == "question" for c in cards)
        if needs_you:
            summary += " · " + t("tui.board.need_you", count=needs_you)
        self._title.update(Content(t("tui.title.board", summary=summary)))
        self.show_empty("" if cards else t("tui.empty.board"))
        wide = self.size.width >= WIDE
        self._layout(wide)
        if wide:
            shown = SHOWN.get(self.status, (column_of_status(self.status),))
            for status, table in self._columns.items():
                table.display = status in shown
                mine: list[Row] = [c for c in cards if column_of(c) == status]
                self._fill(table, mine, keep, FIRST_PAGE)
        else:
            self._fill(self._rows, self._grouped(cards), keep, FIRST_PAGE)
        self.refresh_bindings()
        # A screenful first; the rest of 1,000 cards join after that frame.
        if len(cards) > FIRST_PAGE:
            await self.next_frame()
            if generation != self._generation:
                return
            for table, placed in self._placed.items():
                if table.display and table.row_count < len(placed):
                    self._add_rows(table, placed[table.row_count :])
            self._restore(keep)

    def _grouped(self, cards: list[Card]) -> list[Row]:
        """The rows of the grouped list: a header (its status) before each status's cards."""
        rows: list[Row] = []
        for status in STATUSES:
            mine = [c for c in cards if c.status == status]
            if mine:
                rows.append(status)
                rows.extend(mine)
        return rows

    def _layout(self, wide: bool) -> None:
        if wide == self.wide:
            return
        self.wide = wide
        self.query_one("#board-columns").display = wide
        self._rows.display = not wide
        focus = self._rows if not wide else self._columns["todo"]
        focus.focus()

    def _fill(self, table: FitTable, placed: list[Row], keep: str | None, first: int) -> None:
        self._placed[table] = placed
        table.fill(self._labels[table], self._cells(table, placed[:first]))
        self._restore(keep)

    def _add_rows(self, table: FitTable, placed: list[Row]) -> None:
        table.extend(self._cells(table, placed))

    def _cells(self, table: FitTable, placed: list[Row]) -> list[tuple[str | None, list[Cell]]]:
        grouped = table is self._rows
        rows: list[tuple[str | None, list[Cell]]] = []
        for card in placed:
            if isinstance(card, str):
                count = self._counts.get(card, 0)
                header: list[Cell] = [Text(f"{card} ({count})", style="bold"), "", "", "", ""]
                rows.append((f"header:{card}", header))
                continue
            cells: list[Cell] = [
                Text(card.title),
                Text(card.assignee or "—", style="" if card.assignee else "dim"),
                Text(str(card.priority)),
                state_cell(card),
            ]
            if grouped:
                cells.insert(0, Text(short_id(card.id), style="dim"))
            rows.append((card.id, cells))
        return rows

    def _restore(self, keep: str | None) -> None:
        """The cursor back on `keep` when it is shown (else on the first card)."""
        for table, placed in self._placed.items():
            if not table.display or table.row_count == 0:
                continue
            ids = [c.id if not isinstance(c, str) else None for c in placed[: table.row_count]]
            if keep is not None and keep in ids:
                table.move_cursor(row=ids.index(keep))
                if self.wide:
                    table.focus()
            elif table.cursor_row >= table.row_count or isinstance(placed[table.cursor_row], str):
                first = next((n for n, c in enumerate(ids) if c is not None), 0)
                table.move_cursor(row=first)

    def on_resize(self, event: events.Resize) -> None:
        wide = event.size.width >= WIDE
        if self.wide is not None and wide != self.wide and self._loaded:
            self._repaint(self.selected_id())

    @work(group="board-paint")
    async def _repaint(self, keep: str | None) -> None:
        """The cards already read, in the layout the new width allows (no board call)."""
        await self._paint(keep, self._generation)

    # -- the highlighted card ------------------------------------------------------------

    def current_table(self) -> FitTable:
        """The table the cursor is in: the focused column, or the grouped list."""
        if not self.wide:
            return self._rows
        focused = self.focused
        if isinstance(focused, FitTable) and focused in self._placed:
            return focused
        return next((t for t in self._columns.values() if t.display), self._columns["todo"])

    def selected(self) -> Card | None:
        """The highlighted card (None on a header row or an empty column)."""
        table = self.current_table()
        placed = self._placed.get(table, [])
        row = table.cursor_row
        if 0 <= row < min(len(placed), table.row_count):
            card = placed[row]
            return None if isinstance(card, str) else card
        return None

    def selected_id(self) -> str | None:
        card = self.selected()
        return card.id if card is not None else None

    def acting_card(self) -> Card | None:
        return self.selected()

    def card_changed(self, card: Card) -> None:
        self.reload(keep=card.id)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.refresh_bindings()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    @on_bus(CardChangedArrived)
    def _on_card(self, message: CardChangedArrived) -> None:
        # A tool, the dispatcher or another surface of this process moved a card.
        self.reload()

    # -- keys ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CARD_ACTIONS:
            return self.card_action_allowed(action)
        if action == "open":
            return self.selected() is not None
        return True

    def action_open(self) -> None:
        """The highlighted card's detail."""
        card = self.selected()
        if card is not None:
            self.app.push_screen(BoardCardScreen(card.id), lambda _: self.reload(keep=card.id))

    def action_status_filter(self) -> None:
        """The next status filter: open, all, then each status."""
        self.status = STATUS_FILTERS[(STATUS_FILTERS.index(self.status) + 1) % len(STATUS_FILTERS)]
        self._show_filters()
        self.reload()

    def agents(self) -> list[str | None]:
        """The agent filter's steps: any, each configured agent, unassigned ("")."""
        names = list(self.runtime.config.agents) if self.has_runtime else []
        return [ANY, *names, ""]

    def action_agent_filter(self) -> None:
        """The next agent filter."""
        steps = self.agents()
        at = steps.index(self.agent) if self.agent in steps else 0
        self.agent = steps[(at + 1) % len(steps)]
        self._show_filters()
        self.reload()

    def _show_filters(self) -> None:
        agent = "any" if self.agent is None else (self.agent or "unassigned")
        self._filters.update(
            Content(f"status: {self.status} · agent: {agent}   (s: status · f: agent)")
        )

    def action_add(self) -> None:
        """The add form; the notice says what the card is once stored."""
        if not self.has_runtime:
            return

        def done(new: NewCard | None) -> None:
            if new is not None:
                self.change(lambda board: board.create(new, by=USER))

        self.app.push_screen(BoardForm(self.agent or ""), done)


def column_of_status(status: str) -> str:
    """The column a one-status filter shows."""
    return "done" if status == "cancelled" else status
