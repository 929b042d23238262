"""The folder watch names what changed, and answers "scan everything" when unsure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from habakkuk.engine.home import Home
from habakkuk.knowledge.folder_watch import FolderWatch
from habakkuk.knowledge.service import Memory
from tests.helpers import eventually_sync, python_in

from .conftest import AGENT

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify is Linux's; elsewhere every sync scans"
)


@linux_only
def test_the_watch_names_each_file_written_renamed_or_deleted(tmp_path: Path) -> None:
    (tmp_path / "old.md").write_text("x")
    watch = FolderWatch(tmp_path)
    try:
        assert watch.active
        assert watch.changed() == set()
        (tmp_path / "new.md").write_text("y")
        (tmp_path / "old.md").rename(tmp_path / "moved.md")
        assert watch.changed() == {"new.md", "old.md", "moved.md"}
        assert watch.changed() == set()
        (tmp_path / "new.md").unlink()
        assert watch.changed() == {"new.md"}
    finally:
        watch.close()


@linux_only
async def test_a_watch_starts_without_running_a_process(tmp_path: Path) -> None:
    # Finding libc through `ldconfig -p` forked a process on the event loop each time an
    # agent's memory opened (the first turn of each agent waited for it). A fresh
    # interpreter: in this one an earlier watch may already have found libc.
    code = (
        "import subprocess\n"
        "def no_process(*args, **kwargs):\n"
        "    raise AssertionError(f'a process was started: {args}')\n"
        "subprocess.Popen = no_process\n"
        "from pathlib import Path\n"
        "from habakkuk.knowledge.folder_watch import FolderWatch\n"
        f"folder = Path({str(tmp_path)!r})\n"
        "watches = [FolderWatch(folder), FolderWatch(folder)]\n"
        "assert all(watch.active for watch in watches)\n"
        "for watch in watches:\n"
        "    watch.close()\n"
        "print('WATCHED')\n"
    )
    status, out, err = await python_in(code, tmp_path)
    assert status == 0, err
    assert "WATCHED" in out


@linux_only
def test_a_folder_moved_away_answers_scan_everything_and_is_watched_again(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    watch = FolderWatch(folder)
    try:
        folder.rename(tmp_path / "elsewhere")
        folder.mkdir()
        assert watch.changed() is None
        (folder / "a.md").write_text("z")
        assert watch.changed() == {"a.md"}
    finally:
        watch.close()


def inotify_descriptors() -> set[str]:
    """The descriptors of this process that are inotify instances."""
    fds = Path("/proc/self/fd")
    return {fd.name for fd in fds.iterdir() if _link(fd) == "anon_inode:inotify"}


def _link(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:  # the listing's own descriptor, closed by now
        return ""


@linux_only
def test_a_closed_watch_stops_at_once_and_gives_its_descriptor_back(tmp_path: Path) -> None:
    # The descriptor is closed on a thread of its own (the kernel holds the closer for a
    # grace period): it must still be closed, not leaked.
    before = inotify_descriptors()
    watch = FolderWatch(tmp_path)
    (mine,) = inotify_descriptors() - before
    watch.close()
    assert not watch.active
    watch.close()  # idempotent
    eventually_sync(lambda: mine not in inotify_descriptors(), what="the watch's descriptor closed")


def test_a_missing_folder_is_not_watched_and_always_answers_scan_everything(
    tmp_path: Path,
) -> None:
    watch = FolderWatch(tmp_path / "missing")
    assert not watch.active
    assert watch.changed() is None
    assert watch.changed() is None


async def test_a_hand_edit_after_the_memory_folder_was_replaced_is_found(
    memory: Memory, home: Home
) -> None:
    await memory.save("main", "Bike", "A red bicycle.", provenance=AGENT)
    assert [h.note.slug for h in await memory.search("main", "bicycle")] == ["bike"]
    folder = home.agent_dir("main") / "memory"
    # Restored from a backup, say: the watched folder is not the one holding the notes now.
    folder.rename(home.agent_dir("main") / "memory.old")
    folder.mkdir()
    (folder / "tandem.md").write_text("A green tandem.\n")
    assert [h.note.slug for h in await memory.search("main", "tandem")] == ["tandem"]
    assert await memory.search("main", "bicycle") == []
    (folder / "tandem.md").write_text("A blue tandem.\n")
    hits = await memory.search("main", "blue")
    assert [h.note.slug for h in hits] == ["tandem"]
