"""What the section screens built on a list share, so a new one declares only what is its
own.

`SectionScreen`: a screen that acts through one service (a refusal of the service is a
notice, never a crash), lists its actions in the command palette as `Section: action`
with the keys its bindings give them, and goes back to the chat on Esc.

`ListScreen`: a section screen with a title line and the line an empty list shows.

`ListDetailScreen`: a list of the service's items beside the highlighted one's detail
(memory, skills, schedules). A screen declares its columns (`COLUMNS`, how they give way
at 80 cells), its row source (`listing`, `key`, `cells`), its detail (`fetch_detail`,
`show_detail`, the pane in `compose_pane`) and its actions (`BINDINGS`, `PALETTE`); the
list is read in a worker, late answers are dropped, the cursor stays on the item it was
on, a long list paints a screenful first, and the list is read again when the screen
comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from textual import work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.keys import format_key
from textual.widgets import DataTable, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.screens.base import RuntimeScreen
from habakkuk.widgets.fit_table import Cell, FitTable, Row
from habakkuk.widgets.footer import KeyFooter
from habakkuk.widgets.words import said

if TYPE_CHECKING:
    from textual.app import ComposeResult

T = TypeVar("T")
Item = TypeVar("Item")
Detail = TypeVar("Detail")


@dataclass(frozen=True)
class PaletteEntry:
    """One of a screen's actions in the command palette: `SECTION: title`, then `about`
    and its keys (`keys`, then those the screen's bindings give `action`)."""

    action: str
    title: str
    about: str
    keys: tuple[str, ...] = ()  # keys that run it without a binding of their own (Enter)


class SectionScreen(RuntimeScreen):
    """A section's screen that acts through one service; see the module's docstring."""

    SECTION: ClassVar[str] = ""  # the palette's category: "Memory"
    PALETTE: ClassVar[tuple[PaletteEntry, ...]] = ()
    # Refusals the caller of `call` handles itself (raised, not shown).
    RAISED: ClassVar[tuple[type[HabakkukError], ...]] = ()

    async def call(self, what: Callable[[], Awaitable[T]]) -> T | None:
        """Run one call of the service; a refusal is a notice and None."""
        try:
            return await what()
        except self.RAISED:
            raise
        except HabakkukError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return None

    def keys_of(self, action: str) -> list[str]:
        """The keys the screen's bindings give `action`, as the footer writes them."""
        return [
            format_key(key.strip())
            for binding in self.BINDINGS
            if isinstance(binding, Binding) and binding.action == action
            for key in binding.key.split(",")
        ]

    def palette_commands(self) -> Iterable[SystemCommand]:
        """The screen's actions for the command palette, `SECTION: ...`."""
        for entry in self.PALETTE:
            keys = ", ".join((*entry.keys, *self.keys_of(entry.action)))
            words = f"tui.palette.{self.SECTION.lower()}.{entry.action}"
            yield SystemCommand(
                f"{said(f'tui.palette.{self.SECTION.lower()}', self.SECTION)}: "
                f"{said(words, entry.title)}",
                f"{said(words + '.about', entry.about)} ({keys})",
                getattr(self, f"action_{entry.action}"),
            )

    def action_back(self) -> None:
        """Esc: back to the chat."""
        self.happ.action_go("chat")

    async def next_frame(self) -> None:
        """Wait until the screen has painted what is there now."""
        painted = asyncio.Event()
        self.call_after_refresh(painted.set)
        await painted.wait()


class ListScreen(SectionScreen):
    """A section screen with a title line and what an empty list says (at the top, where
    no toast covers it)."""

    def __init__(self, *, id: str, title: str) -> None:
        super().__init__(id=id)
        self._title = Static(title, classes="section-title")
        self._empty = Static("", classes="empty")

    def on_mount(self) -> None:
        self._empty.display = False

    def show_empty(self, text: str) -> None:
        """Say `text` above the list (an empty `text`: the list has items, say nothing)."""
        self._empty.update(Content(text))
        self._empty.display = bool(text)


@dataclass(frozen=True)
class Listing(Generic[Item]):
    """What one read of a list gives: its items, the title above them, what the list says
    when there are none, and when it is a first page, how many there are in all. A listing
    may show other columns than the screen's (`columns`, with their `cells`)."""

    items: Sequence[Item]
    title: str
    empty: str
    total: int | None = None
    columns: tuple[str, ...] | None = None
    cells: Callable[[Item], list[Cell]] | None = None


class ListDetailScreen(ListScreen, Generic[Item, Detail]):
    """A list beside the highlighted item's detail; see the module's docstring."""

    DEFAULT_CSS = """
    ListDetailScreen .list-body { height: 1fr; }
    ListDetailScreen .list-table { width: 3fr; height: 1fr; }
    ListDetailScreen .list-pane { width: 2fr; height: 1fr; border-left: solid $panel; }
    ListDetailScreen .pane-line { height: auto; padding: 0 1; }
    """

    ITEM: ClassVar[str] = "item"  # one row's word: the ids `ITEM-table` and `ITEM-pane`
    COLUMNS: ClassVar[tuple[str, ...]] = ()
    # At 80 cells: how narrow each column may get (cut with "…"), then which are left out.
    SHRINK: ClassVar[dict[str, int]] = {}
    DROP: ClassVar[tuple[str, ...]] = ()
    ROW_ACTION: ClassVar[str | None] = None  # the action Enter on a row runs
    # Rows painted before the rest join (None: all at once): DataTable measures every new
    # row before its next frame, and 1,000 rows held that frame up by a third of a second.
    FIRST_PAGE: ClassVar[int | None] = None
    PER_AGENT: ClassVar[bool] = False  # one agent's items at a time (`n`/`a`: the next)

    def __init__(self, *, id: str, title: str) -> None:
        super().__init__(id=id, title=title)
        self.agent = ""  # whose items are listed (PER_AGENT)
        self.items: list[Item] = []  # the rows, in order
        self.total = 0  # how many there are in all (the list may hold a first page)
        # Bumped by every listing and every pane request: late answers are dropped.
        self._generation = 0
        self._pane = 0
        self._resumed = False  # shown once already
        self._table = FitTable(id=f"{self.ITEM}-table", shrink=self.SHRINK, drop=self.DROP)
        self._table.add_class("list-table")

    # -- what a screen declares --------------------------------------------------------------

    async def listing(self) -> Listing[Item]:
        """Read the list (through `call`: a refusal lists nothing)."""
        raise NotImplementedError

    def key(self, item: Item) -> str:
        """The item's row key (what the cursor is kept on)."""
        raise NotImplementedError

    def cells(self, item: Item) -> list[Cell]:
        """The item's cells, one per column of `COLUMNS`."""
        raise NotImplementedError

    async def fetch_detail(self, item: Item) -> Detail:
        """Read what the pane shows of `item`."""
        raise NotImplementedError

    def show_detail(self, item: Item | None, detail: Detail | None) -> None:
        """Show `item`'s detail in the pane (None: an empty pane)."""
        raise NotImplementedError

    def compose_pane(self) -> ComposeResult:
        """The pane beside the list."""
        raise NotImplementedError

    def compose_top(self) -> ComposeResult:
        """What stands between the title and the list (a search box)."""
        return iter(())

    # -- hooks with a default ----------------------------------------------------------------

    def highlighted(self, row: int, item: Item | None) -> None:
        """The cursor came to `row`: show its item's detail."""
        if item is not None:
            self.read_detail(item)

    def nothing_listed(self) -> None:
        """The list came back empty."""
        self.show_detail(None, None)

    def agent_changed(self) -> None:
        """Another agent's items are about to be listed."""
        self.show_detail(None, None)

    def reload_on_resume(self) -> bool:
        """Whether coming back to the screen reads the list again."""
        return True

    # -- the screen ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self._title
        yield from self.compose_top()
        yield self._empty
        with Horizontal(id=f"{self.id}-body", classes="list-body"):
            yield self._table
            yield from self.compose_pane()
        yield KeyFooter()

    def on_mount(self) -> None:
        self._table.fill(self.COLUMNS, [])
        self._table.focus()

    def runtime_ready(self) -> None:
        if self.PER_AGENT:
            self.agent = self.runtime.config.agent(None).name
        self.reload()

    def on_screen_resume(self) -> None:
        # Items change elsewhere too (the agent's tools, the CLI, other surfaces): read
        # again when the screen comes back (its first showing is runtime_ready's load).
        if self._resumed and self._loaded and self.has_runtime and self.reload_on_resume():
            self.reload()
        self._resumed = True

    # -- the list ------------------------------------------------------------------------

    def reload(self, keep: str | None = None) -> None:
        """Read the list again, the cursor on `keep` (default: the highlighted item) when
        it is still listed."""
        self._generation += 1
        self._load(self._generation, keep or self.selected_id())

    @work(group="list")
    async def _load(self, generation: int, keep: str | None) -> None:
        if not self.has_runtime:
            return
        listing = await self.listing()
        if generation != self._generation:
            return  # a newer listing was asked for meanwhile
        items = list(listing.items)
        self.items = items
        self.total = len(items) if listing.total is None else listing.total
        self._title.update(Content(listing.title))
        cells = listing.cells or self.cells
        keys = [self.key(item) for item in items]
        first = len(items) if self.FIRST_PAGE is None else self.FIRST_PAGE
        table = self._table
        table.fill(listing.columns or self.COLUMNS, self.rows(items[:first], cells))
        if keep in keys[:first] or (items and keep not in keys):
            table.move_cursor(row=keys.index(keep) if keep in keys else 0)
        self.show_empty("" if items else listing.empty)
        if not items:
            self.nothing_listed()
        self.refresh_bindings()
        if len(items) > first:
            await self.next_frame()
            if generation != self._generation:
                return
            table.extend(self.rows(items[first:], cells))
            if keep in keys[first:]:
                table.move_cursor(row=keys.index(keep))

    def rows(
        self, items: Iterable[Item], cells: Callable[[Item], list[Cell]] | None = None
    ) -> list[Row]:
        """The table rows of `items` (their cells as `cells` makes them: default, `cells`)."""
        make = cells or self.cells
        return [(self.key(item), make(item)) for item in items]

    def selected(self) -> Item | None:
        """The highlighted item."""
        row = self._table.cursor_row
        if 0 <= row < len(self.items):
            return self.items[row]
        return None

    def selected_id(self) -> str | None:
        """The highlighted item's key."""
        item = self.selected()
        return self.key(item) if item is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table is self._table:
            self.highlighted(event.cursor_row, self.selected())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on the table: the DataTable takes the key, the screen runs the row's action.
        if event.data_table is self._table and self.ROW_ACTION is not None:
            getattr(self, f"action_{self.ROW_ACTION}")()

    # -- the pane ------------------------------------------------------------------------

    def read_detail(self, item: Item) -> None:
        """Read `item`'s detail and show it, if the cursor is still on it then."""
        self._read(self.key(item), item)

    @work(group="pane")
    async def _read(self, key: str, item: Item) -> None:
        self._pane += 1
        pane = self._pane
        detail = await self.call(lambda: self.fetch_detail(item))
        current = self.selected()
        if detail is not None and pane == self._pane and self.selected_id() == key:
            self.show_detail(current, detail)

    # -- agents --------------------------------------------------------------------------

    def can_change_agent(self) -> bool:
        """Whether there is another agent to show."""
        return self.has_runtime and len(self.runtime.config.agents) > 1

    def action_next_agent(self) -> None:
        """Show the next agent's items."""
        names = list(self.runtime.config.agents)
        if len(names) > 1:
            at = names.index(self.agent) if self.agent in names else -1
            self.agent = names[(at + 1) % len(names)]
            self.agent_changed()
            self.reload()
