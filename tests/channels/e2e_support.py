"""What every platform's end-to-end tests read of the home's control.db: rows, a job, and
whether it finished (read with sqlite3 from outside the runtime, as a second process would)."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from habakkuk.engine.home import Home


def rows(home: Home, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    """The rows `sql` reads from the home's control.db."""
    with contextlib.closing(sqlite3.connect(home.db_path("control"))) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def job(home: Home, job_id: str) -> sqlite3.Row | None:
    """The job's row, or None."""
    found = rows(home, "SELECT * FROM jobs WHERE id = ?", (job_id,))
    return found[0] if found else None


def finished(home: Home, job_id: str) -> bool:
    """The job exists and has ended (done, failed or cancelled)."""
    row = job(home, job_id)
    return row is not None and row["status"] in ("done", "failed", "cancelled")
