"""The redelivery guard (`channel_seen`): a key seen is dropped for a week, and the
prune each inbound message runs finds the week-old keys by time (an index), not by
reading every key of the week."""

from __future__ import annotations

import time
from pathlib import Path

from habakkuk.channels import store as channel_store
from habakkuk.channels.store import ChannelStore
from habakkuk.engine.jobs import MIGRATIONS
from habakkuk.engine.store import SqliteDatabase
from tests.helpers import sqlite_conn


async def test_marking_a_key_seen_prunes_week_old_keys_through_the_time_index(
    tmp_path: Path,
) -> None:
    db = await SqliteDatabase.open(tmp_path / "control.db", MIGRATIONS)
    try:
        channels = await ChannelStore.open(db)
        old = time.time() - channel_store.SEEN_KEEP_SECONDS - 60
        await db.write(
            lambda conn: conn.executemany(
                "INSERT INTO channel_seen(account, key, at) VALUES ('web', ?, ?)",
                [(f"old-{n}", old) for n in range(3)],
            )
        )
        await channels.mark_seen("web", "recent")
        statements: list[str] = []
        await db.run(lambda conn: sqlite_conn(conn).set_trace_callback(statements.append))
        await channels.mark_seen("web", "new")
        await db.run(lambda conn: sqlite_conn(conn).set_trace_callback(None))
        assert await channels.seen("web", "new") and await channels.seen("web", "recent")
        assert not await channels.seen("web", "old-0")  # a week on, a resend is new again
        prunes = [s for s in statements if s.startswith("DELETE FROM channel_seen")]
        assert len(prunes) == 1, statements
        plan = await db.fetchall(f"EXPLAIN QUERY PLAN {prunes[0]}")
        details = " | ".join(str(row["detail"]) for row in plan)
        assert "channel_seen_at" in details and "SCAN" not in details, details
    finally:
        await db.close()
