"""The page warm-up: a serving process reads its home's SQLite files into the OS page
cache in the background from its start (small files whole, the b-trees' upper pages and
right-most leaves of the large ones), within its budget, and stops at close.

What is in the page cache is asked of the kernel (mincore); a file is put out of it with
posix_fadvise(DONTNEED) after an fsync, so these run on Linux only."""

from __future__ import annotations

import asyncio
import ctypes
import mmap
import os
import sqlite3
import sys
import threading
from functools import partial
from pathlib import Path, PosixPath
from typing import Any

import pytest

from habakkuk.engine.home import Home
from habakkuk.engine.page_warmup import PageWarmup
from tests.conftest import mock_config
from tests.helpers import BOUND, eventually

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="mincore and fadvise: Linux")


def _resident(path: Path) -> set[int]:
    """The pages (numbered from 1, as SQLite does) of `path` in the OS page cache."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        vector = ctypes.create_string_buffer(pages)
        assert libc.mincore(address, size, vector) == 0, ctypes.get_errno()
        libc.munmap(address, size)
    finally:
        os.close(fd)
    assert mmap.PAGESIZE == 4096  # the OS's pages are SQLite's (4 KB)
    return {index + 1 for index in range(pages) if vector.raw[index] & 1}


def _wholly_cached(path: Path) -> bool:
    return set(range(1, path.stat().st_size // 4096 + 1)) <= _resident(path)


def _evict(path: Path) -> None:
    """Put `path` out of the page cache (written to disk first: dirty pages stay)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if len(_resident(path)) > 4:
        pytest.skip("this file system keeps the file in the page cache")


def _database(path: Path, rows: int) -> None:
    """A database of `rows` rows with a table and an index several levels deep."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, key TEXT, body TEXT)")
    conn.execute("CREATE INDEX items_key ON items(key)")
    conn.executemany(
        "INSERT INTO items(key, body) VALUES (?, ?)",
        ((os.urandom(8).hex(), "x" * 200) for _ in range(rows)),
    )
    conn.commit()
    conn.close()


def _pages(path: Path) -> dict[str, dict[str, Any]]:
    """Per b-tree (dbstat): its leaves, the pages the warm-up reads (the levels above the
    leaves' parents, the right-most leaf's parent, that leaf and the two before it) and
    the leaves' parents off its left-most and right-most paths (which it does not read)."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    rows = conn.execute("SELECT name, pageno, pagetype, path FROM dbstat").fetchall()
    conn.close()
    trees: dict[str, list[tuple[str, int, str]]] = {}
    for name, page, kind, where in rows:
        if kind in ("internal", "leaf"):
            trees.setdefault(name, []).append((where, page, kind))
    found: dict[str, dict[str, Any]] = {}
    for name, pages in trees.items():
        depth = max(where.count("/") for where, _, _ in pages)  # the leaves' level
        at = {
            level: sorted(p for p in pages if p[0].count("/") == level)
            for level in range(1, depth + 1)
        }
        # Paths sort in key order within a level: the last is the right-most.
        read = {page for level in range(1, depth - 1) for _, page, _ in at[level]}
        read |= {at[depth - 1][-1][1]} if depth > 1 else set()
        read |= {page for _, page, _ in at[depth][-3:]}
        # (The left-most path is read too: the walk learns the tree's depth down it.)
        parents = {page for _, page, _ in at[depth - 1][1:-1]} if depth > 1 else set()
        found[name] = {"leaves": {page for _, page, _ in at[depth]}, "read": read, "not": parents}
    return found


@linux_only
async def test_a_small_file_is_read_whole_into_the_page_cache(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    _database(path, 3_000)
    _evict(path)
    report = await PageWarmup([path]).run()
    assert report.finished and report.whole_files == ["control.db"]
    # The kernel reads what it was advised asynchronously.
    await eventually(lambda: _wholly_cached(path), what="the whole file in the page cache")


@linux_only
async def test_a_large_file_gets_the_upper_pages_and_right_most_leaves_of_each_tree(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transcripts.db"
    _database(path, 60_000)
    trees = _pages(path)
    assert any(tree["not"] for tree in trees.values())  # leaves' parents off both paths
    _evict(path)
    report = await PageWarmup([path], whole_file=0).run()
    assert report.finished and report.whole_files == []
    resident = _resident(path)
    for name, tree in trees.items():
        assert tree["read"] <= resident, name
        assert not tree["not"] & resident, name  # the leaves' parents off the path: not read
    leaves = set().union(*(tree["leaves"] for tree in trees.values()))
    assert len(leaves & resident) < len(leaves) // 10  # not the whole file
    assert report.bytes < path.stat().st_size // 20


async def test_the_warm_up_stays_within_its_byte_budget(tmp_path: Path) -> None:
    files = [tmp_path / "control.db", tmp_path / "state.db"]
    for path in files:
        _database(path, 3_000)
    # control.db whole and the trees' upper pages (a few); state.db whole would not fit.
    budget = files[0].stat().st_size + 256 * 1024
    report = await PageWarmup(files, budget=budget).run()
    assert report.whole_files == ["control.db"]
    assert report.bytes <= budget
    tiny = await PageWarmup(files, budget=4096).run()
    assert not tiny.finished and tiny.bytes <= 4096


async def test_a_file_that_is_missing_or_not_a_database_is_passed_over(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 1000)
    real = tmp_path / "state.db"
    _database(real, 100)
    report = await PageWarmup([tmp_path / "gone.db", junk, real], whole_file=0).run()
    assert report.finished
    assert report.tree_pages > 0  # the real one's tree, after the two it passed over


async def test_a_stopped_warm_up_reads_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    _database(path, 1_000)
    warmup = PageWarmup([path])
    warmup.stop()
    report = await warmup.run()
    assert not report.finished and report.bytes == 0


async def test_cancelled_it_waits_for_its_thread_which_then_reads_nothing_more(
    tmp_path: Path,
) -> None:
    entered, released = threading.Event(), threading.Event()

    class HeldPath(PosixPath):
        """A file the thread's first look at waits on until the test releases it."""

        def __fspath__(self) -> str:
            entered.set()
            released.wait(BOUND)
            return super().__fspath__()

    real = tmp_path / "control.db"
    _database(real, 1_000)
    warmup = PageWarmup([HeldPath(real), real])
    task = asyncio.create_task(warmup.run())
    await eventually(entered.is_set, what="the warm-up's thread in its first step")
    task.cancel()
    for _ in range(3):
        await asyncio.sleep(0)  # loop passes: the cancellation reaches the task
    assert not task.done()  # it waits for the thread, still in its step
    released.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _warmup_threads() == 0
    assert not warmup.report.finished and warmup.report.bytes == 0  # nothing read after


@linux_only
async def test_a_serving_runtime_warms_its_home_in_the_background(
    runtime_factory: Any, home: Home
) -> None:
    runtime = await runtime_factory(mock_config())
    files = [home.db_path(name) for name in ("control", "state", "transcripts", "usage")]
    await runtime.queue.db.run(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
    for path in files:
        _evict(path)
    runtime.start_workers(channels=False, maintenance=True)
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "page-warmup"]
    await asyncio.wait_for(task, BOUND)
    # A small home: every shared database whole, back in the page cache.
    for path in files:
        await eventually(partial(_wholly_cached, path), what=f"{path.name} in the page cache")


async def test_closing_the_runtime_ends_the_warm_up(runtime_factory: Any) -> None:
    runtime = await runtime_factory(mock_config())
    runtime.start_workers(channels=False, maintenance=True)
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "page-warmup"]
    await runtime.close()
    assert task.done()
    assert _warmup_threads() == 0


def _warmup_threads() -> int:
    return sum(thread.name == "page-warmup" for thread in threading.enumerate())
