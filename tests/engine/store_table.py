"""The one-table database the store's own tests write to: its migration, a write that
inserts a name, and the names a fresh connection reads back."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from habakkuk.engine.store import Migration, connect

TABLE = [Migration(1, "CREATE TABLE t (name TEXT PRIMARY KEY)")]


def insert(name: str, threads: list[int] | None = None) -> Callable[[sqlite3.Connection], str]:
    """A write inserting `name`; the thread it ran on is noted in `threads`."""

    def _insert(conn: sqlite3.Connection) -> str:
        if threads is not None:
            threads.append(threading.get_ident())
        conn.execute("INSERT INTO t(name) VALUES (?)", (name,))
        return name

    return _insert


def names(path: Path) -> set[str]:
    """The names committed to the database at `path`, read on a connection of its own."""
    conn = connect(path)
    try:
        return {row[0] for row in conn.execute("SELECT name FROM t")}
    finally:
        conn.close()
