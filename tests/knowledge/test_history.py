"""Memory history: who changed what, diffs, restore before and after, prefixes, since, pruning."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable

import pytest

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.home import Home
from habakkuk.knowledge.history import parse_since
from habakkuk.knowledge.service import Memory

from .conftest import AGENT, TAINTED, USER


async def test_every_change_records_who_where_and_the_taint(memory: Memory) -> None:
    await memory.save("main", "Plan", "Step one.", provenance=AGENT)
    await memory.save("main", "Plan", "Step one. Step two.", provenance=TAINTED)
    await memory.update_profile("main", "Work", "Baker.", provenance=USER)
    await memory.set_identity("main", "Wren", "", "", provenance=USER)
    await memory.forget("main", "plan", provenance=USER)
    changes = await memory.history("main")
    assert [(c.kind, c.name, c.op, c.by) for c in changes] == [
        ("note", "plan", "deleted", "user"),
        ("identity", "IDENTITY.md", "created", "user"),
        ("profile", "USER.md", "created", "user"),
        ("note", "plan", "updated", "agent"),
        ("note", "plan", "created", "agent"),
    ]
    tainted = changes[3]
    assert tainted.tainted and tainted.session == "s2" and tainted.tool == "memory_save"
    assert tainted.path == "memory/plan.md" and tainted.agent == "main"
    assert [c.op for c in await memory.history("main", name="plan")] == [
        "deleted",
        "updated",
        "created",
    ]
    assert [c.name for c in await memory.history("main", kind="profile")] == ["USER.md"]


async def test_a_change_has_a_unified_diff_and_a_short_id(memory: Memory) -> None:
    await memory.save("main", "Plan", "Step one.", provenance=AGENT)
    await memory.save("main", "Plan", "Step two.", provenance=AGENT)
    newest = (await memory.history("main"))[0]
    detail = await memory.change("main", newest.id[:4])
    assert detail.change.id == newest.id
    assert "--- a/memory/plan.md\n+++ b/memory/plan.md\n" in detail.diff
    assert "-Step one.\n+Step two.\n" in detail.diff
    assert detail.before is not None and detail.after is not None
    with pytest.raises(HabakkukError, match="at least four characters"):
        await memory.change("main", "ab")
    with pytest.raises(NotFound):
        await memory.change("main", "ffffffffffffffff")


async def test_an_ambiguous_prefix_is_a_clear_error(
    open_memory: Callable[..., Memory], home: Home
) -> None:
    first = open_memory()
    await first.save("main", "One", "1", provenance=AGENT)
    await first.save("main", "Two", "2", provenance=AGENT)
    await first.close()
    with sqlite3.connect(home.agent_dir("main") / "history.db") as conn:
        conn.execute("UPDATE changes SET id = 'abcd000' || seq")
    second = open_memory()
    with pytest.raises(HabakkukError, match="more than one change starts so"):
        await second.change("main", "abcd")
    assert (await second.change("main", "abcd0002")).change.name == "two"


async def test_restore_before_undoes_and_after_redoes_and_the_same_is_unchanged(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Plan", "Step one.", provenance=AGENT)
    await memory.save("main", "Plan", "Step two.", provenance=AGENT)
    edit = (await memory.history("main"))[0]
    undone = await memory.restore("main", edit.id, provenance=USER)
    assert not undone.unchanged and undone.restored is not None
    assert undone.restored.restores == edit.id and undone.restored.by == "user"
    assert (await memory.read("main", "plan")).body == "Step one."
    assert [h.note.slug for h in await memory.search("main", "one")] == ["plan"]
    again = await memory.restore("main", edit.id, provenance=USER)
    assert again.unchanged and again.restored is None
    redone = await memory.restore("main", edit.id, version="after", provenance=USER)
    assert not redone.unchanged
    assert (await memory.read("main", "plan")).body == "Step two."
    # The restores are ordinary changes: no hand edit was recorded in between.
    assert [c.by for c in await memory.history("main")] == ["user", "user", "agent", "agent"]


async def test_restoring_a_forget_brings_the_note_back_and_undoing_a_create_trashes_it(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Pet", "A cat named Miso.", provenance=AGENT)
    await memory.forget("main", "pet", provenance=USER)
    forget = (await memory.history("main"))[0]
    await memory.restore("main", forget.id, provenance=USER)
    assert (await memory.read("main", "pet")).body == "A cat named Miso."
    created = (await memory.history("main", name="pet"))[-1]
    assert created.op == "created"
    await memory.restore("main", created.id, provenance=USER)
    assert not (home.agent_dir("main") / "memory" / "pet.md").exists()
    assert await memory.search("main", "Miso") == []


async def test_a_hand_edit_of_user_md_is_recorded_with_what_it_replaced(
    memory: Memory, home: Home
) -> None:
    await memory.update_profile("main", "Food", "Vegan.", provenance=USER)
    (home.agent_dir("main") / "USER.md").write_text("## Food\nOmnivore.\n")
    changes = await memory.history("main", kind="profile")
    assert [c.by for c in changes] == ["hand", "user"]
    detail = await memory.change("main", changes[0].id)
    assert "-Vegan.\n+Omnivore.\n" in detail.diff
    await memory.restore("main", changes[0].id, provenance=USER)
    assert await memory.profile("main") == "## Food\nVegan.\n"


async def test_the_history_survives_deleting_the_index(
    open_memory: Callable[..., Memory], home: Home
) -> None:
    first = open_memory()
    await first.save("main", "Kept", "v1", provenance=AGENT)
    await first.save("main", "Kept", "v2", provenance=AGENT)
    await first.close()
    for suffix in ("", "-wal", "-shm"):
        (home.agent_dir("main") / f"memory.db{suffix}").unlink(missing_ok=True)
    second = open_memory()
    path = home.agent_dir("main") / "memory" / "kept.md"
    assert [c.op for c in await second.history("main")] == ["updated", "created"]
    path.write_text(path.read_text().replace("v2", "v3 by hand"))
    changes = await second.history("main")
    assert [c.by for c in changes] == ["hand", "agent", "agent"]
    assert "-v2\n+v3 by hand\n" in (await second.change("main", changes[0].id)).diff


def test_since_accepts_days_hours_and_dates_and_names_a_bad_value() -> None:
    at = dt.datetime(2026, 11, 10, 12, 0, tzinfo=dt.UTC)
    assert parse_since("7d", at=at) == "2026-11-03T12:00:00Z"
    assert parse_since("12h", at=at) == "2026-11-10T00:00:00Z"
    assert parse_since("2026-11-01") == "2026-11-01T00:00:00Z"
    with pytest.raises(HabakkukError, match="since 'yesterday'"):
        parse_since("yesterday")


async def test_old_changes_are_pruned_on_open(
    open_memory: Callable[..., Memory], home: Home
) -> None:
    first = open_memory()
    await first.save("main", "Ancient", "old words", provenance=AGENT)
    await first.save("main", "Ancient", "new words", provenance=AGENT)
    await first.close()
    with sqlite3.connect(home.agent_dir("main") / "history.db") as conn:
        conn.execute("UPDATE changes SET at = '2020-01-01T00:00:00Z'")
    second = open_memory()
    assert await second.history("main") == []
    with sqlite3.connect(home.agent_dir("main") / "history.db") as conn:
        kept = [row[0] for row in conn.execute("SELECT content FROM versions")]
    # The current version stays (a later hand edit needs it); the older one is gone.
    assert len(kept) == 1 and "new words" in kept[0]


async def test_a_hand_edit_just_before_a_save_is_recorded_as_the_hand_s(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Plan", "Step one.", provenance=AGENT)
    path = home.agent_dir("main") / "memory" / "plan.md"
    path.write_text(path.read_text().replace("Step one.", "Step one, by hand."))
    await memory.save("main", "Plan", "Step two.", provenance=AGENT)
    changes = await memory.history("main", name="plan")
    assert [c.by for c in changes] == ["agent", "hand", "agent"]
    assert "+Step one, by hand.\n" in (await memory.change("main", changes[1].id)).diff


async def test_a_note_that_could_not_be_written_leaves_no_change_behind(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from habakkuk.knowledge import notes

    real = notes.write_atomic

    def disk_full(path: object, text: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(notes, "write_atomic", disk_full)
    with pytest.raises(OSError):
        await memory.save("main", "Bike", "A red bicycle.", provenance=AGENT)
    assert await memory.history("main") == []
    monkeypatch.setattr(notes, "write_atomic", real)
    await memory.save("main", "Bike", "A red bicycle.", provenance=AGENT)
    assert [(c.name, c.op) for c in await memory.history("main")] == [("bike", "created")]


async def test_a_crash_between_recording_and_writing_a_note_repeats_nothing(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies after the history row and before the file: the repeated save
    (the review resumes its plan) replaces that row instead of adding one."""
    from habakkuk.knowledge import notes

    class Killed(BaseException):
        """Stands for SIGKILL: nothing after it runs, no cleanup either."""

    real = notes.write_atomic

    def killed(path: object, text: str) -> None:
        raise Killed

    monkeypatch.setattr(notes, "write_atomic", killed)
    with pytest.raises(Killed):
        await memory.save("main", "Bike", "A red bicycle.", provenance=AGENT)
    monkeypatch.setattr(notes, "write_atomic", real)
    await memory.save("main", "Bike", "A red bicycle.", provenance=AGENT)
    changes = await memory.history("main", name="bike")
    assert [(c.op, c.by) for c in changes] == [("created", "agent")]
    detail = await memory.change("main", changes[0].id)
    assert detail.after is not None and "A red bicycle." in detail.after
