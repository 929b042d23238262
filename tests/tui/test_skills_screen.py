"""The Skills screen on the real runtime and skills service: the list with source, trust,
scan verdict and last use; view, approve, remove (after a yes) and restore by key; the
palette's entries; a snapshot.

Skills are made as a user or an install makes them (a folder under HOME/skills, with a
lock entry for an install; a folder under agents/main/skills for the agent's own).
"""

from __future__ import annotations

import re
from pathlib import Path

from syrupy.assertion import SnapshotAssertion
from textual.widgets import DataTable, Input, Markdown

from habakkuk.knowledge.hub.lock import read_lock
from habakkuk.screens.skills import SkillsScreen
from habakkuk.screens.skills_viewer import ApproveDangerous, SkillViewer
from habakkuk.screens.text_prompt import Confirm, TextPrompt
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.knowledge.skills.conftest import DANGEROUS_FINDINGS, install
from tests.server.test_skills_api import make_skill
from tests.tui.conftest import ChatApp, Running, Seen, drawn, make_app, ready

AGENT = "main"
# The line at column 0 keeps mock_config's dedent from lifting `ops` to the top level.
TWO_AGENTS = "  ops:\n    model: mock/scripted\n    mode: full\ntimezone: UTC\n"


def shared_dir(ui: Running) -> Path:
    return ui.app.home.root / "skills"


async def seed(ui: Running) -> None:
    """A hand-made shared skill, an unapproved install and one of the agent's own."""
    shared = shared_dir(ui)
    make_skill(
        shared,
        "weekly-report",
        "Write the weekly report from the board.",
        "1. Read the **board**.\n2. Write the report.",
        {"template.md": "# Week\n"},
    )
    make_skill(
        shared,
        "pdf-tools",
        "Split and merge PDF files.",
        "Run `scripts/split.sh FILE`.",
        {"scripts/split.sh": 'qpdf --split-pages "$1"\n'},
    )
    install(ui.app.home, "pdf-tools", verdict="caution")
    own = ui.app.home.agent_dir(AGENT) / "skills"
    make_skill(own, "groceries", "Plan the groceries for the week.", "Check the fridge first.")


async def open_skills(ui: Running, rows: int) -> SkillsScreen:
    """Go to the Skills screen with its key and wait for `rows` skills listed and shown."""
    await ui.press("ctrl+f")
    await eventually(lambda: ui.app.current_mode == "skills", what="the skills screen")
    screen = ui.screen
    assert isinstance(screen, SkillsScreen)
    await eventually(lambda: len(screen.skills) == rows, what=f"{rows} skills listed")
    await eventually(lambda: screen.skill is not None or rows == 0, what="a skill shown")
    return screen


def listed(screen: SkillsScreen) -> list[str]:
    return [skill.name for skill in screen.skills]


def rows(screen: SkillsScreen) -> list[list[str]]:
    table = screen.query_one("#skill-table", DataTable)
    return [[str(cell) for cell in table.get_row_at(row)] for row in range(table.row_count)]


async def highlight(ui: Running, screen: SkillsScreen, name: str) -> None:
    """Move the cursor to `name` and wait until the pane shows it."""
    table = screen.query_one("#skill-table", DataTable)
    table.move_cursor(row=listed(screen).index(name))
    await eventually(
        lambda: screen.skill is not None and screen.skill.name == name, what=f"{name} shown"
    )


async def test_each_skill_is_listed_with_its_source_trust_verdict_and_last_use(
    chat_app: ChatApp,
) -> None:
    async with chat_app(size=(120, 30)) as ui:  # every column fits (80: see the next test)
        await seed(ui)
        await ui.runtime.skills.skill(AGENT, "weekly-report", record_use=True)
        screen = await open_skills(ui, 3)
        assert listed(screen) == ["groceries", "pdf-tools", "weekly-report"]
        table = {row[0]: row[1:] for row in rows(screen)}
        # trust, scan, last used, source
        assert table["pdf-tools"] == [
            "untrusted", "caution", "never", "github:acme/skills/pdf-tools@main",
        ]  # fmt: skip
        assert table["groceries"][0] == "trusted" and table["groceries"][2:] == ["never", "own"]
        assert table["weekly-report"][0] == "trusted" and table["weekly-report"][3] == "hand"
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", table["weekly-report"][2])  # used
        preview = screen.query_one("#skill-preview", Markdown)
        await eventually(lambda: "Check the fridge" in preview.source, what="the preview")


async def test_at_80_columns_the_list_keeps_trust_and_scan_and_the_pane_says_the_rest(
    chat_app: ChatApp,
) -> None:
    async with chat_app(size=(80, 24)) as ui:
        await seed(ui)
        await ui.runtime.skills.skill(AGENT, "weekly-report", record_use=True)
        screen = await open_skills(ui, 3)
        table = screen.query_one("#skill-table", DataTable)
        await eventually(lambda: drawn(table)[0].split() == ["skill", "trust", "scan"], what="")
        assert drawn(table)[2].split() == ["pdf-tools", "untrusted", "caution"]
        await highlight(ui, screen, "pdf-tools")
        meta = str(screen.query_one("#skill-meta").render())
        assert "github:acme/skills/pdf-tools@main · last used never" in meta.replace("\n", " ")


async def test_view_shows_the_body_and_files_in_a_viewer(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        await highlight(ui, screen, "pdf-tools")
        await ui.press("v")
        await eventually(lambda: isinstance(ui.screen, SkillViewer), what="the viewer")
        viewer = ui.screen
        body = viewer.query_one("#skill-viewer-body", Markdown).source
        assert "Run `scripts/split.sh FILE`." in body and "`scripts/split.sh`" in body
        caution = viewer.query_one("#skill-viewer-caution")
        assert caution.display and "has not been approved" in str(caution.render())
        await ui.press("escape")
        await eventually(lambda: ui.screen is screen, what="back on the list")
        await highlight(ui, screen, "weekly-report")
        await ui.press("enter")
        await eventually(lambda: isinstance(ui.screen, SkillViewer), what="the viewer again")
        viewer = ui.screen
        assert "`template.md`" in viewer.query_one("#skill-viewer-body", Markdown).source
        assert not viewer.query_one("#skill-viewer-caution").display


async def test_approve_trusts_the_installed_skill(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        await highlight(ui, screen, "groceries")
        assert not screen.check_action("approve", ())  # trusted already: no key
        await highlight(ui, screen, "pdf-tools")
        assert screen.query_one("#skill-caution").display
        await ui.press("a")
        await eventually(
            lambda: rows(screen)[1][1] == "trusted", what="the list showing it trusted"
        )
        assert (await ui.runtime.skills.skill(AGENT, "pdf-tools")).summary.trusted
        entries, _ = read_lock(shared_dir(ui))
        assert entries["pdf-tools"].approved is True


async def test_a_dangerous_skill_shows_its_findings_and_approving_needs_a_second_a(
    chat_app: ChatApp,
) -> None:
    async with chat_app() as ui:
        await seed(ui)
        make_skill(shared_dir(ui), "setup-helper", "Set the machine up.", "Run setup.sh.")
        install(ui.app.home, "setup-helper", verdict="dangerous", findings=DANGEROUS_FINDINGS)
        screen = await open_skills(ui, 4)
        await highlight(ui, screen, "setup-helper")
        reasons = [
            "scripts/setup.sh:2: a download is piped into a shell",
            "SKILL.md:4: fetches a URL",
        ]
        # The pane says why, not just "dangerous".
        shown = str(screen.query_one("#skill-findings").render())
        assert all(reason in shown for reason in reasons)
        assert "a again approves it" in str(screen.query_one("#skill-caution").render())

        await ui.press("a")  # shows every finding and asks
        await eventually(lambda: isinstance(ui.screen, ApproveDangerous), what="the question")
        asked = str(ui.screen.query_one("#approve-findings").render())
        assert all(reason in asked for reason in reasons)
        await ui.press("enter")  # not an answer
        await ui.press("escape")  # keeps it untrusted
        await eventually(lambda: ui.screen is screen, what="back on the list")
        assert not (await ui.runtime.skills.skill(AGENT, "setup-helper")).summary.trusted
        assert read_lock(shared_dir(ui))[0]["setup-helper"].approved is False

        await ui.press("a")
        await eventually(lambda: isinstance(ui.screen, ApproveDangerous), what="asked again")
        await ui.press("a")  # the second keypress approves
        await eventually(
            lambda: rows(screen)[listed(screen).index("setup-helper")][1] == "trusted",
            what="the list showing it trusted",
        )
        assert read_lock(shared_dir(ui))[0]["setup-helper"].approved is True

        await ui.press("v")  # the viewer shows the findings too
        await eventually(lambda: isinstance(ui.screen, SkillViewer), what="the viewer")
        viewed = str(ui.screen.query_one("#skill-viewer-findings").render())
        assert all(reason in viewed for reason in reasons)


async def test_remove_asks_first_and_restore_puts_the_skill_back(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        await highlight(ui, screen, "weekly-report")
        folder = shared_dir(ui) / "weekly-report"
        await ui.press("d")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("n")
        await eventually(lambda: ui.screen is screen, what="back on the list")
        assert folder.exists()
        await ui.press("d")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question again")
        await ui.press("y")
        await eventually(lambda: listed(screen) == ["groceries", "pdf-tools"], what="it gone")
        assert not folder.exists()
        assert [s.name for s in await ui.runtime.skills.list_skills(AGENT)] == [
            "groceries", "pdf-tools",
        ]  # fmt: skip

        await ui.press("r")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="which to restore")
        assert ui.screen.query_one("#answer", Input).value == "weekly-report"
        await ui.press("enter")
        await eventually(lambda: "weekly-report" in listed(screen), what="it back")
        assert (folder / "template.md").read_text(encoding="utf-8") == "# Week\n"


async def test_removing_the_last_skill_shows_the_empty_state_clear_of_its_toast(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    # Toasts are drawn (run_test leaves them out unless asked).
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        ui = Running(app, pilot, Seen())
        make_skill(shared_dir(ui), "weekly-report", "Write the weekly report.", "Read the board.")
        screen = await open_skills(ui, 1)
        await ui.press("d")
        await eventually(lambda: isinstance(ui.screen, Confirm), what="the question")
        await ui.press("y")
        await eventually(lambda: listed(screen) == [], what="the skill gone")
        empty = screen.query_one(".empty")
        await eventually(lambda: empty.display and empty.region.height > 0, what="the empty state")
        await eventually(lambda: screen.query("Toast"), what="the removal's toast")
        await pilot.pause()
        toasts = list(screen.query("Toast"))
        assert any("Removed weekly-report" in str(t.render()) for t in toasts)
        for toast in toasts:
            assert not toast.region.overlaps(empty.region), (toast.region, empty.region)
        assert "No skills yet" in str(empty.render())


async def test_a_refusal_of_the_service_is_a_notice(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        await ui.press("r")
        await eventually(lambda: isinstance(ui.screen, TextPrompt), what="which to restore")
        prompt = ui.screen
        prompt.query_one("#answer", Input).value = "../etc"
        await ui.press("enter")
        await eventually(
            lambda: "not a skill name" in str(prompt.query_one(".error").render()),
            what="the name refused inline",
        )
        prompt.query_one("#answer", Input).value = "never-was"
        await ui.press("enter")
        await eventually(lambda: ui.screen is screen, what="back on the list")
        await eventually(
            lambda: any("never-was" in toast for toast in ui.toasts()), what="the notice"
        )
        assert listed(screen) == ["groceries", "pdf-tools", "weekly-report"]


async def test_n_shows_the_next_agents_skills_without_mains_own(chat_app: ChatApp) -> None:
    async with chat_app(extra=TWO_AGENTS) as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        await ui.press("n")
        await eventually(lambda: screen.agent == "ops", what="the next agent")
        await eventually(lambda: listed(screen) == ["pdf-tools", "weekly-report"], what="ops'")
        await ui.press("n")
        await eventually(lambda: len(listed(screen)) == 3, what="main's again")


async def test_markup_in_a_skill_is_shown_as_written(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        make_skill(shared_dir(ui), "odd", "Looks [bold red]loud[/] and [link=x]linked[/].", "Hi.")
        screen = await open_skills(ui, 1)
        meta = screen.query_one("#skill-meta")
        await eventually(lambda: "[bold red]loud[/]" in str(meta.render()), what="the text")
        assert rows(screen)[0][0] == "odd"


async def test_skills_have_a_key_and_palette_entries(chat_app: ChatApp) -> None:
    async with chat_app() as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        titles = [c.title for c in ui.app.get_system_commands(screen)]
        for title in ("Go: skills", "Skills: view skill", "Skills: approve skill",
                      "Skills: remove skill", "Skills: restore skill"):  # fmt: skip
            assert title in titles
        await ui.press("escape")
        await eventually(lambda: ui.app.current_mode == "chat", what="back to the chat")


async def test_skills_screen_snapshot(chat_app: ChatApp, svg_snapshot: SnapshotAssertion) -> None:
    """The screen on a deterministic home: a hand-made skill, an unapproved install with
    the caution verdict and one of the agent's own, none used yet.

    Update with `pytest tests/tui/test_skills_screen.py -k snapshot --snapshot-update`.
    """
    async with chat_app(size=(100, 30)) as ui:
        await seed(ui)
        screen = await open_skills(ui, 3)
        preview = screen.query_one("#skill-preview", Markdown)
        await eventually(lambda: "Check the fridge" in preview.source, what="the first shown")
        await ui.pilot.pause()
        await ui.pilot.wait_for_scheduled_animations()
        await ui.pilot.pause()
        assert svg_snapshot == ui.app.export_screenshot()
