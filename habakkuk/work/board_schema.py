"""The board's tables in control.db (spec 000 "Board"): the contract the board's store
(board_store.py) and its dispatcher (board_dispatch.py) both write SQL against.

control.db is shared by every process of one home; the jobs module owns its numbered
migrations, so these tables are created IF NOT EXISTS when a store opens (like the
schedules' tables). Every change to a card is one short transaction that bumps its
`revision` and appends to `board_log`: notices derive their ids from the revision, so
each is sent once, and `notified_revision` records the last one queued, so a crash
between a change and its notice repeats the notice, never loses it.

- board_cards: one row per card. `reply_to` is JSON (or NULL). `attempt` counts the
  attempts dispatched; `session` is the latest attempt's session.
- board_deps: (card, depends_on), written with the card and never after, so no cycle.
- board_log: the comments (kind "comment") and the event log (the other kinds of
  board_types.EventKind), oldest first by id.
"""

from __future__ import annotations

from habakkuk.engine.sql import Conn
from habakkuk.engine.store import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS board_cards (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    assignee TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'todo',
    priority INTEGER NOT NULL DEFAULT 0,
    result TEXT NOT NULL DEFAULT '',
    parent TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    session TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    revision INTEGER NOT NULL DEFAULT 1,
    blocked_kind TEXT NOT NULL DEFAULT '',
    blocked_reason TEXT NOT NULL DEFAULT '',
    creator_session TEXT NOT NULL DEFAULT '',
    reply_to TEXT,
    deliver_to TEXT,
    notified_revision INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS board_cards_status
    ON board_cards(status, priority DESC, created_at);
CREATE INDEX IF NOT EXISTS board_cards_assignee ON board_cards(assignee, status);
CREATE TABLE IF NOT EXISTS board_deps (
    card TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (card, depends_on)
);
CREATE INDEX IF NOT EXISTS board_deps_on ON board_deps(depends_on);
CREATE TABLE IF NOT EXISTS board_log (
    id INTEGER PRIMARY KEY,
    card TEXT NOT NULL,
    author TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS board_log_card ON board_log(card, id);
"""


async def ensure_board_tables(db: Database) -> None:
    """Create the board's tables if needed (idempotent; safe with other processes)."""

    def _create(conn: Conn) -> None:
        conn.executescript(SCHEMA)

    await db.run(_create)
