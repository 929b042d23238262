"""The Memory screen on the real runtime and memory service: search as you type, the
Markdown view, edit (in $EDITOR and inline), forget, trust, the profile, history with
restore, the review's proposals; refusals are notices.

Notes are seeded through the service (`runtime.memory`), except in the test of a hand edit.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from textual.widgets import DataTable, Markdown

from habakkuk.knowledge.memory_types import ProposalCreated, Provenance
from habakkuk.screens.memory import MemoryScreen
from habakkuk.screens.memory_history import HistoryScreen, ProposalsScreen
from habakkuk.screens.text_prompt import Confirm
from tests.helpers import eventually
from tests.tui.conftest import ChatApp, Running, drawn

AGENT = "main"
BY_AGENT = Provenance(by="agent", session="ses_test", tool="memory_save")
BY_USER = Provenance(by="user")
TAINTED = Provenance(by="agent", session="ses_test", tool="memory_save", tainted=True)


async def seed(ui: Running, *notes: tuple[str, str, list[str]], tainted: bool = False) -> None:
    """Save notes through the service (title, body, tags)."""
    for title, body, tags in notes:
        await ui.runtime.memory.save(
            AGENT, title, body, tags=tags, provenance=TAINTED if tainted else BY_AGENT
        )


async def open_memory(ui: Running, rows: int) -> MemoryScreen:
    """Go to the Memory screen with its key and wait for `rows` notes listed."""
    await ui.press("ctrl+l")
    await eventually(lambda: ui.app.current_mode == "memory", what="the memory screen")
    screen = ui.screen
    assert isinstance(screen, MemoryScreen)
    await eventually(lambda: len(screen.notes) == rows, what=f"{rows} notes listed")
    await eventually(lambda: screen.note is not None or rows == 0, what="a note shown")
    return screen


def listed(screen: MemoryScreen) -> list[str]:
    return [note.slug for note in screen.notes]


def shown(screen: MemoryScreen) -> str:
    return screen.query_one("#note-view", Markdown).source


def cells(screen: MemoryScreen) -> list[str]:
    table = screen.query_one("#note-table", DataTable)
    return [str(table.get_row_at(row)[0]) for row in range(table.row_count)]


def note_file(ui: Running, slug: str) -> Path:
    return ui.app.home.agent_dir(AGENT) / "memory" / f"{slug}.md"


COFFEE = ("Coffee preference", "Flat white with **oat milk**, no sugar.", ["food"])
TRIP = ("Road trip", "Drive along the coast in May.", ["travel"])
TAXES = ("Tax return", "Receipts go in the blue folder.", ["admin"])


async def test_typing_a_query_lists_only_the_matching_notes(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE, TRIP, TAXES)
        screen = await open_memory(ui, 3)
        assert listed(screen)[0] == "tax-return"  # newest first
        await ui.press("slash", *"oat")
        await eventually(lambda: listed(screen) == ["coffee-preference"], what="the one match")
        # The match is shown as Markdown, its body as written.
        await eventually(lambda: "**oat milk**" in shown(screen), what="the note shown")
        await ui.press("backspace", "backspace", "backspace", *"#travel")
        await eventually(lambda: listed(screen) == ["road-trip"], what="the tag filter")
        await ui.press("escape")
        await eventually(lambda: len(listed(screen)) == 3, what="every note again")
        assert screen.query_text == ""


async def test_untrusted_notes_are_marked_and_trust_vouches_for_them(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        await seed(ui, ("Shady tip", "A page said to buy more coffee.", []), tainted=True)
        screen = await open_memory(ui, 2)
        assert cells(screen)[0].startswith("(untrusted) Shady tip")
        assert not cells(screen)[1].startswith("(untrusted)")
        await eventually(lambda: screen.query_one("#note-warning").display, what="the warning")
        await ui.press("t")
        await eventually(
            lambda: not cells(screen)[0].startswith("(untrusted)"), what="the mark gone"
        )
        assert (await ui.runtime.memory.read(AGENT, "shady-tip")).trust == "trusted"
        assert "trust: trusted" in note_file(ui, "shady-tip").read_text(encoding="utf-8")


async def test_forget_asks_first_then_moves_the_file_to_the_trash(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE, TRIP)
        screen = await open_memory(ui, 2)
        assert screen.note is not None and screen.note.slug == "road-trip"
        await ui.press("x")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("n")
        await eventually(lambda: ui.screen is screen, what="back on the list")
        assert note_file(ui, "road-trip").exists()
        await ui.press("x")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question again")
        await ui.press("y")
        await eventually(lambda: listed(screen) == ["coffee-preference"], what="the note gone")
        assert not note_file(ui, "road-trip").exists()
        trash = ui.app.home.agent_dir(AGENT) / "memory" / ".trash"
        assert any(path.name.startswith("road-trip") for path in trash.iterdir())


async def test_restore_in_the_history_brings_the_old_content_back(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        await ui.runtime.memory.save(
            AGENT, "Coffee preference", "Espresso, black.", provenance=BY_AGENT
        )
        screen = await open_memory(ui, 1)
        await eventually(lambda: "Espresso" in shown(screen), what="the new version")
        await ui.press("h")
        await eventually(lambda: isinstance(ui.screen, HistoryScreen), what="the history")
        history = ui.screen
        assert isinstance(history, HistoryScreen)
        await eventually(lambda: len(history.changes) == 2, what="two changes")
        assert [c.op for c in history.changes] == ["updated", "created"]
        diff = history.query_one("#change-diff")
        await eventually(lambda: "Espresso" in str(diff.render()), what="the diff")
        await ui.press("b")  # the content before the update
        await eventually(lambda: len(history.changes) == 3, what="the restore recorded")
        assert history.changes[0].by == "user" and history.changes[0].restores
        note = await ui.runtime.memory.read(AGENT, "coffee-preference")
        assert note.body.strip() == COFFEE[1]
        await ui.press("escape")
        await eventually(lambda: "oat milk" in shown(screen), what="the restored note shown")


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$EDITOR is a script that appends a line to the file it is given."""
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys\n"
        "with open(sys.argv[1], 'a', encoding='utf-8') as f:\n"
        "    f.write('\\nAdded in the editor.\\n')\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    return script


async def test_an_edit_in_the_editor_is_saved_as_the_users(chat_app: ChatApp, editor: Path) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        screen = await open_memory(ui, 1)
        await ui.press("e")
        await eventually(lambda: "Added in the editor." in shown(screen), what="the edit shown")
        note = await ui.runtime.memory.read(AGENT, "coffee-preference")
        assert "Added in the editor." in note.body and "oat milk" in note.body
        assert "Added in the editor." in note_file(ui, "coffee-preference").read_text("utf-8")
        changes = await ui.runtime.memory.history(AGENT, name="coffee-preference")
        assert changes[0].by == "user" and changes[0].op == "updated"
        # The next search finds the edit.
        await ui.press("slash", *"editor")
        await eventually(lambda: listed(screen) == ["coffee-preference"], what="the edit found")


async def test_an_editor_that_changes_nothing_saves_nothing(
    chat_app: ChatApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "true")
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        screen = await open_memory(ui, 1)
        before = note_file(ui, "coffee-preference").read_text("utf-8")
        await ui.press("e")
        await eventually(lambda: any("nothing saved" in t for t in ui.toasts()), what="the notice")
        assert note_file(ui, "coffee-preference").read_text("utf-8") == before
        assert len(await ui.runtime.memory.history(AGENT, name="coffee-preference")) == 1
        assert screen.note is not None


async def test_inline_edit_saves_on_f2_and_esc_cancels(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        screen = await open_memory(ui, 1)
        await ui.press("i")
        await eventually(lambda: screen.editing, what="the editor")
        await ui.press(*"Cancelled ", "escape")
        await eventually(lambda: not screen.editing, what="the edit cancelled")
        assert "Cancelled" not in note_file(ui, "coffee-preference").read_text("utf-8")
        await ui.press("i")
        await eventually(lambda: screen.editing, what="the editor again")
        await ui.press(*"Decaf after noon. ", "f2")
        await eventually(lambda: "Decaf after noon." in shown(screen), what="the saved edit")
        note = await ui.runtime.memory.read(AGENT, "coffee-preference")
        assert note.body.startswith("Decaf after noon. Flat white")


async def test_a_secret_typed_into_a_note_is_refused_with_a_notice(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        screen = await open_memory(ui, 1)
        before = note_file(ui, "coffee-preference").read_text("utf-8")
        await ui.press("i")
        await eventually(lambda: screen.editing, what="the editor")
        await ui.press(*"key AKIAIOSFODNN7EXAMPLE ", "f2")
        await eventually(lambda: any("memory" in t for t in ui.toasts()), what="the refusal")
        assert note_file(ui, "coffee-preference").read_text("utf-8") == before
        assert ui.app.current_mode == "memory" and not screen.editing


async def test_a_hand_edit_is_listed_and_its_history_says_hand(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        path = note_file(ui, "coffee-preference")
        text = path.read_text("utf-8")
        path.write_text(text + "\nEdited by hand.\n", encoding="utf-8")
        screen = await open_memory(ui, 1)
        await eventually(lambda: "Edited by hand." in shown(screen), what="the hand edit")
        await ui.press("h")
        await eventually(lambda: isinstance(ui.screen, HistoryScreen), what="the history")
        history = ui.screen
        assert isinstance(history, HistoryScreen)
        await eventually(lambda: len(history.changes) == 2, what="the hand edit recorded")
        assert history.changes[0].by == "hand"


async def test_the_profile_view_shows_user_md(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await ui.runtime.memory.update_profile(
            AGENT, "Food", "Vegetarian since 2019.", provenance=BY_USER
        )
        screen = await open_memory(ui, 0)
        await ui.press("u")
        await eventually(lambda: "Vegetarian since 2019." in shown(screen), what="USER.md")
        assert screen.showing_profile


async def test_proposals_of_the_review_are_applied_or_dismissed(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE, TRIP)
        review = Provenance(by="review", session="ses_test")
        for slug in ("coffee-preference", "road-trip"):
            with pytest.raises(ProposalCreated):
                await ui.runtime.memory.forget(AGENT, slug, provenance=review)
        screen = await open_memory(ui, 2)
        await ui.press("p")
        await eventually(lambda: isinstance(ui.screen, ProposalsScreen), what="the proposals")
        proposals = ui.screen
        assert isinstance(proposals, ProposalsScreen)
        await eventually(lambda: len(proposals.rows) == 2, what="two proposals")
        first = proposals.rows[0].name
        await ui.press("n")  # dismiss the first: nothing changes
        await eventually(lambda: len(proposals.rows) == 1, what="one left")
        assert note_file(ui, first).exists()
        second = proposals.rows[0].name
        await ui.press("y")  # apply the second: the note is forgotten
        await eventually(lambda: not proposals.rows, what="none left")
        assert not note_file(ui, second).exists()
        await ui.press("escape")
        await eventually(lambda: listed(screen) == [first], what="the list without it")


async def test_the_list_reads_one_page_at_a_time(
    chat_app: ChatApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    import habakkuk.screens.memory as memory_screen

    monkeypatch.setattr(memory_screen, "PAGE", 10)
    monkeypatch.setattr(memory_screen, "NEXT_PAGE_AHEAD", 3)
    async with chat_app() as ui:
        await seed(ui, *[(f"Note {n:02d}", f"Body {n}.", []) for n in range(25)])
        screen = await open_memory(ui, 10)
        assert screen.total == 25
        table = screen.query_one("#note-table", DataTable)
        await ui.press("ctrl+end")
        await eventually(lambda: len(screen.notes) == 20, what="the second page")
        await ui.press("ctrl+end")
        await eventually(lambda: len(screen.notes) == 25, what="the last page")
        assert table.row_count == 25
        assert listed(screen) == [f"note-{n:02d}" for n in range(24, -1, -1)]


async def test_at_80_columns_a_long_title_gives_way_to_the_whole_date(
    chat_app: ChatApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    import habakkuk.knowledge.note_store as note_store

    monkeypatch.setattr(note_store, "now", lambda: "2026-11-06T09:41:00Z")
    long_title = "The user prefers short answers in the morning meetings with the team"
    async with chat_app(size=(80, 24)) as ui:
        await seed(ui, (long_title, "Keep it short.", ["prefs", "style", "meetings"]))
        screen = await open_memory(ui, 1)
        title = str(screen.query_one(".section-title").render())
        assert title.endswith("· 1 note"), title  # not "1 notes"
        table = screen.query_one("#note-table", DataTable)
        await eventually(
            lambda: any("2026-11-06 09:41" in line for line in drawn(table)),
            what=f"the whole date drawn, not {drawn(table)}",
        )
        (row,) = [line for line in drawn(table) if "2026-11-06 09:41" in line]
        assert row.startswith(" The user prefers") and "…" in row
        assert cells(screen) == [long_title]  # the cell keeps the whole title


async def test_memory_has_a_key_and_palette_entries(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui, COFFEE)
        screen = await open_memory(ui, 1)
        titles = [c.title for c in ui.app.get_system_commands(screen)]
        for title in ("Go: memory", "Memory: forget note", "Memory: history", "Memory: trust note"):
            assert title in titles


async def test_memory_screen_snapshot(
    chat_app: ChatApp, svg_snapshot: SnapshotAssertion, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The screen on a deterministic home: notes saved at fixed times, one untrusted.

    Update with `pytest tests/tui/test_memory_screen.py -k snapshot --snapshot-update`.
    """
    import habakkuk.knowledge.note_store as note_store

    minutes = iter(range(60))
    monkeypatch.setattr(note_store, "now", lambda: f"2026-11-06T09:{next(minutes):02d}:00Z")
    async with chat_app(size=(100, 30)) as ui:
        await seed(ui, COFFEE, TRIP)
        await seed(ui, ("Shady tip", "A page said to buy **more** coffee.", ["web"]), tainted=True)
        await seed(ui, TAXES)
        screen = await open_memory(ui, 4)
        await eventually(lambda: "blue folder" in shown(screen), what="the newest note shown")
        await ui.pilot.pause()
        await ui.pilot.wait_for_scheduled_animations()
        await ui.pilot.pause()
        assert svg_snapshot == ui.app.export_screenshot()
