"""The schedules' tables in control.db: `schedules` and `schedule_runs`.

control.db is shared by every process of one home; the jobs module owns its numbered
migrations, so these tables are created IF NOT EXISTS when the store opens (like
channels/store.py), spelled for the engine that holds control (work/tables.py). Every
write is one short transaction on the queue's connection: on PostgreSQL it holds the
control schema's writer lock, so the compare-and-swaps below serialise across nodes
exactly as they do across the processes of one SQLite home.

`schedule_runs` holds one row per (schedule, slot, extra): the timetable writes it
with ON CONFLICT DO NOTHING, so a tick repeated after a crash (or raced by another
node's) never doubles a row, and the run handlers upsert their outcome onto it
(`set_run`).

A row that cannot be read (bad JSON, a `when` that no longer parses) is logged in one
line and skipped: one bad schedule never hides the others (nanobot #2792).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from habakkuk.engine.jobs import Interrupted, Lease
from habakkuk.engine.redact import redact, redact_optional
from habakkuk.engine.sql import Conn, Row
from habakkuk.engine.store import Database
from habakkuk.work.schedule_types import Schedule, SlotRun, SlotStatus
from habakkuk.work.tables import Tables, ensure_tables

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '{}',
    enabled INTEGER NOT NULL DEFAULT 1,
    next_run REAL,
    last_run REAL,
    last_status TEXT NOT NULL DEFAULT '',
    last_output TEXT NOT NULL DEFAULT '',
    fail_streak INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules(enabled, next_run);
CREATE INDEX IF NOT EXISTS schedules_agent ON schedules(agent);
CREATE TABLE IF NOT EXISTS schedule_runs (
    schedule TEXT NOT NULL,
    slot REAL NOT NULL,
    extra INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    job TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT '',
    delivered INTEGER,
    at REAL NOT NULL,
    PRIMARY KEY (schedule, slot, extra)
);
CREATE INDEX IF NOT EXISTS schedule_runs_newest ON schedule_runs(schedule, at);
CREATE INDEX IF NOT EXISTS schedule_runs_job ON schedule_runs(job);
"""

# The same tables in PostgreSQL's types: every column's name and meaning as above
# (`habakkuk storage migrate` copies them by name); flags stay integers.
PG_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '{}',
    enabled BIGINT NOT NULL DEFAULT 1,
    next_run DOUBLE PRECISION,
    last_run DOUBLE PRECISION,
    last_status TEXT NOT NULL DEFAULT '',
    last_output TEXT NOT NULL DEFAULT '',
    fail_streak BIGINT NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS schedules_due ON schedules(enabled, next_run);
CREATE INDEX IF NOT EXISTS schedules_agent ON schedules(agent);
CREATE TABLE IF NOT EXISTS schedule_runs (
    schedule TEXT NOT NULL,
    slot DOUBLE PRECISION NOT NULL,
    extra BIGINT NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    job TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT '',
    delivered BIGINT,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (schedule, slot, extra)
);
CREATE INDEX IF NOT EXISTS schedule_runs_newest ON schedule_runs(schedule, at);
CREATE INDEX IF NOT EXISTS schedule_runs_job ON schedule_runs(job);
"""

TABLES = Tables(SCHEMA, PG_SCHEMA, marker="schedule_runs_job")

# The fields of a Schedule kept in `body` (JSON): what is read only when a run starts.
BODY_FIELDS = (
    "prompt",
    "command",
    "on_output",
    "deliver_to",
    "workdir",
    "timeout_seconds",
    "missed",
    "origin",
)
_COLUMNS = (
    "id, agent, name, spec, body, enabled, next_run, last_run, last_status, last_output,"
    " fail_streak, created_at"
)


class CorruptSchedule(Exception):
    """A stored row that cannot be read back (reported and skipped by every reader)."""


def schedule_from_row(row: Row) -> Schedule:
    """A Schedule from its row; CorruptSchedule (one line) when it cannot be read."""
    try:
        body = json.loads(row["body"])
        if not isinstance(body, dict):
            raise ValueError("body is not an object")
        return Schedule(
            id=row["id"],
            agent=row["agent"],
            name=row["name"],
            spec=row["spec"],
            prompt=str(body.get("prompt", "")),
            command=body.get("command"),
            on_output=body.get("on_output", "deliver"),
            deliver_to=body.get("deliver_to"),
            workdir=body.get("workdir"),
            timeout_seconds=float(body.get("timeout_seconds", 120.0)),
            missed=body.get("missed", "skip"),
            enabled=bool(row["enabled"]),
            next_run=row["next_run"],
            last_run=row["last_run"],
            last_status=row["last_status"],
            last_output=row["last_output"],
            fail_streak=int(row["fail_streak"]),
            created_at=float(row["created_at"]),
            origin=str(body.get("origin", "")),
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptSchedule(f"schedule {row['id']}: unreadable row ({exc})") from None


def name_key(name: str) -> str:
    """What makes two schedule names the same: case and runs of spaces do not count."""
    return " ".join(name.split()).casefold()


def _body(schedule: Schedule) -> str:
    return json.dumps({f: getattr(schedule, f) for f in BODY_FIELDS}, separators=(",", ":"))


def _run_from_row(row: Row) -> SlotRun:
    delivered = row["delivered"]
    return SlotRun(
        schedule=row["schedule"],
        slot=row["slot"],
        status=row["status"],
        reason=row["reason"],
        job=row["job"],
        session=row["session"],
        delivered=None if delivered is None else bool(delivered),
        extra=bool(row["extra"]),
        at=row["at"],
    )


@dataclass(frozen=True)
class Skip:
    """A slot recorded as skipped, with why."""

    slot: float
    reason: str


class ScheduleStore:
    """Typed access to the schedules' tables of one control.db."""

    def __init__(self, db: Database):
        self.db = db
        # "next_run is the value read", NULL included: SQLite's IS compares values,
        # PostgreSQL's IS takes only NULL/TRUE/FALSE, so it says IS NOT DISTINCT FROM.
        self._same = "IS NOT DISTINCT FROM" if db.dialect == "postgres" else "IS"
        # The name control is known by on the store's connection (a Lease checks its
        # job there): the main database of control.db, the control schema on PostgreSQL.
        self._control = "control" if db.dialect == "postgres" else "main"

    @classmethod
    async def open(cls, db: Database) -> ScheduleStore:
        """A store on `db` with its tables created if needed."""
        store = cls(db)
        await store.ensure()
        return store

    async def ensure(self) -> None:
        """Create the tables if needed (idempotent; safe with other processes)."""
        await ensure_tables(self.db, TABLES)

    # -- schedules -------------------------------------------------------------------

    async def insert(self, schedule: Schedule) -> str | None:
        """Store a new schedule, unless its agent has one of the same name (names compare
        without case or extra spaces): then nothing is stored and that one's id returned.
        The check and the insert are one transaction, so two adds cannot both pass."""

        def _insert(conn: Conn) -> str | None:
            wanted = name_key(schedule.name)
            for row in conn.execute(
                "SELECT id, name FROM schedules WHERE agent = ?", (schedule.agent,)
            ):
                if name_key(row["name"]) == wanted:
                    return str(row["id"])
            conn.execute(
                f"INSERT INTO schedules({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    schedule.id,
                    schedule.agent,
                    schedule.name,
                    schedule.spec,
                    _body(schedule),
                    int(schedule.enabled),
                    schedule.next_run,
                    schedule.last_run,
                    schedule.last_status,
                    schedule.last_output,
                    schedule.fail_streak,
                    schedule.created_at,
                ),
            )
            return None

        return await self.db.write(_insert)

    async def named(self, name: str) -> list[Schedule]:
        """The readable schedules called `name` (compared as `name_key` does), of every
        agent, oldest first: older homes may hold more than one per agent."""
        wanted = name_key(name)
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules ORDER BY created_at, id", ()
        )
        return [s for s in readable(rows) if name_key(s.name) == wanted]

    async def get(self, schedule_id: str) -> Schedule | None:
        """One schedule, or None (absent). CorruptSchedule when its row is unreadable."""
        row = await self.db.fetchone(
            f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)
        )
        return schedule_from_row(row) if row is not None else None

    async def all(self, agent: str | None = None) -> list[Schedule]:
        """Every readable schedule (of `agent`): the next to run first, paused and spent
        last. Unreadable rows are logged and left out."""
        where, params = ("WHERE agent = ?", (agent,)) if agent else ("", ())
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules {where}"
            " ORDER BY enabled DESC, next_run IS NULL, next_run, created_at",
            params,
        )
        return list(readable(rows))

    async def due(self, now: float, limit: int = 1000) -> list[Schedule]:
        """Enabled schedules whose next_run has come (readable ones), soonest first."""
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM schedules WHERE enabled = 1 AND next_run IS NOT NULL"
            " AND next_run <= ? ORDER BY next_run LIMIT ?",
            (now, limit),
        )
        return list(readable(rows))

    async def counts(self) -> tuple[int, int]:
        """(total, enabled)."""
        row = await self.db.fetchone("SELECT count(*), coalesce(sum(enabled), 0) FROM schedules")
        assert row is not None
        return int(row[0]), int(row[1])

    async def set_enabled(self, schedule_id: str, enabled: bool) -> bool:
        """Pause (False) or enable; False when there is no such schedule."""
        return await self.db.write(
            lambda conn: (
                conn.execute(
                    "UPDATE schedules SET enabled = ? WHERE id = ?", (int(enabled), schedule_id)
                ).rowcount
                == 1
            )
        )

    async def delete(self, schedule_id: str) -> bool:
        """Remove a schedule and its slot rows; False when there was none."""

        def _delete(conn: Conn) -> bool:
            conn.execute("DELETE FROM schedule_runs WHERE schedule = ?", (schedule_id,))
            return conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount == 1

        return await self.db.write(_delete)

    async def advance(
        self,
        schedule_id: str,
        expected: float | None,
        new_next: float | None,
        *,
        rows: Sequence[SlotRun] = (),
        enable: bool | None = None,
    ) -> bool:
        """Compare-and-swap next_run from `expected` to `new_next`, recording `rows`
        (INSERT OR IGNORE) in the same transaction; False (nothing written) when another
        process moved next_run first."""

        def _advance(conn: Conn) -> bool:
            sets = "next_run = ?" + (", enabled = ?" if enable is not None else "")
            params: list[Any] = [new_next]
            if enable is not None:
                params.append(int(enable))
            cursor = conn.execute(
                f"UPDATE schedules SET {sets} WHERE id = ? AND next_run {self._same} ?",
                (*params, schedule_id, expected),
            )
            if cursor.rowcount != 1:
                return False
            _insert_runs(conn, rows)
            return True

        return await self.db.write(_advance)

    async def advance_many(
        self, swaps: Sequence[tuple[str, float | None, float | None, Sequence[SlotRun]]]
    ) -> list[bool]:
        """`advance` for several schedules in one transaction: (id, expected, new_next,
        rows) each; whether each swap won."""

        swap = f"UPDATE schedules SET next_run = ? WHERE id = ? AND next_run {self._same} ?"

        def _advance(conn: Conn) -> list[bool]:
            won = []
            for schedule_id, expected, new_next, rows in swaps:
                cursor = conn.execute(
                    swap,
                    (new_next, schedule_id, expected),
                )
                won.append(cursor.rowcount == 1)
                if cursor.rowcount == 1:
                    _insert_runs(conn, rows)
            return won

        return await self.db.write(_advance) if swaps else []

    async def record_result(
        self,
        schedule_id: str,
        *,
        last_run: float,
        last_status: str,
        last_output: str | None = None,
        fail_streak: int | None = None,
        lease: Lease | None = None,
    ) -> None:
        """Write a run's outcome onto the schedule (runs slice: after each run).
        With `lease`, only while that job's lease is still held."""

        def _result(conn: Conn) -> None:
            if lease is not None:
                lease.check(conn, self._control)
            _record(conn, schedule_id, last_run, last_status, last_output, fail_streak)

        await self.db.write(_result)

    # -- slot runs -------------------------------------------------------------------

    async def add_runs(self, rows: Iterable[SlotRun]) -> None:
        """Record slot rows (INSERT OR IGNORE: a slot already recorded keeps its row)."""
        batch = list(rows)
        await self.db.write(lambda conn: _insert_runs(conn, batch))

    async def set_run(
        self,
        schedule_id: str,
        slot: float,
        status: SlotStatus,
        *,
        extra: bool = False,
        reason: str | None = None,
        job: str | None = None,
        session: str | None = None,
        delivered: bool | None = None,
        lease: Lease | None = None,
    ) -> None:
        """Upsert one slot's outcome (runs slice): fields left None keep their value.
        With `lease`, only while that job's lease is still held."""

        def _set(conn: Conn) -> None:
            if lease is not None:
                lease.check(conn, self._control)
            _upsert_run(conn, schedule_id, slot, status, extra, reason, job, session, delivered)

        await self.db.write(_set)

    async def settle_run(
        self,
        job: str,
        status: SlotStatus,
        *,
        reason: str | None,
        session: str | None,
        delivered: bool | None,
        last_status: str,
        last_output: str | None,
        fail_streak: int | None,
    ) -> bool:
        """A run's end on its slot row and its schedule, in one transaction, so a delivery
        settling at the same moment (on any node) comes wholly before or after it: a row
        its delivery already marked delivery_failed stays so (a run that "ran" did not
        get its message through), with that reason. False when the job has no slot row."""

        def _settle(conn: Conn) -> bool:
            row = _run_of_job(conn, job)
            if row is None:
                return False
            now_status, now_last, now_reason = status, last_status, reason
            if row.status == "delivery_failed" and status == "ran":
                now_status, now_last = "delivery_failed", f"delivery failed: {row.reason}"
                now_reason = None
            _upsert_run(
                conn,
                row.schedule,
                row.slot,
                now_status,
                row.extra,
                now_reason,
                None,
                session,
                delivered,
            )
            _record(conn, row.schedule, time.time(), now_last, last_output, fail_streak)
            return True

        return await self.db.write(_settle)

    async def settle_delivery(self, job: str, *, delivered: bool, reason: str = "") -> bool:
        """A run's message arrived (delivered) or did not (the row becomes delivery_failed
        with `reason`, unless the run itself failed: its failure and its why stay), in one
        transaction with the schedule's last status. False when the job has no slot row."""

        def _settle(conn: Conn) -> bool:
            row = _run_of_job(conn, job)
            if row is None:
                return False
            if delivered:
                _upsert_run(
                    conn, row.schedule, row.slot, row.status, row.extra, None, None, None, True
                )
                return True
            status: SlotStatus = "failed" if row.status == "failed" else "delivery_failed"
            why = None if status == "failed" else reason
            _upsert_run(conn, row.schedule, row.slot, status, row.extra, why, None, None, False)
            conn.execute(
                "UPDATE schedules SET last_run = coalesce(last_run, ?), last_status = ?"
                " WHERE id = ?",
                (time.time(), f"delivery failed: {reason}", row.schedule),
            )
            return True

        return await self.db.write(_settle)

    async def runs(self, schedule_id: str, *, limit: int = 50) -> list[SlotRun]:
        """Slot rows of one schedule, newest slot first."""
        rows = await self.db.fetchall(
            "SELECT * FROM schedule_runs WHERE schedule = ? ORDER BY slot DESC, extra LIMIT ?",
            (schedule_id, limit),
        )
        return [_run_from_row(r) for r in rows]

    async def job_facts(
        self, job_ids: Sequence[str], serial_keys: Sequence[str]
    ) -> tuple[set[str], dict[str, set[str]]]:
        """In one read: which of `job_ids` exist (any status), and the queued or
        running job ids of each of `serial_keys`."""

        def _read(conn: Conn) -> tuple[set[str], dict[str, set[str]]]:
            found: set[str] = set()
            for start in range(0, len(job_ids), 500):
                chunk = list(job_ids[start : start + 500])
                marks = ",".join("?" for _ in chunk)
                rows = conn.execute(f"SELECT id FROM jobs WHERE id IN ({marks})", chunk)
                found.update(str(r[0]) for r in rows)
            active: dict[str, set[str]] = {}
            for start in range(0, len(serial_keys), 500):
                chunk = list(serial_keys[start : start + 500])
                marks = ",".join("?" for _ in chunk)
                # Jobs with a serial key are read through jobs_serial, whose condition
                # the query must state (an empty key, if asked, through no index).
                keyed = "" if "" in chunk else " AND serial_key != ''"
                rows = conn.execute(
                    f"SELECT serial_key, id FROM jobs WHERE serial_key IN ({marks})"
                    f" AND status IN ('queued', 'running'){keyed}",
                    chunk,
                )
                for key, job_id in rows:
                    active.setdefault(str(key), set()).add(str(job_id))
            return found, active

        return await self.db.run(_read)

    async def run_for_job(self, job_id: str) -> SlotRun | None:
        """The slot row a job runs (runs slice: find its slot from the job id)."""
        row = await self.db.fetchone("SELECT * FROM schedule_runs WHERE job = ?", (job_id,))
        return _run_from_row(row) if row is not None else None


def record_interrupted_in(conn: Conn, interrupted: Interrupted) -> None:
    """A slot job's `JobKind.on_interrupted`: the queue ended the job because the process
    running it stopped or died mid-run, so its handler never recorded an outcome. Inside
    that transaction (control.db as "main"), the slot's row, if still queued or running,
    becomes interrupted with why, and the schedule's last status says so."""
    job = interrupted.job
    row = conn.execute(
        "SELECT schedule, slot, extra FROM schedule_runs WHERE job = ?"
        " AND status IN ('queued', 'running')",
        (job.id,),
    ).fetchone()
    if row is None:
        return  # settled already, or its schedule was deleted
    now = time.time()
    reason = interrupted.reason
    conn.execute(
        "UPDATE schedule_runs SET status = 'interrupted', reason = ?, at = ?"
        " WHERE schedule = ? AND slot = ? AND extra = ?",
        (reason, now, row["schedule"], row["slot"], row["extra"]),
    )
    conn.execute(
        "UPDATE schedules SET last_run = ?, last_status = ? WHERE id = ?",
        (now, f"interrupted: {reason}", row["schedule"]),
    )


def readable(rows: Iterable[Row]) -> Iterable[Schedule]:
    """The rows that read back as schedules; each unreadable one logged once, skipped."""
    for row in rows:
        try:
            yield schedule_from_row(row)
        except CorruptSchedule as exc:
            log.warning("%s; skipped", exc)


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _run_of_job(conn: Conn, job: str) -> SlotRun | None:
    row = conn.execute("SELECT * FROM schedule_runs WHERE job = ?", (job,)).fetchone()
    return _run_from_row(row) if row is not None else None


def _upsert_run(
    conn: Conn,
    schedule_id: str,
    slot: float,
    status: SlotStatus,
    extra: bool,
    reason: str | None,
    job: str | None,
    session: str | None,
    delivered: bool | None,
) -> None:
    """One slot's outcome, inserted or updated: fields given None keep their value."""
    conn.execute(
        "INSERT INTO schedule_runs(schedule, slot, extra, status, reason, job, session,"
        " delivered, at) VALUES (?, ?, ?, ?, coalesce(?, ''), coalesce(?, ''),"
        " coalesce(?, ''), ?, ?)"
        " ON CONFLICT(schedule, slot, extra) DO UPDATE SET status = excluded.status,"
        # The row's own values by table name: bare, PostgreSQL finds them ambiguous
        # beside `excluded`.
        " reason = coalesce(?, schedule_runs.reason), job = coalesce(?, schedule_runs.job),"
        " session = coalesce(?, schedule_runs.session),"
        " delivered = coalesce(?, schedule_runs.delivered), at = excluded.at",
        (
            schedule_id,
            slot,
            int(extra),
            status,
            reason,
            job,
            session,
            _flag(delivered),
            time.time(),
            reason,
            job,
            session,
            _flag(delivered),
        ),
    )


def _record(
    conn: Conn,
    schedule_id: str,
    last_run: float,
    last_status: str,
    last_output: str | None,
    fail_streak: int | None,
) -> None:
    """A run's outcome onto its schedule: output and streak given None keep their value."""
    conn.execute(
        "UPDATE schedules SET last_run = ?, last_status = ?,"
        " last_output = coalesce(?, last_output),"
        " fail_streak = coalesce(?, fail_streak) WHERE id = ?",
        # A script's output and error are stored as the log is: redacted.
        (last_run, redact(last_status), redact_optional(last_output), fail_streak, schedule_id),
    )


def _insert_runs(conn: Conn, rows: Iterable[SlotRun]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT INTO schedule_runs(schedule, slot, extra, status, reason, job, session,"
        " delivered, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(schedule, slot, extra) DO NOTHING",
        [
            (
                r.schedule,
                r.slot,
                int(r.extra),
                r.status,
                r.reason,
                r.job,
                r.session,
                _flag(r.delivered),
                r.at or now,
            )
            for r in rows
        ],
    )
