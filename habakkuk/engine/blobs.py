"""Content-addressed files (attachments, generated images, spilled tool output), and on
PostgreSQL the same bytes as rows, so every machine sees every attachment.

A blob is a file under HOME/blobs/ab/abcdef...<suffix>, named by the SHA-256 of its bytes
(plus the suffix it was stored with): writing it again is a no-op, and its path is what
blocks, deliveries and the web chat keep. With the home on PostgreSQL, several machines
share one queue but not one disk: a turn, a delivery or a file download may run on a
node that never saw the upload. So `BlobStore` given the control database (`shared`)
also writes each blob's bytes to its `blobs` table, keyed by the blob's name (its digest
and suffix, so a node fetching it writes the very same file) and written once; and
`ensure_local` (or `local_path` from a worker thread) turns a blob reference from any
node into a path on this one, fetching the row and writing the file when it is missing
here. On SQLite (one disk) there is no table and nothing to fetch. `share_folder` and
`fetch_shared` move a home's blobs between files and rows (`habakkuk storage migrate`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .sql import Conn, Database

# The blobs table of control on PostgreSQL: one row per blob file name (`digest`: the
# SHA-256 in hex and the suffix it was stored with, as the file is named).
PG_BLOBS_TABLE = """
CREATE TABLE IF NOT EXISTS blobs (
    digest TEXT PRIMARY KEY,
    data BYTEA NOT NULL,
    size BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_created ON blobs(created_at);
"""

# A blob's file name: the SHA-256 in hex, then the suffix it was stored with.
_NAME = re.compile(r"([0-9a-f]{64})(\.[^/\\]*)?")


class BlobNotFound(FileNotFoundError):
    """A blob reference that is neither on this machine nor in the shared table."""


def blob_name(ref: str | Path) -> str:
    """The file name of blob reference `ref` (a path from any node, or a name)."""
    return Path(ref).name


class BlobStore:
    """Content-addressed files under `root`, shared through `shared`'s `blobs` table
    when the home is on PostgreSQL (`shared`: the control database, or None)."""

    def __init__(self, root: Path, shared: Database | None = None):
        self.root = root
        self.shared = shared
        self._ready = False
        self._ready_lock = threading.Lock()

    def path_for(self, digest: str) -> Path:
        """Where the blob named `digest` (its digest plus suffix) lives on this machine."""
        return self.root / digest[:2] / digest

    # -- writing ------------------------------------------------------------------------

    def put_bytes(self, data: bytes, suffix: str = "") -> Path:
        """Store `data`; returns its path. Same content, same path, written once (and,
        shared, its row written once). Blocking: call it off the event loop."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_for(digest + suffix)
        if path.exists():
            # Stored again means used again: retention prunes blobs by mtime.
            os.utime(path)
        else:
            self._write_file(path, data)
        if self.shared is not None:
            self._share(path.name, data)
        return path

    async def put(self, data: bytes, suffix: str = "") -> Path:
        """`put_bytes` off the event loop."""
        return await asyncio.to_thread(self.put_bytes, data, suffix)

    @staticmethod
    def _write_file(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)

    def _share(self, name: str, data: bytes) -> None:
        shared = self._prepared()
        # One statement, safe beside any other writer: a second put of the same bytes
        # (here or on another node) only marks it used again, at most once an hour, as
        # the file's mtime is (retention prunes by it).
        shared.run_sync(
            lambda conn: conn.execute(
                "INSERT INTO blobs(digest, data, size, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(digest) DO UPDATE SET created_at = excluded.created_at"
                " WHERE blobs.created_at < excluded.created_at - 3600",
                (name, data, len(data), time.time()),
            )
        )

    def _prepared(self) -> Database:
        """The shared database, with its blobs table created (once per process)."""
        shared = self.shared
        assert shared is not None
        with self._ready_lock:
            if not self._ready:
                shared.run_sync(_create_table)
                self._ready = True
        return shared

    # -- reading ------------------------------------------------------------------------

    def local_path(self, ref: str | Path) -> Path:
        """A path on this machine holding blob `ref` (a path from any node, or a name):
        the file here, else (shared) the row fetched and written here. BlobNotFound
        when neither has it. Blocking: call it off the event loop (`ensure_local`)."""
        name = blob_name(ref)
        path = self.path_for(name)
        if path.exists():
            return path
        given = Path(ref)
        if given.is_absolute() and given.is_file():
            return given  # a blob of another folder this machine also sees
        match = _NAME.fullmatch(name)
        if self.shared is None or match is None:
            raise BlobNotFound(f"blob {name} is not stored here")
        shared = self._prepared()
        row = shared.run_sync(
            lambda conn: conn.execute("SELECT data FROM blobs WHERE digest = ?", (name,)).fetchone()
        )
        if row is None:
            raise BlobNotFound(f"blob {name} is not stored here or in the shared table")
        data = bytes(row[0])
        if hashlib.sha256(data).hexdigest() != match.group(1):
            raise BlobNotFound(f"blob {name}: the shared copy does not match its digest")
        self._write_file(path, data)
        return path

    async def ensure_local(self, ref: str | Path) -> Path:
        """`local_path` off the event loop."""
        return await asyncio.to_thread(self.local_path, ref)

    def get(self, digest: str) -> bytes:
        """The bytes of blob `digest` (fetched from the shared table when missing here)."""
        return self.local_path(digest).read_bytes()

    async def localise(self, blocks: Iterable[Any]) -> None:
        """Point each media block's blob (`block.blob`) at a copy on this machine, fetched
        from the shared table when another node stored it; a block whose blob is gone
        everywhere is left as it is (reading it then says so)."""
        if self.shared is None:
            return
        for block in blocks:
            blob = getattr(block, "blob", "")
            if not blob or await asyncio.to_thread(Path(blob).is_file):
                continue
            try:
                block.blob = str(await self.ensure_local(blob))
            except BlobNotFound:
                continue

    # -- moving a home -------------------------------------------------------------------

    def share_folder(self) -> int:
        """Write a row for every blob file of this folder the shared table lacks (a home
        moved from SQLite keeps its attachments as files: after this every node finds
        them); how many were added. Blocking: call it off the event loop."""
        if self.shared is None:
            return 0
        shared = self._prepared()
        added = 0
        for path in sorted(self.root.glob("??/*")):
            match = _NAME.fullmatch(path.name)
            if match is None or not path.is_file():
                continue  # a temporary file of a write in progress, or not a blob
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != match.group(1):
                continue  # damaged on disk: not shared as the digest's bytes
            row = (path.name, data, len(data), path.stat().st_mtime)
            added += shared.run_sync(functools.partial(_insert_if_missing, row=row))
        return added

    def fetch_shared(self) -> int:
        """Write every shared blob this folder lacks as a file (a home moved back to
        SQLite, or a node that wants every attachment at hand); how many were written.
        One row at a time, so memory holds one blob. Blocking: call it off the event loop."""
        if self.shared is None:
            return 0
        shared = self._prepared()
        names = shared.run_sync(
            lambda conn: [str(row[0]) for row in conn.execute("SELECT digest FROM blobs")]
        )
        present = {path.name for path in self.root.glob("??/*") if _NAME.fullmatch(path.name)}
        written = 0
        for name in sorted(set(names) - present):
            try:
                self.local_path(name)
            except BlobNotFound:
                continue  # pruned meanwhile, or damaged: not written
            written += 1
        return written

    # -- retention ----------------------------------------------------------------------

    async def prune_shared(self, older_than_days: float) -> int | None:
        """Delete shared rows not stored again for that long (retention); how many (None:
        nothing is shared, an SQLite home). The files each node keeps are pruned by
        mtime (engine/retention.py)."""
        if self.shared is None:
            return None
        shared = await asyncio.to_thread(self._prepared)
        cutoff = time.time() - older_than_days * 86_400

        def _prune(conn: Conn) -> int:
            return int(conn.execute("DELETE FROM blobs WHERE created_at < ?", (cutoff,)).rowcount)

        return await shared.write(_prune)


def _insert_if_missing(conn: Conn, *, row: tuple[str, bytes, int, float]) -> int:
    """One blob's row unless its name is there already; how many were added."""
    cursor = conn.execute(
        "INSERT INTO blobs(digest, data, size, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(digest) DO NOTHING",
        row,
    )
    return int(cursor.rowcount)


def _create_table(conn: Conn) -> None:
    # Under the schema's writer lock (BEGIN IMMEDIATE on PostgreSQL takes it): two nodes
    # creating at once would race on the catalog.
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executescript(PG_BLOBS_TABLE)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
