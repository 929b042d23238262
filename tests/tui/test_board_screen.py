"""The Board screen: add, assign, priority, comment, cancel and reopen on the real board
service (control.db of a test home); the layouts, the detail and the live updates over
an in-memory BoardAccess on a fixed clock (tests/fakes/board.py, for stable snapshots
and a dispatcher's moves without one running): cards by status as columns (wide) or
grouped rows (80x24), the filters,
add, assign, priority, comment, cancel, reopen, a card's detail and its attempt's session;
a card moved elsewhere shows up live (CardChanged on the bus); snapshots at 80x24 and
160x40 on deterministic cards (the fake's ids and clock are fixed).
"""

from __future__ import annotations

from typing import Any

from syrupy.assertion import SnapshotAssertion
from textual.widgets import DataTable, Input, Static

from habakkuk.screens.board import BoardScreen
from habakkuk.screens.board_card import BoardCardScreen
from habakkuk.screens.board_form import BoardForm
from habakkuk.screens.text_prompt import Confirm, TextPrompt
from habakkuk.work.board_types import BoardAccess, NewCard
from tests.fakes.board import FakeBoard
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, Running, drawn


async def seed(ui: Running, cards: bool = True) -> FakeBoard:
    """Four cards: a ready one for ops, one in progress, one waiting on a blocked
    question, one failed."""
    fake = FakeBoard(agents=tuple(ui.runtime.config.agents), publish=ui.runtime.bus.publish)
    shown: BoardAccess = fake  # what the screens read it as, checked here
    # The runtime's own is a Board; the screens reach it only as a BoardAccess.
    ui.runtime.board = fake  # type: ignore[assignment]  # stands in for the screens only
    assert ui.runtime.board is shown
    if not cards:
        return fake
    agent = next(iter(ui.runtime.config.agents))
    await fake.create(NewCard("Write the report", "Weekly report.", assignee=agent, priority=5))
    running = await fake.create(NewCard("Sync the ledger", assignee=agent))
    fake.claim(running.id)
    question = await fake.create(NewCard("Pick a vendor", assignee=agent))
    fake.claim(question.id)
    await fake.block(question.id, "Which of the two quotes?", by=agent, kind="question")
    await fake.create(NewCard("Send the invoice", assignee=agent, depends_on=(question.id,)))
    failed = await fake.create(NewCard("Renew the domain", assignee=agent, priority=-1))
    fake.claim(failed.id)
    await fake.block(failed.id, "the registrar refused", by=agent, kind="failed")
    return fake


async def open_board(ui: Running, count: int) -> BoardScreen:
    await ui.press("ctrl+d")
    await eventually(lambda: ui.app.current_mode == "board", what="the board screen")
    screen = ui.screen
    assert isinstance(screen, BoardScreen)
    await eventually(lambda: len(screen.cards) == count, what=f"{count} cards")
    return screen


async def has(board: BoardAccess, card_id: str, name: str, value: object) -> bool:
    """Whether the board (read back) has the card's `name` at `value`."""
    return bool(getattr(await board.get(card_id), name) == value)


async def count_comments(board: BoardAccess, card_id: str, count: int) -> bool:
    return len((await board.get(card_id)).comments) == count


def rows(table: DataTable[Any]) -> list[list[str]]:
    return [[str(cell) for cell in table.get_row_at(row)] for row in range(table.row_count)]


async def test_a_long_title_at_80_columns_gives_way_to_the_agent_priority_and_state(
    chat_app: ChatApp,
) -> None:
    title = "Write the quarterly report for the finance team with all of the numbers in it"
    async with chat_app(size=(80, 24)) as ui:
        fake = await seed(ui, cards=False)
        await fake.create(NewCard(title, assignee="main", priority=7))
        screen = await open_board(ui, 1)
        table = screen.query_one("#board-rows", DataTable)
        await eventually(lambda: table.row_count == 2, what="a header and the card")
        await eventually(lambda: any("ready" in line for line in drawn(table)), what="the state")
        (line,) = [line for line in drawn(table) if "Write the" in line]
        assert line.split()[-3:] == ["main", "7", "ready"] and "…" in line
        assert rows(table)[1][1] == title  # the cell keeps the whole title


async def test_grouped_rows_at_80_columns_say_who_must_act(chat_app: ChatApp) -> None:
    async with chat_app(size=(80, 24)) as ui:
        await seed(ui)
        screen = await open_board(ui, 5)
        table = screen.query_one("#board-rows", DataTable)
        await eventually(lambda: table.row_count == 8, what="three headers and five cards")
        shown = rows(table)
        assert [r[0] for r in shown if not r[1]] == ["todo (2)", "doing (1)", "blocked (2)"]
        by_title = {r[1]: r for r in shown if r[1]}
        assert by_title["Write the report"][3:] == ["5", "ready"]
        assert by_title["Sync the ledger"][4] == "attempt 1"
        assert by_title["Pick a vendor"][4] == "needs you: question"
        assert by_title["Renew the domain"][4] == "failed: reopen"
        assert by_title["Send the invoice"][4].startswith("waiting on ")
        assert by_title["Send the invoice"][4].endswith("(blocked)")
        assert not screen.query_one("#board-columns").display


async def test_columns_when_wide_and_the_status_and_agent_filters(chat_app: ChatApp) -> None:
    async with chat_app(size=(160, 40)) as ui:
        fake = await seed(ui)
        done = await fake.create(NewCard("Old task"))
        await fake.cancel(done.id)
        screen = await open_board(ui, 5)
        todo = screen.query_one("#board-col-todo", DataTable)
        await eventually(lambda: todo.row_count == 2, what="the todo column")
        assert [r[0] for r in rows(todo)] == ["Write the report", "Send the invoice"]
        assert rows(screen.query_one("#board-col-blocked", DataTable))[0][0] == "Pick a vendor"
        assert not screen.query_one("#board-col-done").display
        await ui.press("s")  # all
        await eventually(lambda: len(screen.cards) == 6, what="every card")
        done_column = screen.query_one("#board-col-done", DataTable)
        await eventually(lambda: done_column.row_count == 1, what="the cancelled card")
        assert rows(done_column)[0][3] == "cancelled"
        filters = str(screen.query_one("#board-filters", Static).render())
        assert "status: all" in filters
        await ui.press("f")  # the first configured agent
        await eventually(lambda: len(screen.cards) == 5, what="the agent's cards")
        for _ in range(len(ui.runtime.config.agents)):
            await ui.press("f")  # unassigned
        await eventually(lambda: [c.title for c in screen.cards] == ["Old task"], what="none")
        assert fake.calls["list_cards"] == screen.list_calls


async def test_add_assign_priority_comment_cancel_reopen(chat_app: ChatApp) -> None:
    async with chat_app(size=(80, 24)) as ui:
        board = ui.runtime.board  # the real service, on the test home's control.db
        agent = next(iter(ui.runtime.config.agents))
        # The new card depends on one nobody holds, so the running dispatcher never takes
        # it once it is assigned: the screen's actions are what this test watches.
        blocker = await board.create(NewCard("Agree the scope"), by="user")
        screen = await open_board(ui, 1)
        await ui.press("a")
        await eventually(lambda: isinstance(ui.screen, BoardForm), what="the form")
        form = ui.screen
        form.query_one("#card-form-depends", Input).focus()
        await ui.press("enter")
        error = form.query_one("#card-form-error", Static)
        await eventually(lambda: "title: required" in str(error.render()), what="the refusal")
        form.query_one("#card-form-title", Input).value = "Check the totals"
        form.query_one("#card-form-priority", Input).value = "2"
        form.query_one("#card-form-depends", Input).value = blocker.id
        form.query_one("#card-form-depends", Input).focus()
        await ui.press("enter")
        await eventually(lambda: len(screen.cards) == 2, what="the new card")
        (card,) = [c for c in await board.list_cards() if c.id != blocker.id]
        assert (card.title, card.priority, card.assignee) == ("Check the totals", 2, "")
        assert any("is now todo · unassigned · priority 2" in t for t in ui.toasts())
        await eventually(lambda: screen.selected_id() == card.id, what="the card highlighted")

        await ui.press("g")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="assign prompt")
        ui.screen.query_one("#answer", Input).value = "nobody"
        await ui.press("enter")
        await eventually(lambda: any("nobody" in t for t in ui.toasts()), what="refusal")
        await ui.press("g")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="assign prompt")
        ui.screen.query_one("#answer", Input).value = agent
        await ui.press("enter")
        await eventually(lambda: has(board, card.id, "assignee", agent), what="assigned")
        await eventually(lambda: any(f"is now todo · {agent}" in t for t in ui.toasts()), what="")

        await ui.press("p")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="priority prompt")
        prompt = ui.screen
        prompt.query_one("#answer", Input).value = "500"
        await ui.press("enter")
        assert isinstance(ui.screen, TextPrompt)  # out of range: the prompt says so and stays
        prompt.query_one("#answer", Input).value = "9"
        await ui.press("enter")
        await eventually(lambda: has(board, card.id, "priority", 9), what="priority 9")

        await ui.press("c")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="comment prompt")
        ui.screen.query_one("#answer", Input).value = "Use the March figures."
        await ui.press("enter")
        await eventually(lambda: count_comments(board, card.id, 1), what="the comment")

        await ui.press("x")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("n")
        assert (await board.get(card.id)).status == "todo"
        await ui.press("x")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("y")
        await eventually(lambda: has(board, card.id, "status", "cancelled"), what="cancelled")
        await eventually(
            lambda: [c.id for c in screen.cards] == [blocker.id], what="gone from the open cards"
        )
        await ui.press("s")  # all
        await eventually(lambda: len(screen.cards) == 2, what="the cancelled card listed")
        table = screen.query_one("#board-rows", DataTable)
        await eventually(lambda: table.row_count == 4, what="two cards under their headers")
        table.move_cursor(row=[r[1] for r in rows(table)].index("Check the totals"))
        await eventually(lambda: screen.selected_id() == card.id, what="highlighted")
        await ui.press("r")
        await eventually(lambda: has(board, card.id, "status", "todo"), what="reopened")
        await eventually(lambda: any("is now todo" in t for t in ui.toasts()), what="notice")


async def test_a_cards_detail_and_its_attempts_session(chat_app: ChatApp) -> None:
    async with chat_app(size=(80, 24)) as ui:
        fake = await seed(ui)
        screen = await open_board(ui, 5)
        vendor = next(c for c in fake.items.values() if c.title == "Pick a vendor")
        table = screen.query_one("#board-rows", DataTable)
        await eventually(lambda: table.row_count == 8, what="the rows")
        table.move_cursor(row=[r[1] for r in rows(table)].index("Send the invoice"))
        await ui.press("enter")
        await eventually(lambda: isinstance(ui.screen, BoardCardScreen), what="the detail")
        detail = ui.screen
        assert isinstance(detail, BoardCardScreen)
        text = detail.query_one("#card-detail", Static)
        await eventually(lambda: detail.card is not None, what="the card read")
        assert f"waiting on {vendor.id} (blocked)" in str(text.render())
        await ui.press("escape")
        await eventually(lambda: ui.screen is screen, what="back on the board")

        table.move_cursor(row=[r[1] for r in rows(table)].index("Pick a vendor"))
        await ui.press("enter")
        await eventually(lambda: isinstance(ui.screen, BoardCardScreen), what="the detail")
        blocked = ui.screen
        assert isinstance(blocked, BoardCardScreen)
        await eventually(lambda: blocked.card is not None, what="the card read")
        shown = str(blocked.query_one("#card-detail", Static).render())
        assert "Blocked on a question: you must act" in shown
        assert "Which of the two quotes?" in shown and f"ses_{vendor.id}_a1" in shown
        await ui.press("c")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="comment prompt")
        ui.screen.query_one("#answer", Input).value = "The cheaper one."
        await ui.press("enter")
        await eventually(
            lambda: "The cheaper one." in str(blocked.query_one("#card-detail", Static).render()),
            what="the comment in the detail",
        )
        await ui.press("r")
        await eventually(lambda: fake.items[vendor.id].status == "todo", what="reopened")
        await eventually(
            lambda: blocked.card is not None and blocked.card.status == "todo", what="reopened"
        )
        # The attempt's session, as the card job would have made it.
        attempt = f"ses_{vendor.id}_a1"
        await ui.runtime.sessions.new_session(None, origin="board", session_id=attempt)
        await ui.press("o")
        await eventually(lambda: ui.app.current_mode == "chat", what="the chat")
        await eventually(lambda: ui.chat.session_id == attempt, what="the attempt's session")


async def test_a_card_moved_elsewhere_updates_the_screen(chat_app: ChatApp) -> None:
    async with chat_app(size=(80, 24)) as ui:
        fake = await seed(ui)
        screen = await open_board(ui, 5)
        ready = next(c for c in fake.items.values() if c.title == "Write the report")
        fake.claim(ready.id)  # the dispatcher, which publishes CardChanged
        await eventually(
            lambda: any(c.id == ready.id and c.status == "doing" for c in screen.cards),
            what="the card in progress",
        )
        table = screen.query_one("#board-rows", DataTable)
        await eventually(
            lambda: [r[0] for r in rows(table) if r[0].startswith("doing")] == ["doing (2)"],
            what="two cards in progress",
        )
        titles = [c.title for c in screen.cards]
        assert "Write the report" in titles
        palette = [c.title for c in ui.app.get_system_commands(screen)]
        for title in ("Go: board", "Board: add card", "Board: filter by status",
                      "Board: assign card", "Board: reopen card"):  # fmt: skip
            assert title in palette


async def test_board_screen_snapshot_80x24(
    chat_app: ChatApp, svg_snapshot: SnapshotAssertion
) -> None:
    """Update with `pytest tests/tui/test_board_screen.py -k snapshot --snapshot-update`."""
    async with chat_app(size=(80, 24)) as ui:
        await seed(ui)
        screen = await open_board(ui, 5)
        table = screen.query_one("#board-rows", DataTable)
        await eventually(lambda: table.row_count == 8, what="the rows")
        await ui.pilot.pause()
        await ui.pilot.wait_for_scheduled_animations()
        await ui.pilot.pause()
        assert svg_snapshot == ui.app.export_screenshot()


async def test_board_screen_snapshot_160x40(
    chat_app: ChatApp, svg_snapshot: SnapshotAssertion
) -> None:
    async with chat_app(size=(160, 40)) as ui:
        await seed(ui)
        screen = await open_board(ui, 5)
        blocked = screen.query_one("#board-col-blocked", DataTable)
        await eventually(lambda: blocked.row_count == 2, what="the columns")
        await ui.pilot.pause()
        await ui.pilot.wait_for_scheduled_animations()
        await ui.pilot.pause()
        assert svg_snapshot == ui.app.export_screenshot()
