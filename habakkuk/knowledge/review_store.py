"""Review progress in memory.db: the `reviews` positions and the `review_runs` plans.

The tables belong to memory.db's migrations (the memory service); this module only
reads and writes them:

    reviews(session PK, position, at)
    review_runs(id PK, kind, session, plan, applied, done, tokens, created, finished)

`plan` is JSON: {"changes": [...], "dropped": {reason: count}, "skipped": reason?}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from habakkuk.engine.sql import Conn, Row
from habakkuk.engine.store import Database

from .review_plan import PlanChange, change_from_json, fingerprint, to_json


def utc_now() -> str:
    """RFC 3339 UTC to the second, as the memory's other timestamps."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ReviewRun:
    """One stored run: its plan, how far it got, what it cost."""

    id: str
    kind: str
    session: str
    changes: list[PlanChange]
    dropped: dict[str, int]
    applied: int
    done: bool
    tokens: int
    skipped: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Row) -> ReviewRun:
        plan = json.loads(row["plan"])
        return cls(
            id=row["id"],
            kind=row["kind"],
            session=row["session"],
            changes=[change_from_json(c) for c in plan.get("changes", [])],
            dropped=dict(plan.get("dropped", {})),
            applied=int(row["applied"]),
            done=bool(row["done"]),
            tokens=int(row["tokens"]),
            skipped=str(plan.get("skipped", "")),
            extra=dict(plan.get("extra", {})),
        )


class ReviewStore:
    """The review tables of one agent's memory.db."""

    def __init__(self, db: Database):
        self.db = db

    async def run(self, run_id: str) -> ReviewRun | None:
        row = await self.db.fetchone("SELECT * FROM review_runs WHERE id = ?", (run_id,))
        return ReviewRun.from_row(row) if row else None

    async def create_run(
        self,
        run_id: str,
        kind: str,
        session: str,
        changes: list[PlanChange],
        *,
        dropped: dict[str, int],
        tokens: int,
        skipped: str = "",
        extra: dict[str, Any] | None = None,
    ) -> ReviewRun:
        """Store a plan before anything of it is applied (a skipped run is done at once).

        If a run with this id exists (another worker got there first), that one wins
        and is returned: a job never has two plans.
        """
        plan = {"changes": [to_json(c) for c in changes], "dropped": dropped}
        if skipped:
            plan["skipped"] = skipped
        if extra:
            plan["extra"] = extra
        now = utc_now()

        def _insert(conn: Conn) -> Row:
            conn.execute(
                "INSERT INTO review_runs(id, kind, session, plan, applied, done, tokens,"
                " created, finished) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)"
                " ON CONFLICT(id) DO NOTHING",
                (
                    run_id,
                    kind,
                    session,
                    json.dumps(plan, ensure_ascii=False),
                    int(bool(skipped)),
                    tokens,
                    now,
                    now if skipped else None,
                ),
            )
            row: Row = conn.execute("SELECT * FROM review_runs WHERE id = ?", (run_id,)).fetchone()
            return row

        return ReviewRun.from_row(await self.db.write(_insert))

    async def mark_applied(self, run_id: str, applied: int) -> None:
        """Record that the first `applied` changes of the plan are done."""
        await self.db.write(
            lambda conn: conn.execute(
                "UPDATE review_runs SET applied = max(applied, ?) WHERE id = ?",
                (applied, run_id),
            )
        )

    async def finish(self, run_id: str, session: str, position: int) -> None:
        """Mark the run done and (for a session's review) move its position, together."""
        now = utc_now()

        def _finish(conn: Conn) -> None:
            conn.execute(
                "UPDATE review_runs SET done = 1, finished = ? WHERE id = ?", (now, run_id)
            )
            if session:
                conn.execute(
                    "INSERT INTO reviews(session, position, at) VALUES (?, ?, ?)"
                    " ON CONFLICT(session) DO UPDATE SET"
                    " position = max(position, excluded.position), at = excluded.at",
                    (session, position, now),
                )

        await self.db.write(_finish)

    async def position(self, session: str) -> int:
        """How many of the session's messages have been reviewed (0 when none)."""
        row = await self.db.fetchone("SELECT position FROM reviews WHERE session = ?", (session,))
        return int(row[0]) if row else 0

    async def tokens_since(self, since: str) -> int:
        """Tokens the review and nightly runs created since `since` (UTC text) spent."""
        row = await self.db.fetchone(
            "SELECT coalesce(sum(tokens), 0) FROM review_runs WHERE created >= ?", (since,)
        )
        return int(row[0]) if row else 0

    async def recent_fingerprints(self, *, runs: int = 10) -> set[str]:
        """What the last `runs` finished runs applied, to spot a change proposed again."""
        rows = await self.db.fetchall(
            "SELECT * FROM review_runs WHERE done = 1 ORDER BY created DESC, rowid DESC LIMIT ?",
            (runs,),
        )
        seen: set[str] = set()
        for row in rows:
            run = ReviewRun.from_row(row)
            seen.update(fingerprint(c) for c in run.changes[: run.applied])
        return seen
