"""The stores refuse an SQLite build they cannot run on, saying what it lacks."""

from __future__ import annotations

import sqlite3

from habakkuk.engine.store import SQLITE_OLDEST, sqlite_problems


def test_an_old_sqlite_without_fts5_or_json_is_named_for_each_lack() -> None:
    problems = sqlite_problems((3, 31, 1), fts5=False, json=False)
    assert problems == [
        "SQLite 3.31.1 is older than 3.35.0",
        "it was built without FTS5 (full-text search)",
        "it was built without the JSON functions",
    ]
    assert sqlite_problems(SQLITE_OLDEST, fts5=True, json=True) == []


def test_the_sqlite_this_python_links_has_what_the_stores_need() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        row = conn.execute("SELECT json_extract('[7]', '$[0]')").fetchone()
    finally:
        conn.close()
    assert row == (7,)
    assert sqlite_problems(sqlite3.sqlite_version_info, fts5=True, json=True) == []
