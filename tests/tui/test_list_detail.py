"""A section screen built on ListDetailScreen is its declarations alone: its columns, its
row source, its detail and its actions. The base lists the rows (a screenful first, the
rest after), follows the cursor with the detail, keeps the cursor on its item when the
list is read again, says what an empty list means, turns a refusal of the service into a
notice and lists the actions in the palette with the keys their bindings give them."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from habakkuk.engine.errors import HabakkukError
from habakkuk.screens.list_detail import ListDetailScreen, Listing, PaletteEntry
from habakkuk.widgets.fit_table import Cell
from tests.helpers import eventually


class FruitScreen(ListDetailScreen[str, str]):
    """The whole of a new list screen: a few declarations."""

    BINDINGS: ClassVar[list[Any]] = [
        Binding("x", "eat", "Eat", id="fruit.eat"),
        Binding("escape", "back", "Back", id="fruit.back", show=False),
    ]
    SECTION = "Fruit"
    PALETTE = (PaletteEntry("eat", "eat fruit", "Eat the fruit", ("enter",)),)
    ITEM = "fruit"
    COLUMNS = ("name", "colour")
    ROW_ACTION = "eat"
    FIRST_PAGE = 2

    def __init__(self, basket: list[str]) -> None:
        super().__init__(id="fruits", title="Fruit")
        self.basket = basket
        self.eaten: list[str] = []
        self.refuse = False
        self._about = Static("", id="fruit-about")

    async def listing(self) -> Listing[str]:
        async def read() -> list[str]:
            if self.refuse:
                raise HabakkukError("the basket is locked")
            return list(self.basket)

        fruit = await self.call(read) or []
        return Listing(fruit, f"Fruit · {len(fruit)}", "No fruit. Buy some.")

    def key(self, item: str) -> str:
        return item

    def cells(self, item: str) -> list[Cell]:
        return [item, "green" if item == "lime" else "red"]

    async def fetch_detail(self, item: str) -> str:
        return f"{item}: ripe"

    def show_detail(self, item: str | None, detail: str | None) -> None:
        self._about.update(detail or "")

    def compose_pane(self) -> ComposeResult:
        yield self._about

    def action_eat(self) -> None:
        """Eat the highlighted fruit."""
        fruit = self.selected()
        if fruit is not None:
            self.eaten.append(fruit)


class Host(App[None]):
    """The little of the app a section screen uses (habakkuk.screens.base.ScreenHost)."""

    def __init__(self, screen: FruitScreen) -> None:
        super().__init__()
        self.runtime: Any = object()  # open: the screen loads at once
        self.motion = False
        self.gone_to = ""
        self.notices: list[str] = []
        self.fruit = screen

    def on_mount(self) -> None:
        self.push_screen(self.fruit)

    def listen(self, screen: Screen[Any]) -> None:
        """Bus events are not part of this test."""

    def unlisten(self, screen: Screen[Any]) -> None:
        """Bus events are not part of this test."""

    def notify(self, message: str, **options: Any) -> None:
        self.notices.append(message)

    def action_go(self, mode: str) -> None:
        self.gone_to = mode

    def open_session(self, session_id: str) -> None:
        """No sessions here."""


def about(screen: FruitScreen) -> str:
    return str(screen.query_one("#fruit-about", Static).render())


async def test_a_list_screen_is_its_declarations() -> None:
    screen = FruitScreen(["apple", "cherry", "lime"])
    app = Host(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        table = screen.query_one("#fruit-table", DataTable)
        # A screenful first (FIRST_PAGE), then the rest; the detail follows the cursor.
        await eventually(lambda: table.row_count == 3, what="every fruit listed")
        assert screen.items == ["apple", "cherry", "lime"] and screen.total == 3
        assert str(screen.query_one(".section-title", Static).render()) == "Fruit · 3"
        await eventually(lambda: about(screen) == "apple: ripe", what="the first detail")
        await pilot.press("down")
        await eventually(lambda: about(screen) == "cherry: ripe", what="the next detail")

        # The palette entry names every key that runs the action; Enter runs the row's.
        commands = list(screen.palette_commands())
        assert [(c.title, c.help) for c in commands] == [
            ("Fruit: eat fruit", "Eat the fruit (enter, x)")
        ]
        await pilot.press("enter", "x")
        await eventually(lambda: screen.eaten == ["cherry", "cherry"], what="two eaten")

        # Read again: the cursor stays on its fruit though the rows moved.
        screen.basket.insert(0, "banana")
        screen.reload()
        await eventually(lambda: screen.items[:1] == ["banana"], what="the new list")
        await eventually(lambda: screen.selected_id() == "cherry", what="the cursor kept")

        # A refusal is a notice (the list reads as empty), and the empty line says why.
        screen.refuse = True
        screen.reload()
        await eventually(lambda: table.row_count == 0, what="the empty list")
        empty = screen.query_one(".empty", Static)
        assert empty.display and str(empty.render()) == "No fruit. Buy some."
        assert about(screen) == ""
        assert app.notices == ["the basket is locked"]

        await pilot.press("escape")
        assert app.gone_to == "chat"
