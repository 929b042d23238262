"""A query checked on a few messages alone: an in-memory FTS5 index of their text.

Session search checks a query with a word found in few messages on those messages
only (session_search.py). On message_fts, FTS5 checks the other words through
their own lists of rows, from the newest of the few messages to the oldest: a page of a
common word's list for each of them once they lie far apart (a page each on a home of
1,000,000 messages, where ten pages held them all on one of 10,000). Here the cost is
their text, whatever the history.

The probe is created as message_fts is (sessions.py, migration 2): no tokenize option,
FTS5's default tokenizer, over the same text (message_fts indexes message_text.text
through its triggers), so a query matches here exactly the rows it matches there.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

_local = threading.local()


def _probe() -> sqlite3.Connection:
    """This thread's probe (a connection is used by the thread that made it)."""
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        # As message_fts: its tokenizer, and no copy of the text (rowids are enough).
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(text, content='')")
        _local.conn = conn
    return conn


def probe_matches(texts: Sequence[tuple[int, str]], queries: Sequence[str]) -> list[set[int]]:
    """The ids of `texts` (id, text) that each FTS5 query of `queries` matches ("": none).
    The probe holds these texts until the thread's next call."""
    conn = _probe()
    conn.execute("BEGIN")
    try:
        conn.execute("INSERT INTO probe(probe) VALUES ('delete-all')")
        conn.executemany("INSERT INTO probe(rowid, text) VALUES (?, ?)", texts)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    sql = "SELECT rowid FROM probe WHERE probe MATCH ?"
    return [{int(row[0]) for row in conn.execute(sql, (q,))} if q else set() for q in queries]
