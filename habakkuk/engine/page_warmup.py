"""Warm a home's SQLite files in the OS page cache, in the background, once workers start.

On a cold page cache (a boot, or a machine that has evicted the home) the first turns
after a start read their pages from disk one at a time, each on the database thread the
turn waits for: the queue's (control.db: the claim, the reply sweep's catch-up over the
day's finished jobs), the session's settings (state.db), the new session's and
message's places in transcripts.db and usage.db (the b-trees' upper pages and their
right-most leaves, where rows with a growing key are appended). This reads them first,
off the event loop, on one thread of its own, in the order given (the queue first):

- a file of at most `WHOLE_FILE_BYTES` whole (`posix_fadvise(WILLNEED)`, a megabyte a
  call): the kernel reads it in large requests, asynchronously, and nothing is copied
  into the process. That is control.db and state.db on any home (retention bounds them)
  and every file of a small home;
- in a larger file, each b-tree's levels above its leaves' parents and its right-most
  path (the right-most leaf and the two before it, which a split reads), located by
  reading the file's own pages (the format of sqlite.org/fileformat.html): a few pages a
  tree. Not the leaves' parents (about 1 % of a file): on a disk that serves a few
  hundred requests a second their scattered reads made the first turns wait behind
  them for seconds (benchmarks/first_turns_bench.py).

Bounded: `budget` bytes in all (pages read plus bytes advised), `seconds` of wall time,
and `stop()` (the runtime's close) ends it between two steps. Its one use of SQLite is a
read of each large file's schema on a read-only connection of its own that waits for no
lock; it never writes. Best effort: a file it cannot read or parse is left as it is.
Without `posix_fadvise` (macOS) the whole files are read instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import stat
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

# A file this small is advised whole (control.db and state.db stay under it: retention
# prunes them; a small home's transcripts too).
WHOLE_FILE_BYTES = 32 * 1024 * 1024
# Bytes read or advised across all files, and the wall time, after which it stops.
BUDGET_BYTES = 96 * 1024 * 1024
TIME_LIMIT_SECONDS = 10.0
# Bytes one advice (or, without posix_fadvise, one read) covers: a stop waits at most
# one such step.
STEP_BYTES = 1024 * 1024

_HEADER = b"SQLite format 3\x00"
_INTERIOR = (2, 5)  # b-tree page types: interior index, interior table


@dataclass
class WarmupReport:
    """What a warm-up did: the files advised whole, the b-tree pages read in the others,
    the bytes in all, and whether it ran to the end (False: stopped, out of budget or out
    of time)."""

    whole_files: list[str] = field(default_factory=list)
    tree_pages: int = 0
    bytes: int = 0
    finished: bool = False


class _Out(Exception):
    """The budget, the time or a stop ended the warm-up."""


class PageWarmup:
    """One warm-up of `paths` (most needed first) on a thread of its own: `await run()`
    (as a task, cancelled at shutdown); `report` says what it did."""

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        budget: int = BUDGET_BYTES,
        seconds: float = TIME_LIMIT_SECONDS,
        whole_file: int = WHOLE_FILE_BYTES,
    ):
        self.paths = list(paths)
        self.budget = budget
        self.seconds = seconds
        self.whole_file = whole_file
        self.report = WarmupReport()
        self._stop = threading.Event()
        self._deadline = 0.0

    async def run(self) -> WarmupReport:
        """Warm the files on a thread of its own until done, out of budget or out of time;
        what it did. Cancelled (the runtime's close), it stops the thread between two
        steps and waits for it to end before the cancellation goes on."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()

        def work() -> None:
            try:
                self._run()
            except Exception as exc:  # best effort: never a traceback from a warm-up
                log.debug("page warm-up ended: %s", exc)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(_settle, ended)

        thread = threading.Thread(target=work, name="page-warmup", daemon=True)
        thread.start()
        try:
            await asyncio.shield(ended)
        finally:
            self._stop.set()
            await asyncio.shield(ended)
            # Its last act was to settle `ended`: the join waits for it to return, no more.
            thread.join()
        return self.report

    def stop(self) -> None:
        """Have the thread stop at its next step (any thread)."""
        self._stop.set()

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        self._deadline = time.monotonic() + self.seconds
        try:
            for path in self.paths:  # in the order given: the queue first
                size = _regular_size(path)
                if size is None:
                    continue  # not there (yet), or not a file: nothing to warm
                if size <= self.whole_file and self.report.bytes + size <= self.budget:
                    self._advise(path, size)
                    self.report.whole_files.append(path.name)
                else:
                    self._edges(path)
        except _Out:
            return
        self.report.finished = True

    def _spend(self, size: int) -> None:
        """Count `size` bytes against the budget; _Out when a limit is reached."""
        if self._stop.is_set() or time.monotonic() > self._deadline:
            raise _Out
        if self.report.bytes + size > self.budget:
            raise _Out
        self.report.bytes += size

    def _edges(self, path: Path) -> None:
        """Read the upper levels and the right-most path of every b-tree of `path` (left
        as it is when it is not a database)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            if hasattr(os, "posix_fadvise"):  # the pages asked for, no read-ahead around them
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            page_size = _page_size(os.pread(fd, 100, 0))
            if page_size is None:
                return
            tree = _Tree(self, fd, page_size, os.fstat(fd).st_size // page_size)
            for root in _roots(path):
                tree.edges(root)
        except (OSError, ValueError, struct.error, sqlite3.Error) as exc:
            log.debug("page warm-up of %s: %s", path, exc)  # best effort: left as it is
        finally:
            os.close(fd)

    def _advise(self, path: Path, size: int) -> None:
        """Have the kernel read the first `size` bytes of `path` into its cache, a step at
        a time."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            for offset in range(0, size, STEP_BYTES):
                step = min(STEP_BYTES, size - offset)
                self._spend(step)
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(fd, offset, step, os.POSIX_FADV_WILLNEED)
                else:  # macOS: no advice; a read leaves the pages cached as well
                    os.pread(fd, step, offset)
        finally:
            os.close(fd)


class _Tree:
    """The b-tree walk of one file."""

    def __init__(self, warmup: PageWarmup, fd: int, page_size: int, pages: int):
        self.warmup = warmup
        self.fd = fd
        self.page_size = page_size
        self.pages = pages

    def edges(self, root: int) -> None:
        """Read the b-tree at `root` down to the level above its leaves' parents, then its
        right-most leaf's parent, that leaf and the two leaves before it (where rows with
        a growing key go; a split reads the leaf's siblings)."""
        depth = self._depth(root)
        if depth == 0:
            return
        level = [root]
        for _ in range(depth - 1):  # parse down to the leaves' parents (not read)
            level = [child for page in level for child in self._children(page)]
        for leaf in self._children(level[-1])[-3:]:
            self._read(leaf)

    def _read(self, page: int) -> bytes:
        """Page `page`; empty past the file's end (a page only the WAL holds yet)."""
        if page > self.pages:
            return b""
        self.warmup._spend(self.page_size)
        self.warmup.report.tree_pages += 1
        return os.pread(self.fd, self.page_size, (page - 1) * self.page_size)

    def _depth(self, root: int) -> int:
        """Levels below `root` (0: it is a leaf), down its left-most path."""
        depth, page = 0, root
        while True:
            children = self._children(page)
            if not children:
                return depth
            depth += 1
            page = children[0]

    def _children(self, page: int) -> list[int]:
        """The child pages of interior page `page` in key order, right-most last; []
        for a leaf (or a page that is not a b-tree page: a file changed under us)."""
        data = self._read(page)
        start = 100 if page == 1 else 0
        if len(data) < self.page_size or data[start] not in _INTERIOR:
            return []
        cells = int.from_bytes(data[start + 3 : start + 5], "big")
        pointers = struct.unpack_from(f">{cells}H", data, start + 12)
        children = [int.from_bytes(data[at : at + 4], "big") for at in pointers]
        children.append(int.from_bytes(data[start + 8 : start + 12], "big"))
        if not all(0 < child <= self.pages for child in children):
            raise ValueError(f"page {page} points outside the file")
        return children


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _regular_size(path: Path) -> int | None:
    """The size of the regular file at `path`; None when there is none."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _page_size(header: bytes) -> int | None:
    """The page size a database file's header states; None for a file that is not one."""
    if len(header) < 100 or not header.startswith(_HEADER):
        return None
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def _roots(path: Path) -> list[int]:
    """The root page of every table and index of the database at `path`, the schema's
    first, read on a read-only connection of our own that waits for no lock."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=0)
    try:
        rows = conn.execute("SELECT rootpage FROM sqlite_schema WHERE rootpage > 0").fetchall()
    finally:
        conn.close()
    return [1, *(int(row[0]) for row in rows)]
