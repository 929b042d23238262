"""Workspace checkpoints in a shadow git repository."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import stat
import subprocess
from pathlib import Path

import pytest

from habakkuk.tools.checkpoints import Checkpoint, CheckpointError, Checkpoints

pytestmark = pytest.mark.skipif(not Checkpoints.available(), reason="git is not on PATH")

MB = 1024 * 1024


def plain_git(cwd: Path, *args: str) -> str:
    """Run git as a user would in ``cwd``, isolated from this machine's configuration."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=True,
        text=True,
    )
    return done.stdout


def shadow_git(repo: Path, *args: str) -> bytes:
    """Read the shadow repository directly, as a person inspecting it would."""
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args],
        env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)},
        capture_output=True,
        check=True,
    ).stdout


def shadow_files(repo: Path, commit: str) -> set[str]:
    """The paths a checkpoint holds."""
    out = shadow_git(repo, "ls-tree", "-r", "--name-only", "-z", commit)
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes."""
    digest = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return tmp_path / "home" / "checkpoints" / "agent"


@pytest.fixture
def cps(repo: Path, ws: Path) -> Checkpoints:
    return Checkpoints(repo, ws)


async def turn(cps: Checkpoints, session: str = "s1", request: str = "do it") -> Checkpoint:
    taken = await cps.snapshot(kind="turn", session=session, request=request)
    assert taken is not None
    return taken


async def test_restore_whole_workspace_reverts_changes_and_removes_new_files(
    cps: Checkpoints, ws: Path
) -> None:
    write(ws / "a.txt", "one\n")
    write(ws / "sub" / "b.txt", "bee\n")
    first = await turn(cps)

    write(ws / "a.txt", "changed\n")
    (ws / "sub" / "b.txt").unlink()
    write(ws / "new.txt", "new\n")
    write(ws / "newdir" / "deep" / "x.txt", "x\n")

    text = await cps.restore(first.id)

    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "sub" / "b.txt").read_text() == "bee\n"
    assert not (ws / "new.txt").exists()
    assert not (ws / "newdir").exists(), "folders emptied by the restore are removed"
    for name in ("a.txt", "sub/b.txt", "new.txt", "newdir/deep/x.txt"):
        assert name in text


async def test_restore_one_path_leaves_the_rest_of_the_workspace(
    cps: Checkpoints, ws: Path
) -> None:
    write(ws / "a.txt", "a1\n")
    write(ws / "b.txt", "b1\n")
    write(ws / "dir" / "c.txt", "c1\n")
    first = await turn(cps)
    write(ws / "a.txt", "a2\n")
    write(ws / "b.txt", "b2\n")
    write(ws / "dir" / "c.txt", "c2\n")
    write(ws / "dir" / "extra.txt", "extra\n")

    text = await cps.restore(first.id, "a.txt")
    assert (ws / "a.txt").read_text() == "a1\n"
    assert (ws / "b.txt").read_text() == "b2\n"
    assert "a.txt" in text and "b.txt" not in text

    await cps.restore(first.id, str(ws / "dir"))
    assert (ws / "dir" / "c.txt").read_text() == "c1\n"
    assert not (ws / "dir" / "extra.txt").exists()
    assert (ws / "b.txt").read_text() == "b2\n"


async def test_diff_stat_previews_the_restore_without_changing_anything(
    cps: Checkpoints, ws: Path
) -> None:
    write(ws / "a.txt", "one\n")
    first = await turn(cps)
    write(ws / "a.txt", "two\nthree\n")
    write(ws / "added.txt", "x\n")
    before = tree_digest(ws)

    text = await cps.diff_stat(first.id)

    assert "a.txt" in text and "added.txt" in text
    assert "2 files changed" in text
    assert tree_digest(ws) == before
    assert len(await cps.list()) == 1, "a preview takes no snapshot"
    assert (await cps.diff_stat(first.id, "added.txt")).startswith(" added.txt")
    with pytest.raises(CheckpointError, match="neither in checkpoint"):
        await cps.diff_stat(first.id, "missing-too.txt")


async def test_ignored_files_and_nested_repositories_are_skipped_and_left_alone(
    cps: Checkpoints, ws: Path, repo: Path
) -> None:
    write(ws / ".gitignore", "*.log\nbuild/\n")
    write(ws / "keep.txt", "k\n")
    write(ws / "debug.log", "log1\n")
    write(ws / "build" / "out.bin", "out1\n")
    nested = ws / "vendor" / "lib"
    write(nested / "lib.py", "v1\n")
    plain_git(nested, "init", "-q")
    first = await turn(cps)

    files = shadow_files(repo, first.id)
    assert files == {".gitignore", "keep.txt"}

    write(ws / "debug.log", "log2\n")
    write(ws / "build" / "out.bin", "out2\n")
    write(nested / "lib.py", "v2\n")
    write(nested / "more.py", "more\n")
    write(ws / "keep.txt", "k2\n")

    await cps.restore(first.id)

    assert (ws / "keep.txt").read_text() == "k\n"
    assert (ws / "debug.log").read_text() == "log2\n"
    assert (ws / "build" / "out.bin").read_text() == "out2\n"
    assert (nested / "lib.py").read_text() == "v2\n"
    assert (nested / "more.py").exists()
    assert (nested / ".git" / "HEAD").exists()


async def test_folder_that_becomes_a_nested_repository_drops_out_of_snapshots(
    cps: Checkpoints, ws: Path, repo: Path
) -> None:
    write(ws / "lib" / "a.py", "a\n")
    first = await turn(cps)
    assert "lib/a.py" in shadow_files(repo, first.id)

    plain_git(ws / "lib", "init", "-q")
    write(ws / "lib" / "b.py", "b\n")
    second = await turn(cps)

    assert shadow_files(repo, second.id) == set()
    await cps.restore(first.id)
    assert (ws / "lib" / "b.py").exists(), "restore never writes into a nested repository"


async def test_workspace_own_git_repository_is_never_read_or_written(
    cps: Checkpoints, ws: Path, repo: Path
) -> None:
    write(ws / "tracked.txt", "v1\n")
    plain_git(ws, "init", "-q")
    plain_git(ws, "add", "tracked.txt")
    plain_git(ws, "commit", "-qm", "init")
    write(ws / "staged.txt", "s\n")
    plain_git(ws, "add", "staged.txt")
    own_git = tree_digest(ws / ".git")
    own_head = plain_git(ws, "rev-parse", "HEAD")

    first = await turn(cps)
    write(ws / "tracked.txt", "v2\n")
    write(ws / "other.txt", "o\n")
    second = await turn(cps)
    await cps.restore(first.id)
    await cps.diff_stat(second.id)
    await cps.undo("s1")

    assert tree_digest(ws / ".git") == own_git, "its HEAD, index and objects are untouched"
    assert plain_git(ws, "rev-parse", "HEAD") == own_head
    for commit in (first.id, second.id):
        assert not any(p == ".git" or p.startswith(".git/") for p in shadow_files(repo, commit))
    assert {"tracked.txt", "staged.txt"} <= shadow_files(repo, first.id)


async def test_files_over_max_file_mb_are_left_out_and_never_overwritten(
    repo: Path, ws: Path
) -> None:
    cps = Checkpoints(repo, ws, max_file_mb=1)
    write(ws / "big.bin", "small for now\n")
    write(ws / "a.txt", "a\n")
    first = await turn(cps)
    assert shadow_files(repo, first.id) == {"big.bin", "a.txt"}

    (ws / "big.bin").write_bytes(b"x" * (MB + 1))
    write(ws / "a.txt", "a2\n")
    second = await turn(cps)
    assert shadow_files(repo, second.id) == {"a.txt"}

    text = await cps.restore(first.id)

    assert (ws / "a.txt").read_text() == "a\n"
    assert (ws / "big.bin").stat().st_size == MB + 1, "the oversized file is left alone"
    assert "left alone" in text and "big.bin" in text


async def test_snapshot_over_max_mb_is_skipped_and_logged(
    repo: Path, ws: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cps = Checkpoints(repo, ws, max_mb=1)
    write(ws / "small.txt", "s\n")
    assert await cps.snapshot(kind="turn", session="s", request="r") is not None
    (ws / "one.bin").write_bytes(b"1" * (MB // 2 + 10))
    (ws / "two.bin").write_bytes(b"2" * (MB // 2 + 10))

    with caplog.at_level(logging.WARNING, logger="habakkuk.tools.checkpoints"):
        skipped = await cps.snapshot(kind="turn", session="s", request="r")

    assert skipped is None
    assert "skipped" in caplog.text and "checkpoint_max_mb 1" in caplog.text
    assert len(await cps.list()) == 1
    (ws / "two.bin").unlink()
    assert await cps.snapshot(kind="turn", session="s", request="r") is not None


async def test_restore_refuses_when_the_current_state_cannot_be_snapshotted(
    repo: Path, ws: Path
) -> None:
    cps = Checkpoints(repo, ws, max_mb=1)
    write(ws / "a.txt", "a\n")
    first = await turn(cps)
    (ws / "huge.bin").write_bytes(b"h" * (2 * MB))

    with pytest.raises(CheckpointError, match="not restoring"):
        await cps.restore(first.id)
    assert (ws / "huge.bin").exists()


async def test_rollback_can_itself_be_rolled_back(cps: Checkpoints, ws: Path) -> None:
    write(ws / "a.txt", "v1\n")
    first = await turn(cps)
    write(ws / "a.txt", "v2\n")
    write(ws / "b.txt", "b\n")

    await cps.restore(first.id)
    assert (ws / "a.txt").read_text() == "v1\n"
    rollback = (await cps.list())[0]
    assert rollback.kind == "rollback"

    await cps.restore(rollback.id)
    assert (ws / "a.txt").read_text() == "v2\n"
    assert (ws / "b.txt").read_text() == "b\n"


async def test_undo_walks_back_through_a_sessions_turns_then_returns_none(
    cps: Checkpoints, ws: Path
) -> None:
    write(ws / "a.txt", "start\n")
    t1 = await turn(cps, "s1", "first")
    write(ws / "a.txt", "after first\n")
    other = await turn(cps, "s2", "someone else")
    write(ws / "other.txt", "s2 was here\n")
    t2 = await turn(cps, "s1", "second")
    write(ws / "a.txt", "after second\n")
    write(ws / "second.txt", "2\n")

    first_undo = await cps.undo("s1")
    assert first_undo is not None
    assert first_undo[0].id == t2.id
    assert "second.txt" in first_undo[1]
    assert (ws / "a.txt").read_text() == "after first\n"
    assert not (ws / "second.txt").exists()

    second_undo = await cps.undo("s1")
    assert second_undo is not None
    assert second_undo[0].id == t1.id
    assert (ws / "a.txt").read_text() == "start\n"
    assert not (ws / "other.txt").exists()

    assert await cps.undo("s1") is None
    kinds = [c.kind for c in await cps.list()]
    assert kinds[:2] == ["undo", "undo"]
    assert other.id in {c.id for c in await cps.list(session="s2")}


async def test_undo_skips_turns_that_changed_nothing(cps: Checkpoints, ws: Path) -> None:
    write(ws / "a.txt", "start\n")
    t1 = await turn(cps, "s1", "edit")
    write(ws / "a.txt", "edited\n")
    await turn(cps, "s1", "only looked")

    undone = await cps.undo("s1")

    assert undone is not None and undone[0].id == t1.id
    assert (ws / "a.txt").read_text() == "start\n"


async def test_new_turn_after_undo_starts_the_walk_again(cps: Checkpoints, ws: Path) -> None:
    write(ws / "a.txt", "0\n")
    await turn(cps)
    write(ws / "a.txt", "1\n")
    assert await cps.undo("s1") is not None
    assert (ws / "a.txt").read_text() == "0\n"

    newer = await turn(cps, request="again")
    write(ws / "a.txt", "2\n")
    undone = await cps.undo("s1")

    assert undone is not None and undone[0].id == newer.id
    assert (ws / "a.txt").read_text() == "0\n"


async def test_undo_after_an_idle_new_turn_goes_past_what_was_already_undone(
    cps: Checkpoints, ws: Path
) -> None:
    write(ws / "a.txt", "0\n")
    t1 = await turn(cps, request="one")
    write(ws / "a.txt", "1\n")
    await turn(cps, request="two")
    write(ws / "a.txt", "2\n")
    assert await cps.undo("s1") is not None
    assert (ws / "a.txt").read_text() == "1\n"
    await turn(cps, request="three, which changed nothing")

    undone = await cps.undo("s1")

    assert undone is not None and undone[0].id == t1.id
    assert (ws / "a.txt").read_text() == "0\n"


async def test_undo_with_no_turns_returns_none(cps: Checkpoints, ws: Path) -> None:
    assert await cps.undo("s1") is None
    write(ws / "a.txt", "a\n")
    await turn(cps, "s2")
    write(ws / "a.txt", "b\n")
    assert await cps.undo("s1") is None
    assert (ws / "a.txt").read_text() == "b\n"


async def test_user_git_config_hooks_and_filters_do_not_apply(
    cps: Checkpoints, ws: Path, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil_home = tmp_path / "evil-home"
    hooks = evil_home / "hooks"
    marker = tmp_path / "ran"
    for hook in ("pre-commit", "post-commit", "reference-transaction", "post-index-change"):
        write(hooks / hook, f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    write(evil_home / "ignore", "*.txt\n")
    config = evil_home / ".gitconfig"
    write(
        config,
        f"[user]\n\tname = Evil\n\temail = evil@example.invalid\n"
        f"[core]\n\thooksPath = {hooks}\n\texcludesFile = {evil_home / 'ignore'}\n"
        f'[filter "evil"]\n\tclean = "touch {marker}; cat"\n\tsmudge = "touch {marker}; cat"\n',
    )
    monkeypatch.setenv("HOME", str(evil_home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(evil_home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "bogus-index"))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "bogus-git-dir"))
    write(ws / ".gitattributes", "* filter=evil\n")
    write(ws / "a.txt", "a\n")

    first = await turn(cps)
    write(ws / "a.txt", "b\n")
    await cps.restore(first.id)

    assert "a.txt" in shadow_files(repo, first.id), "the user's excludesFile is not read"
    assert (ws / "a.txt").read_text() == "a\n"
    assert not marker.exists(), "no hook or filter ran"
    assert not (tmp_path / "bogus-index").exists()
    author = shadow_git(repo, "log", "-1", "--format=%an <%ae>", first.id).decode().strip()
    assert author == "Habakkuk <checkpoints@habakkuk.invalid>"


async def test_parallel_snapshots_take_turns_on_one_lock(cps: Checkpoints, ws: Path) -> None:
    write(ws / "a.txt", "a\n")
    first = await turn(cps)
    write(ws / "b.txt", "b\n")

    taken = await asyncio.gather(*(turn(cps, request=f"r{i}") for i in range(5)))

    assert len({c.id for c in taken}) == 5
    assert [c.id for c in await cps.list()] == [c.id for c in reversed(taken)] + [first.id]


async def test_list_reports_kind_session_and_request_newest_first(
    cps: Checkpoints, ws: Path
) -> None:
    write(ws / "a.txt", "a\n")
    await turn(cps, "s1", "first line\nsecond: line")
    await turn(cps, "s2", "other")
    await turn(cps, "s1", "third")

    everything = await cps.list()
    assert [(c.kind, c.session, c.request) for c in everything] == [
        ("turn", "s1", "third"),
        ("turn", "s2", "other"),
        ("turn", "s1", "first line\nsecond: line"),
    ]
    assert everything[0].created_at.tzinfo is not None
    assert [c.request for c in await cps.list(session="s1")] == [
        "third",
        "first line\nsecond: line",
    ]
    assert len(await cps.list(n=1)) == 1


async def test_unchanged_workspace_still_gets_a_checkpoint(cps: Checkpoints, ws: Path) -> None:
    first = await turn(cps)
    second = await turn(cps)
    assert first.id != second.id
    assert await cps.diff_stat(first.id) == "no changes"


async def test_same_size_edits_right_after_a_snapshot_are_seen(cps: Checkpoints, ws: Path) -> None:
    # Same size and, usually, the same second as the snapshot: only git's racy-entry check
    # tells these edits apart, and it needs the index's real mtime.
    for i in range(10):
        write(ws / "a.txt", f"{i}a\n")
        taken = await turn(cps, request=f"round {i}")
        write(ws / "a.txt", f"{i}b\n")
        assert "a.txt" in await cps.diff_stat(taken.id), f"round {i}"


async def test_shadow_repository_is_private(cps: Checkpoints, repo: Path, ws: Path) -> None:
    await turn(cps)
    assert mode_of(repo) == 0o700


async def test_shadow_repository_inside_the_workspace_is_not_snapshotted(ws: Path) -> None:
    repo = ws / ".habakkuk" / "checkpoints" / "agent"
    cps = Checkpoints(repo, ws)
    write(ws / "a.txt", "a\n")
    first = await turn(cps)
    await turn(cps)
    assert shadow_files(repo, first.id) == {"a.txt"}
    await cps.restore(first.id)
    assert (repo / "HEAD").exists()


async def test_symlinks_and_file_to_folder_changes_round_trip(cps: Checkpoints, ws: Path) -> None:
    write(ws / "target.txt", "t\n")
    (ws / "link").symlink_to("target.txt")
    write(ws / "thing", "a file\n")
    first = await turn(cps)
    (ws / "link").unlink()
    (ws / "thing").unlink()
    write(ws / "thing" / "inside.txt", "now a folder\n")

    await cps.restore(first.id)

    assert os.readlink(ws / "link") == "target.txt"
    assert (ws / "thing").read_text() == "a file\n"


async def test_bad_ids_and_paths_get_one_line_errors(cps: Checkpoints, ws: Path) -> None:
    write(ws / "a.txt", "a\n")
    first = await turn(cps)
    with pytest.raises(CheckpointError, match="not a hexadecimal id"):
        await cps.restore("--help")
    with pytest.raises(CheckpointError, match="no checkpoint 0123abcd"):
        await cps.restore("0123abcd")
    with pytest.raises(CheckpointError, match="outside the workspace"):
        await cps.restore(first.id, "../elsewhere")
    with pytest.raises(CheckpointError, match="outside the workspace"):
        await cps.diff_stat(first.id, "/etc/passwd")
    with pytest.raises(CheckpointError, match="neither in checkpoint"):
        await cps.restore(first.id, "nothing-here.txt")
    with pytest.raises(CheckpointError, match="kind"):
        await cps.snapshot(kind="weird", session="s", request="r")
    assert len(await cps.list()) == 1, "refused restores take no snapshot"


async def test_missing_workspace_is_a_clear_error(repo: Path, tmp_path: Path) -> None:
    cps = Checkpoints(repo, tmp_path / "nope")
    with pytest.raises(CheckpointError, match="is not a directory"):
        await cps.snapshot(kind="turn", session="s", request="r")
