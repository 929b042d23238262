"""Hot reload while the workers run (services/hot_reload.py): real files, real inotify.

A note edited by hand is indexed without a search; a `hooks:` edit fires the new hook on
the next event; any other section's edit is listed as needing a restart; a broken
config.yaml is reported with its file and line and the running config kept.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.config_diff import changed_sections
from habakkuk.engine.events import ConfigReloaded
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime
from tests.conftest import OpenRuntime, mock_config
from tests.helpers import BOUND, eventually, sqlite_conn
from tests.hook_log import HookLog

SECOND_PROVIDER = "  spare:\n    type: mock\n"


def with_second_provider(text: str) -> str:
    """`text` (a mock_config) with a second provider under `providers:`."""
    head, rest = text.split("agents:", 1)
    return head + SECOND_PROVIDER + "agents:" + rest


async def reload_after(runtime: Runtime, home: Home, text: str) -> ConfigReloaded:
    """Write config.yaml and return the ConfigReloaded event the edit causes."""
    with runtime.bus.subscribe(lambda e: isinstance(e, ConfigReloaded)) as reloads:
        home.config_path.write_text(text, encoding="utf-8")
        event = await asyncio.wait_for(reloads.get(), BOUND)
    assert isinstance(event, ConfigReloaded)
    return event


async def indexed(runtime: Runtime, word: str) -> bool:
    """Whether the index holds a note with `word`, read from memory.db (no sync)."""
    db = await runtime.memory.database("main")
    query = "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH ?"
    count = await db.run(lambda conn: sqlite_conn(conn).execute(query, (word,)).fetchone()[0])
    return bool(count)


async def test_a_note_edited_by_hand_is_indexed_before_any_search(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    runtime = await runtime_factory(mock_config())
    runtime.start_workers(maintenance=True)
    await runtime.memory.opened_ahead()
    note = home.agent_dir("main") / "memory" / "tandem.md"
    note.write_text("A green tandem.\n", encoding="utf-8")
    await eventually(lambda: indexed(runtime, "green"), what="the new note indexed")
    # Once watched, an edit is indexed on the kernel's word, not at the next poll.
    note.write_text("A blue tandem.\n", encoding="utf-8")
    await eventually(lambda: indexed(runtime, "blue"), what="the edit indexed")
    assert not await indexed(runtime, "green")
    hits = await runtime.memory.search("main", "blue")
    assert [h.note.slug for h in hits] == ["tandem"]
    # Recorded as a hand edit, as a search's sync would have.
    latest = (await runtime.memory.history("main"))[0]
    assert (latest.name, latest.by, latest.op) == ("tandem", "hand", "updated")


async def test_a_hooks_edit_fires_the_new_hook_on_the_next_event(
    runtime_factory: OpenRuntime, home: Home, tmp_path: Path
) -> None:
    log = HookLog(tmp_path / "hooks")
    before = mock_config() + log.config(log.entry("session_new", "old"))
    runtime = await runtime_factory(before)
    runtime.start_workers(maintenance=True)
    after = mock_config() + log.config(log.entry("session_new", "new"))
    event = await reload_after(runtime, home, after)
    assert (event.applied, event.restart, event.invalid) == (["hooks"], [], "")
    await runtime.sessions.new_session(origin="tui", chat=True)
    await runtime.hooks.drain()
    assert log.labels() == {"new"}
    assert (await runtime.control.overview()).config.restart == ()


async def test_a_providers_edit_is_listed_as_needing_a_restart_and_logged_once(
    runtime_factory: OpenRuntime, home: Home, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = HookLog(tmp_path / "hooks")
    text = mock_config()
    runtime = await runtime_factory(text)
    runtime.start_workers(maintenance=True)
    caplog.set_level(logging.WARNING, logger="habakkuk.services.hot_reload")
    event = await reload_after(runtime, home, with_second_provider(text))
    assert (event.applied, event.restart) == ([], ["providers"])
    view = await runtime.control.overview()
    assert view.config.restart == ("providers",)
    assert set(runtime.config.providers) == {"mock"}  # still the one it runs on
    # The same edit read again (here with a hooks edit) is not logged a second time.
    hooked = with_second_provider(text) + log.config(log.entry("session_new", "x"))
    event = await reload_after(runtime, home, hooked)
    assert (event.applied, event.restart) == (["hooks"], ["providers"])
    said = [r.getMessage() for r in caplog.records if "restart" in r.getMessage()]
    assert said == [f"{home.config_path}: providers: changed; restart Habakkuk to apply it"]
    # Back as it was: nothing needs a restart any more.
    event = await reload_after(runtime, home, text)
    assert event.restart == []
    assert (await runtime.control.overview()).config.restart == ()


async def test_a_setting_the_process_made_itself_is_no_edit_of_the_file(
    runtime_factory: OpenRuntime, home: Home, tmp_path: Path
) -> None:
    log = HookLog(tmp_path / "hooks")
    runtime = await runtime_factory(mock_config())
    runtime.config.serve.agents = ["main"]  # what `serve --agents main` does
    runtime.start_workers(maintenance=True)
    event = await reload_after(
        runtime, home, mock_config() + log.config(log.entry("turn_end", "t"))
    )
    assert (event.applied, event.restart) == (["hooks"], [])


async def test_a_broken_config_is_reported_with_file_and_line_and_the_old_one_kept(
    runtime_factory: OpenRuntime, home: Home, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = HookLog(tmp_path / "hooks")
    good = mock_config() + log.config(log.entry("session_new", "kept"))
    runtime = await runtime_factory(good)
    runtime.start_workers(maintenance=True)
    caplog.set_level(logging.WARNING, logger="habakkuk.services.hot_reload")
    broken = good + "timezone: Mars/Olympus_Mons\n"
    line = broken.count("\n")  # the last line
    event = await reload_after(runtime, home, broken)
    assert event.invalid.startswith(f"{home.config_path}:{line}: timezone"), event.invalid
    assert "\n" not in event.invalid
    assert (await runtime.control.overview()).config.invalid == event.invalid
    [said] = [r.getMessage() for r in caplog.records]
    assert said.startswith(event.invalid)
    # The running config goes on: its hooks fire, its timezone stands.
    await runtime.sessions.new_session(origin="tui", chat=True)
    await runtime.hooks.drain()
    assert log.labels() == {"kept"}
    assert runtime.config.timezone == "UTC"
    # Fixed: the error goes away.
    event = await reload_after(runtime, home, good)
    assert (event.invalid, event.restart) == ("", [])
    assert (await runtime.control.overview()).config.invalid == ""


def test_a_file_read_twice_or_with_only_comments_moved_changes_no_section(home: Home) -> None:
    text = mock_config() + "timezone: UTC\n"
    first = parse_config(text, home.config_path, home)
    commented = "# my agent\n\n" + text.replace("agents:", "# below\nagents:")
    assert changed_sections(first, parse_config(text, home.config_path, home)) == []
    assert changed_sections(first, parse_config(commented, home.config_path, home)) == []
    moved = text.replace("timezone: UTC", "timezone: Europe/Paris")
    assert changed_sections(first, parse_config(moved, home.config_path, home)) == ["timezone"]


async def test_closing_right_after_the_start_leaves_no_watch_open(
    runtime_factory: OpenRuntime,
) -> None:
    from tests.knowledge.test_folder_watch import inotify_descriptors

    before = inotify_descriptors()
    runtime = await runtime_factory(mock_config())
    runtime.start_workers(maintenance=True)
    assert inotify_descriptors() - before  # config.yaml is followed from the start
    await runtime.close()
    # A descriptor is closed on a thread of its own (FolderWatch.close): bounded wait.
    await eventually(lambda: not inotify_descriptors() - before, what="every watch closed")


async def test_without_inotify_the_poll_reads_an_edit_once_it_holds_still(
    runtime_factory: OpenRuntime, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    from habakkuk.knowledge import folder_watch
    from habakkuk.services.hot_reload import HotReload

    monkeypatch.setattr(folder_watch, "_libc", lambda: None)  # a platform without inotify
    text = mock_config()
    runtime = await runtime_factory(text)
    reload = HotReload(runtime, poll=0.02)
    task = asyncio.create_task(reload.run())
    task.add_done_callback(lambda _: reload.close())
    try:
        event = await reload_after(runtime, home, with_second_provider(text))
        assert event.restart == ["providers"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
