"""At 80x24 the chat's footer and slash-command hint fit: whole keys by priority, a hint
that wraps, nothing cut off at the edge."""

from __future__ import annotations

from typing import Any

from textual.widgets import Footer, Static

from habakkuk.conversation.commands import summaries
from habakkuk.screens.chat import HINT_LINES, completion_hint
from habakkuk.widgets.approval_prompt import ApprovalPrompt
from habakkuk.widgets.footer import KeyFooter
from tests.conftest import WriteConfig, mock_config
from tests.helpers import eventually
from tests.tui.conftest import make_app, ready, send

EXEC = """
- tool_calls:
    - name: exec
      arguments: {command: "echo hi"}
- text: "ran it"
"""


def footer_keys(app: Any) -> list[tuple[str, str, int, int]]:
    """(key, description, first column, last column) of every key the footer shows."""
    footer = app.screen.query_one(Footer)
    return [
        (key.key, key.description, key.region.x, key.region.right)
        for key in footer.children
        if key.display and key.region.width
    ]


async def test_the_footer_shows_whole_keys_by_priority_at_80_columns(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config(EXEC, mode="ask"))
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "run it")
        prompt = app.screen.query_one(ApprovalPrompt)
        await eventually(lambda: prompt.current is not None, what="the approval prompt")
        await eventually(
            lambda: any(k[0] == "y" for k in footer_keys(app)), what="the approval keys"
        )
        await pilot.pause()
        keys = footer_keys(app)
        # The focused prompt's keys come first, the palette key is always there, and every
        # key shown ends inside the screen (none is cut at the edge).
        assert [k[0] for k in keys[:4]] == ["y", "a", "n", "escape"]
        assert keys[-1][0] == "ctrl+p"
        assert all(right <= 80 for *_, right in keys)
        starts = [x for _, _, x, _ in keys[:-1]]
        assert starts == sorted(starts)
        # Keys are left out whole: the row has no key that only partly shows.
        shown = sum(right - x for *_, x, right in keys)
        assert shown <= 80
        await pilot.press("n")


async def test_the_key_for_the_screen_already_shown_comes_last(write_config: WriteConfig) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(60, 24)) as pilot:
        await ready(pilot)
        await pilot.pause()
        keys = [k[0] for k in footer_keys(app)]
        assert keys[-1] == "ctrl+p"
        assert "ctrl+t" not in keys  # Chat, on the chat screen: dropped first at 60 columns
        assert "ctrl+n" in keys and all(right <= 60 for *_, right in footer_keys(app))


async def test_the_slash_hint_wraps_to_show_every_command_at_80_columns(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("slash")
        hint = app.screen.query_one("#hint", Static)
        await eventually(lambda: hint.display, what="the completion hint")
        await pilot.pause()
        text = str(hint.content)
        assert all(name in text for name in summaries("terminal"))
        assert hint.size.height <= 4
        assert all(len(line) <= 76 for line in text.splitlines())
        # Every command takes the four lines now: the Tab hint comes back with room.
        await pilot.press("s", "k")
        await eventually(lambda: "Tab completes" in str(hint.content), what="the Tab hint")
        assert "/skills" in str(hint.content) and hint.size.height <= 4


def test_a_hint_too_long_for_its_lines_counts_what_it_left_out() -> None:
    names = list(summaries("terminal"))
    hint = completion_hint(names, 40).plain
    lines = hint.splitlines()
    assert len(lines) == HINT_LINES and all(len(line) <= 40 for line in lines)
    shown = [name for name in names if name in hint]
    assert lines[-1].endswith(f"… {len(names) - len(shown)} more")
    # One or two matches say what they do.
    assert summaries("terminal")["/export"] in completion_hint(["/export"], 76).plain


async def test_the_footer_rebuilds_once_however_often_the_bindings_change_before_a_frame(
    write_config: WriteConfig,
) -> None:
    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        footer = app.screen.query_one(KeyFooter)
        await pilot.pause()
        before = footer.recompose
        calls = 0

        async def recompose() -> None:
            nonlocal calls
            calls += 1
            await before()

        footer.recompose = recompose  # type: ignore[method-assign]  # the test counts the calls
        for _ in range(6):  # as a screen filling its tables moves focus and cursor
            app.screen.refresh_bindings()
        await pilot.pause()
        await pilot.pause()
        assert calls == 1
        assert footer_keys(app)  # and the keys are there


async def test_every_section_key_is_in_the_footer_when_it_fits_and_always_in_help(
    write_config: WriteConfig,
) -> None:
    from habakkuk.screens.sections import SECTIONS
    from tests.tui.conftest import notices

    write_config(mock_config())
    app = make_app(None)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.pause()
        shown = {(key, description) for key, description, *_ in footer_keys(app)}
        assert {("ctrl+f", "Skills"), ("ctrl+b", "Schedules"), ("ctrl+d", "Board")} <= shown
        assert {s.key for s in SECTIONS} <= {key for key, _ in shown}
        # In the app's order after the chat's own key, though the composer binds ctrl+d too.
        order = [key for key, *_ in footer_keys(app)]
        assert order[0] == "ctrl+n"
        assert order[1:-2] == [s.key for s in SECTIONS if s.mode != "chat"]
        await send(pilot, "/help")
        await eventually(lambda: any("Ctrl+P" in n for n in notices(app)), what="the help")
        (help_text,) = [n for n in notices(app) if "Ctrl+P" in n]
        for words in ("Ctrl+F skills", "Ctrl+B schedules", "Ctrl+D board", "Ctrl+L memory"):
            assert words in help_text
