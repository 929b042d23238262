"""The durable job queue (control.db): every piece of work is a job.

- `enqueue` is idempotent: the caller derives the ID from what caused the job.
- `claim` takes a lease (owner = host:pid:random); the worker heartbeats it.
- Writes a job makes elsewhere check the lease in the same transaction
  (`Lease.check`), so a worker that lost its lease cannot write.
- A serial key admits one running job at a time, oldest first.
- Failures retry with jittered exponential backoff up to `max_attempts`.
- A lease whose owner is a dead process on this host is taken at once;
  any other expired lease is taken when it runs out. Either way the crash used up
  that attempt: the job is queued again only while it has attempts left, else it
  fails with why ("the process running it died mid-run (attempt 5 of 5, none left)").
- A clean shutdown gives a running job back with its attempt (the next start
  resumes it at once), except for a kind declared at most once (`JobKind`): its
  jobs get one attempt, and one interrupted by a stop, a crash or a lost lease ends
  failed as interrupted and is never started again.

On PostgreSQL several processes on several machines share the queue (engine/pg.py): its
short writes run beside each other without the schema's writer lock, so each is safe on
its own: the claim skips the rows another claim holds (FOR UPDATE SKIP LOCKED), every
write of a running job names its lease owner (the fencing token), and a partial unique
index keeps one running job per serial key whoever claims it. An enqueue notifies every
node (`listen`), polling finding whatever a lost notification did not announce. A job
may belong to an agent (`agent`); a queue told which agents its process hosts claims
only theirs and those of none. Hosts are named by `hostname.this_host()`.

This module knows nothing about agents or turns: kinds and agents are names, and a
payload is the JSON of a value whose type the kind declares (`JobKind.payload`,
engine/payloads.py):
producers hand in that value, workers read it back with `payload_of`, and a payload that
does not parse fails its job for good with one line (`BadPayload`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import operator
import os
import random
import secrets
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

from habakkuk.engine.sql import Conn, Row, Schema

from . import compact_json
from .errors import LeaseLost
from .hostname import this_host
from .leases import process_alive
from .payloads import JsonObject, Payload, PayloadError, PayloadType, whole
from .redact import REDACTOR, redact, redact_optional
from .silent import SILENT
from .store import Database, Migration

if TYPE_CHECKING:
    from .pg_wakeups import Wakeups

log = logging.getLogger(__name__)

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]

# A job pinned to the process (its queue's lease owner text) whose client follows it
# live: the terminal's own turns stream into its chat and ask it for approvals, which
# no other node could do. Only that process claims it while it lives; a job taken back
# from a dead run, or still queued for a process that died, is unpinned (`_reap`), so a
# crash loses nothing. jobs_pinned holds the pinned jobs only: the reaper's look for
# pins to free reads it, and an unpinned job never writes it.
PIN_DDL = """
    ALTER TABLE jobs ADD COLUMN node TEXT NOT NULL DEFAULT '';
    CREATE INDEX jobs_pinned ON jobs(node) WHERE node != '';
"""
# A pinned job waiting this long while its process holds no live lease is freed for any
# node (the process is on another host, where its pid cannot be probed).
PIN_GRACE_SECONDS = 60.0

# jobs_state's columns after the status (SQLite, migration 7): a queued job's kind and
# run_after (the claim's order), any other job's updated_at and seq (the time order of
# the finished: the reply sweep, the failed list, retention; and of the running). A
# query names them as written here (`state_sql`) for SQLite to read through the index.
STATE_KEY = "CASE WHEN status = 'queued' THEN kind ELSE updated_at END"
STATE_ORDER = "CASE WHEN status = 'queued' THEN run_after ELSE seq END"


def state_sql(expression: str, table: str = "") -> str:
    """STATE_KEY or STATE_ORDER with its columns read from `table` (an alias, or '')."""
    if not table:
        return expression
    for column in ("status", "kind", "updated_at", "run_after", "seq"):
        expression = expression.replace(f" {column} ", f" {table}.{column} ")
    return expression


def finished_time(dialect: str, table: str = "") -> tuple[str, str]:
    """A finished job's (time, tiebreak) as a query on `dialect` says them to read
    finished jobs in that order through an index: on SQLite jobs_state's columns
    (STATE_KEY, STATE_ORDER), on PostgreSQL jobs_finished's (updated_at, then seq)."""
    if dialect == "postgres":
        prefix = f"{table}." if table else ""
        return f"{prefix}updated_at", f"{prefix}seq"
    return state_sql(STATE_KEY, table), state_sql(STATE_ORDER, table)


MIGRATIONS = [
    Migration(
        1,
        """
        CREATE TABLE jobs (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            serial_key TEXT NOT NULL DEFAULT '',
            payload TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL DEFAULT 'queued',
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 5,
            run_after REAL NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_until REAL,
            owner_host TEXT,
            owner_pid INTEGER,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            result TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX jobs_claim ON jobs(status, kind, run_after);
        CREATE INDEX jobs_serial ON jobs(serial_key, status);
        """,
    ),
    # Finished jobs by when: the reply sweep, the failed list and retention read a
    # recent (or old) slice of them, which otherwise meant reading every finished job.
    Migration(2, "CREATE INDEX jobs_finished ON jobs(status, updated_at);"),
    # Before this version a crash gave a job back whatever its attempts: one queued
    # with none left would run once more than its maximum (a script twice). Settled.
    Migration(
        3,
        """
        UPDATE jobs SET status = 'failed', lease_owner = NULL, lease_until = NULL,
            error = 'the process running it died mid-run (no attempts left)',
            updated_at = CAST(strftime('%s', 'now') AS REAL)
        WHERE status = 'queued' AND attempts > 0 AND attempts >= max_attempts;
        """,
    ),
    # Less written per job. Each enqueue, claim and complete wrote 4-6 pages: the row,
    # and every index whose columns it changed. Now:
    # - `seq` is a plain INTEGER PRIMARY KEY: AUTOINCREMENT wrote sqlite_sequence's row
    #   on every enqueue, only to promise a deleted job's seq is never reused. Nothing
    #   needs that: a new job still gets a seq above every job in the table (so `ORDER
    #   BY seq` is still enqueue order), and the reply sweep's place compares
    #   (updated_at, seq), where a job finished later sorts later whatever its seq.
    # - jobs_finished holds finished jobs only (what its readers ask for), so a job's
    #   enqueue and claim no longer write it; its readers say
    #   `status NOT IN ('queued', 'running')` (FINISHED_SQL) to use it. Not the three
    #   finished statuses: every write of a row evaluates the index's condition, and
    #   SQLite codes an IN of three or more values as a table built on each run (its
    #   own page cache: measured, up to 110 us and 50 page faults per claim), where two
    #   values are two comparisons.
    # - jobs_serial holds jobs with a serial key only, so a job without one never
    #   writes it; its readers say `serial_key != ''` to use it.
    Migration(
        4,
        """
        CREATE TABLE jobs_rebuilt (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            serial_key TEXT NOT NULL DEFAULT '',
            payload TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL DEFAULT 'queued',
            attempts INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 5,
            run_after REAL NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_until REAL,
            owner_host TEXT,
            owner_pid INTEGER,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            result TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        INSERT INTO jobs_rebuilt(seq, id, kind, serial_key, payload, status, attempts,
            max_attempts, run_after, lease_owner, lease_until, owner_host, owner_pid,
            cancel_requested, error, result, created_at, updated_at)
        SELECT seq, id, kind, serial_key, payload, status, attempts,
            max_attempts, run_after, lease_owner, lease_until, owner_host, owner_pid,
            cancel_requested, error, result, created_at, updated_at FROM jobs;
        DROP TABLE jobs;
        ALTER TABLE jobs_rebuilt RENAME TO jobs;
        CREATE INDEX jobs_claim ON jobs(status, kind, run_after);
        CREATE INDEX jobs_serial ON jobs(serial_key, status) WHERE serial_key != '';
        CREATE INDEX jobs_finished ON jobs(status, updated_at)
            WHERE status NOT IN ('queued', 'running');
        """,
    ),
    # The agent a job belongs to ('' for none): a process claims only the jobs of the
    # agents it hosts (`JobQueue(hosted_agents=...)`), so a turn runs where its agent's
    # files are.
    Migration(5, "ALTER TABLE jobs ADD COLUMN agent TEXT NOT NULL DEFAULT '';"),
    # The process a job must run in ('' for any): PINNED_SQL.
    Migration(6, PIN_DDL),
    # One index over every job where there were two (jobs_claim over all, jobs_finished
    # over the finished): jobs_state (STATE_KEY, STATE_ORDER). A complete moved a job's
    # entry within jobs_claim (one page) and added one to jobs_finished (another): now
    # it moves it within jobs_state, where a running job's entry and a just-finished
    # one's are on one page while few failed or queued jobs sort between them (the
    # statuses' order): a cycle of enqueue, claim and complete writes 7 pages, not 8
    # (each a WAL frame: two writes and a checksum of 4 KB). The claim order of the
    # queued and the time order of the others are both kept.
    Migration(
        7,
        f"""
        DROP INDEX jobs_claim;
        DROP INDEX jobs_finished;
        CREATE INDEX jobs_state ON jobs(status, {STATE_KEY}, {STATE_ORDER});
        """,
    ),
]

# PostgreSQL's own steps (engine/pg.py): numbered from 1, starting at the tables SQLite
# had reached when the port was made (same columns, same names, same meaning).
# - seq is BY DEFAULT, so `habakkuk storage migrate` can copy a home's seqs.
# - jobs_claim: the queued jobs of a kind in claim order, so a claim reads its first
#   runnable rows and stops (a pool's one kind: `kind = ?`).
# - jobs_serial_running: at most one running job per serial key, whoever claims it: two
#   nodes' claims that both found a key free cannot both start a job of it (the second
#   waits for the first's commit, then is refused and claims again).
# - jobs_running: the reaper's expired leases.
PG_MIGRATIONS: list[Migration] = [
    Migration(
        1,
        """
        CREATE TABLE jobs (
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            serial_key TEXT NOT NULL DEFAULT '',
            payload TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL DEFAULT 'queued',
            attempts BIGINT NOT NULL DEFAULT 0,
            max_attempts BIGINT NOT NULL DEFAULT 5,
            run_after DOUBLE PRECISION NOT NULL DEFAULT 0,
            lease_owner TEXT,
            lease_until DOUBLE PRECISION,
            owner_host TEXT,
            owner_pid BIGINT,
            cancel_requested BIGINT NOT NULL DEFAULT 0,
            error TEXT,
            result TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            agent TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX jobs_claim ON jobs(kind, run_after, seq) WHERE status = 'queued';
        CREATE INDEX jobs_serial ON jobs(serial_key, status) WHERE serial_key != '';
        CREATE UNIQUE INDEX jobs_serial_running ON jobs(serial_key)
            WHERE status = 'running' AND serial_key != '';
        CREATE INDEX jobs_running ON jobs(lease_until) WHERE status = 'running';
        CREATE INDEX jobs_finished ON jobs(status, updated_at)
            WHERE status NOT IN ('queued', 'running');
        """,
    ),
    Migration(2, PIN_DDL),
]

# The channel an enqueue on PostgreSQL notifies (its payload: the job's kind), so the
# pools of every node hear of it at once (`JobQueue.listen`).
WAKE_CHANNEL = "habakkuk_jobs"

SCHEMA = Schema("control", MIGRATIONS, PG_MIGRATIONS)

# The condition a query on finished jobs carries (besides its own) to read them through
# PostgreSQL's jobs_finished, the index of finished jobs only: a partial index is used
# only for a query whose WHERE holds its condition. (Queued and running are the statuses
# of an unfinished job: `JobStatus`.) On SQLite, whose jobs_state holds every job, it
# is a test of the rows read, and the time is said as `finished_time` says.
FINISHED_SQL = "status NOT IN ('queued', 'running')"

# The claim's RETURNING list, in this order: `Job.from_values` reads it by position
# (a Row looked up by name costs more than the claim's own SQL bookkeeping).
JOB_COLUMNS = (
    "id, kind, serial_key, payload, status, attempts, max_attempts, run_after,"
    " lease_owner, lease_until, cancel_requested, error, result, created_at, updated_at,"
    " agent"
)

# The claim's rows by (run_after, seq): the order its subquery picked them in.
_CLAIM_ORDER = operator.itemgetter(7, 16)

# json.dumps with separators, without its per-call layers (engine/compact_json.py).
_plain_json = compact_json.dumps


def _compact_json(value: Any) -> str:
    """A payload or result as stored: its texts through the redactor (a turn's message
    or reply holding a key is kept with [REDACTED] in its place), then compact JSON."""
    return _plain_json(REDACTOR.value(value))


REAP_INTERVAL = 1.0
# The most rows a queue write may touch and still run inline (on the event loop's
# thread, `Database.write(inline=True)`): a bigger batch goes to the database thread.
INLINE_ROWS = 16
BACKOFF_BASE_SECONDS = 2.0
BACKOFF_CAP_SECONDS = 300.0


def backoff_delay(
    attempt: int,
    *,
    base: float = BACKOFF_BASE_SECONDS,
    cap: float = BACKOFF_CAP_SECONDS,
    rng: random.Random | None = None,
) -> float:
    """Delay before retry number `attempt` (1-based): exponential, capped, jittered.

    The jitter ("equal jitter": half fixed, half random) spreads retries of many
    jobs that failed together without ever retrying at once.
    """
    ceiling = min(cap, base * (2.0 ** max(0, attempt - 1)))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


@dataclass(frozen=True)
class Owner:
    """Who holds a lease: this host, this process, and a random token per queue."""

    host: str
    pid: int
    token: str

    @classmethod
    def current(cls) -> Owner:
        """This process on this host (`hostname.this_host`), with a new token."""
        return cls(this_host(), os.getpid(), secrets.token_hex(4))

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.token}"


P = TypeVar("P")

# What a producer may hand the queue: the kind's payload value, or (tests, a row copied
# as it is stored) its JSON.
PayloadIn = Payload | Mapping[str, Any] | None


@dataclass
class Job:
    """A row of the jobs table. `payload` is the stored JSON: read it as its kind's type
    with `payload_of`, never by key."""

    id: str
    kind: str
    serial_key: str
    payload: JsonObject
    status: JobStatus
    attempts: int
    max_attempts: int
    run_after: float
    lease_owner: str | None
    lease_until: float | None
    cancel_requested: bool
    error: str | None
    result: dict[str, Any] | None
    created_at: float
    updated_at: float
    # The agent the job belongs to ('' for none): only a process hosting it claims it.
    agent: str = ""
    # The payload as its kind's value, once `payload_of` has read it: (kind, value).
    decoded: tuple[JobKind[Any], object] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_row(cls, row: Row) -> Job:
        return cls(
            id=row["id"],
            kind=row["kind"],
            serial_key=row["serial_key"],
            payload=json.loads(row["payload"]),
            status=row["status"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            run_after=row["run_after"],
            lease_owner=row["lease_owner"],
            lease_until=row["lease_until"],
            cancel_requested=bool(row["cancel_requested"]),
            error=row["error"],
            result=json.loads(row["result"]) if row["result"] else None,
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            agent=row["agent"],
        )

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Job:
        """A row selected as `JOB_COLUMNS` (and maybe more after them), by position."""
        (job_id, kind, serial_key, payload, status, attempts, max_attempts, run_after,
         owner, until, cancel, error, result, created_at, updated_at,
         agent) = values[:16]  # fmt: skip
        return cls(
            job_id,
            kind,
            serial_key,
            compact_json.loads(payload),
            status,
            attempts,
            max_attempts,
            run_after,
            owner,
            until,
            bool(cancel),
            error,
            compact_json.loads(result) if result else None,
            created_at,
            updated_at,
            agent,
        )

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "cancelled")


# How a job was interrupted: its worker stopped cleanly (a shutdown), its worker
# process died (found dead on this host), or its lease ran out unrenewed.
Interruption = Literal["stopped", "died", "lost"]

_CAUSES: dict[Interruption, str] = {
    "stopped": "a shutdown stopped it mid-run",
    "died": "the process running it died mid-run",
    "lost": "the process running it stopped renewing its lease mid-run",
}


@dataclass(frozen=True)
class Interrupted:
    """A job the queue ended for good because its worker stopped mid-run, as a kind's
    `on_interrupted` hears of it: `job` as it was claimed (status, attempts)."""

    job: Job
    cause: Interruption

    @property
    def reason(self) -> str:
        """Why it ended, in words: the job's error."""
        return interruption_reason(self.job, self.cause, final=True)


# A kind's own bookkeeping of an interrupted job, on control.db's connection (schema
# "main") inside the transaction that fails the job: both are written, or neither.
InterruptHook = Callable[[Conn, Interrupted], None]


@dataclass(frozen=True)
class JobKind(Generic[P]):
    """What a kind of job declares about itself, once, where the kind is defined
    (`declare_kind`); a kind never declared is an ordinary one with an untyped payload.
    A name ending in ":" declares the payload type of a family: every kind that starts
    with it (the deliveries' `delivery:<account>`); `at_most_once` and `on_interrupted`
    are read for kinds declared by their own name.

    `payload`: the type of its jobs' payload (engine/payloads.py): what `enqueue` takes
    and `payload_of` returns to the handler. A job whose stored payload does not parse
    fails for good (the pool), with one line: `noun`, the job id, the field and what is
    wrong ("turn turn_1f: session: missing").

    `at_most_once`: a job of this kind is never started twice (a script with side
    effects). Its jobs get one attempt whatever the enqueue asked, and once its handler
    has started, a clean shutdown, a dead worker or a lost lease ends it failed as
    interrupted, never queued again. An ordinary kind is given back on a clean shutdown
    (the next start resumes it) and queued again after a crash while attempts remain.

    `on_interrupted`: called when the queue itself, not the handler, ends one of its
    jobs for good because its worker stopped mid-run (the handler cannot record that:
    it is gone), inside that same transaction. It must be quick and must not assume the
    kind's tables exist yet; an error in it is logged and does not undo the job's end.
    """

    name: str
    at_most_once: bool = False
    on_interrupted: InterruptHook | None = None
    payload: PayloadType[P] | None = None
    noun: str = "job"


_KINDS: dict[str, JobKind[Any]] = {}


def declare_kind(kind: JobKind[P]) -> JobKind[P]:
    """Declare what a kind of job is (see `JobKind`); the module that defines the kind
    does it once, at import. Returns `kind`."""
    _KINDS[kind.name] = kind
    return kind


def declared_kinds() -> list[str]:
    """The names of every kind declared so far in this process, sorted (a family's name
    ends in ":")."""
    return sorted(_KINDS)


def declared_kind(name: str) -> JobKind[Any] | None:
    """What kind `name` declared (itself, or the family it belongs to), or None for an
    ordinary kind."""
    found = _KINDS.get(name)
    if found is None and ":" in name:
        found = _KINDS.get(name[: name.index(":") + 1])
    return found


class BadPayload(Exception):
    """A job's stored payload does not parse as its kind's type: the pool fails the job
    for good with this one line (the job, the field, what is wrong)."""


def payload_of(job: Job, kind: JobKind[P]) -> P:
    """`job`'s payload as `kind`'s type (parsed once per Job; later calls return it).

    BadPayload when it does not parse; TypeError when `job` is not of `kind`, or `kind`
    declares no payload type (a caller's mistake, not the data's)."""
    decoded = job.decoded
    if decoded is not None and decoded[0] is kind:
        # Stored just below, for this very kind: its value is a P.
        return cast(P, decoded[1])
    reader = kind.payload
    if reader is None or declared_kind(job.kind) is not kind:
        raise TypeError(f"job {job.id} is a {job.kind!r} job, not one of {kind.name!r}")
    try:
        value = reader.from_json(whole(job.payload))
    except PayloadError as exc:
        raise BadPayload(f"{kind.noun} {job.id}: {exc}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a reader's slip
        raise BadPayload(f"{kind.noun} {job.id}: {type(exc).__name__}: {exc}") from None
    job.decoded = (kind, value)
    return value


def decoded_payload(job: Job) -> object | None:
    """`job`'s payload as its declared kind's value; None for an ordinary kind or a
    payload that does not parse (for readers that only look: lists, events)."""
    kind = declared_kind(job.kind)
    if kind is None or kind.payload is None:
        return None
    try:
        value: object = payload_of(job, kind)
    except BadPayload:
        return None
    return value


def encode_payload(kind: str, payload: PayloadIn) -> str:
    """The stored JSON of a job's payload. A value of a kind that declares a payload
    class must be of that class (TypeError: a caller's mistake, caught at once)."""
    if payload is None:
        return "{}"
    if isinstance(payload, dict):  # JSON as stored (first: the cheapest test)
        return _compact_json(payload)
    if isinstance(payload, Mapping):
        return _compact_json(dict(payload))
    declared = declared_kind(kind)
    expected = declared.payload if declared is not None else None
    if isinstance(expected, type) and not isinstance(payload, expected):
        raise TypeError(
            f"a {kind!r} job carries a {expected.__name__}, not a {type(payload).__name__}"
        )
    return _compact_json(payload.to_json())


def at_most_once(kind: str) -> bool:
    """Whether jobs of `kind` are never started twice."""
    declared = _KINDS.get(kind)
    return declared is not None and declared.at_most_once


def attempts_left(job: Job) -> bool:
    """Whether `job` may run again after the attempt it is on now."""
    return job.attempts < job.max_attempts and not at_most_once(job.kind)


def interruption_reason(job: Job, cause: Interruption, *, final: bool) -> str:
    """The error of a job interrupted by `cause`: `final` when it ends there."""
    what = _CAUSES[cause]
    if at_most_once(job.kind):
        return f"{what}; not started again: it runs at most once"
    tally = f"attempt {job.attempts} of {job.max_attempts}"
    return f"{what} ({tally}, none left)" if final else f"{what} ({tally}); queued again"


@dataclass(frozen=True)
class NewJob:
    """A job to queue with `JobQueue.enqueue_many`."""

    id: str
    kind: str
    payload: PayloadIn
    serial_key: str = ""
    max_attempts: int = 5
    # The agent it belongs to ('' for none): only a process hosting it claims it.
    agent: str = ""


@dataclass
class Lease:
    """A claimed job. `check(conn)` is the lease-checked write guard."""

    job: Job
    owner: str
    lease_seconds: float
    stop_reason: str | None = field(default=None, compare=False)

    def check(self, conn: Conn, schema: str = "control") -> None:
        """Inside the caller's write transaction: confirm and extend the lease.

        `schema` is the name control.db is attached under on the caller's connection.

        Being an UPDATE, it takes control.db's write lock until the caller commits,
        so nobody can take the lease between this check and the guarded write.
        Raises LeaseLost when the job is no longer ours.
        """
        cursor = conn.execute(
            f"UPDATE {jobs_table(schema)} SET lease_until = ? "
            "WHERE id = ? AND lease_owner = ? AND status = 'running'",
            (time.time() + self.lease_seconds, self.job.id, self.owner),
        )
        if cursor.rowcount != 1:
            raise LeaseLost(f"job {self.job.id}: lease lost")


# Leases up to a number of jobs, inside the caller's write transaction; the flag says
# whether it may also reap (take back jobs of dead workers), when one is due.
Claimer = Callable[[Conn, int, bool], list[Job]]


class JobQueue:
    """The jobs table of control.db, shared by every process of one home (and, on
    PostgreSQL, by every node on the server).

    `hosted_agents`: the agents this process hosts (None: all of them); its claims take
    only the jobs of no agent or of one of these, so a turn runs where its agent's files
    are."""

    def __init__(
        self,
        db: Database,
        *,
        owner: Owner | None = None,
        lease_seconds: float = 30.0,
        hosted_agents: frozenset[str] | None = None,
    ):
        self.db = db
        self.owner = owner or Owner.current()
        self.lease_seconds = lease_seconds
        # Sorted once: the claim's parameters, the same every time.
        self._hosted = tuple(sorted(hosted_agents)) if hosted_agents is not None else None
        self._owner_text = str(self.owner)
        self._listeners: list[Any] = []
        # The pools listening for other nodes' enqueues (PostgreSQL), and the thread
        # that hears them while any does.
        self._listening = 0
        self._wakeups: Wakeups | None = None
        self._last_reap = 0.0
        self._claimers: dict[tuple[str, ...], Claimer] = {}
        self._enqueues: dict[
            asyncio.AbstractEventLoop, list[tuple[_Row, asyncio.Future[bool]]]
        ] = {}
        db.prepare_inline()  # its enqueue, claim, complete and heartbeat write inline

    # -- enqueue -----------------------------------------------------------------

    def enqueue(
        self,
        job_id: str,
        kind: str,
        payload: PayloadIn = None,
        *,
        serial_key: str = "",
        max_attempts: int = 5,
        delay: float = 0.0,
        agent: str = "",
    ) -> asyncio.Future[bool]:
        """Queue a job unless one with this ID exists; await it: True when it was new.
        `agent`: the agent it belongs to ('' for none), claimed only where hosted.

        The enqueues made in one pass of the event loop share one write (one INSERT
        each, one transaction, one trip to the database thread), so a burst of them
        costs about what one `enqueue_many` would. The outcome comes once committed.

        The first of a pass, when the database is free and the pass may run one more
        inline write (`Database.write_if_free`), is written inline at once: the future
        comes back done, so a caller enqueueing one job at a time pays no pass of the
        loop for it. The others of that pass are collected as above, so a burst still
        shares one write, and a task that only enqueues, awaiting each, still lets the
        others run every other job.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        # Encoded here, so a payload JSON cannot hold fails its own caller, at once.
        row = (
            job_id,
            kind,
            serial_key,
            encode_payload(kind, payload),
            max_attempts,
            delay,
            agent,
            "",
        )
        pending = self._enqueues.get(loop)
        if pending is None:
            # The first of a pass (`once`: the others of that pass are collected).
            insert = _inserter([row], self.db.dialect)
            outcome = self.db.write_if_free(insert, loop, once=self, one_statement=True)
            if outcome is not None:
                self._settle_enqueues([(row, future)], outcome)
                return future
        if pending is None:
            pending = self._enqueues[loop] = []
            loop.call_soon(self._write_enqueues, loop)
        pending.append((row, future))
        return future

    def _write_enqueues(self, loop: asyncio.AbstractEventLoop) -> None:
        """On `loop`: write the enqueues of the pass that just ran, in one trip (inline
        when there are few: see `INLINE_ROWS`)."""
        batch = self._enqueues.pop(loop, [])
        if not batch:
            return
        insert = _inserter([row for row, _ in batch], self.db.dialect)
        try:
            written = self.db.write_now(insert, inline=len(batch) <= INLINE_ROWS, shared=True)
        except Exception as exc:  # the database is closed
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        if written.done():
            self._written(batch, written)
        else:
            written.add_done_callback(functools.partial(self._written, batch))

    def _written(
        self,
        batch: list[tuple[_Row, asyncio.Future[bool]]],
        written: asyncio.Future[list[bool | Exception]],
    ) -> None:
        """`_settle_enqueues` once the write handed over is done (or cancelled: the loop
        is closing)."""
        if written.cancelled():
            for _, future in batch:
                future.cancel()
            return
        failed = written.exception()
        self._settle_enqueues(batch, (False, failed) if failed else (True, written.result()))

    def _settle_enqueues(
        self,
        batch: list[tuple[_Row, asyncio.Future[bool]]],
        written: tuple[bool, Any],
    ) -> None:
        """Each enqueue of `batch` hears its own outcome from `written` (True and the
        outcome of each row, or False and why the write failed); the pools hear of new
        jobs."""
        ok, outcomes = written
        if not ok:
            for _, future in batch:
                if not future.done():
                    future.set_exception(outcomes)
            return
        kinds: set[str] = set()
        for (row, future), outcome in zip(batch, outcomes, strict=True):
            if outcome is True:
                kinds.add(row[1])
            if future.done():
                continue  # its caller gave up waiting; the job is queued all the same
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        for kind in kinds:
            self._notify(kind)

    async def enqueue_many(self, jobs: Sequence[NewJob]) -> list[str]:
        """`enqueue` for several jobs in one transaction; the ids that were new."""

        rows = [
            (j.id, j.kind, j.serial_key, encode_payload(j.kind, j.payload), j.max_attempts, 0.0,
             j.agent, "")
            for j in jobs
        ]  # fmt: skip
        insert = _inserter(rows, self.db.dialect)

        def _insert(conn: Conn) -> list[str]:
            outcomes = insert(conn)
            for outcome in outcomes:
                if isinstance(outcome, Exception):
                    raise outcome  # one transaction: one row that fails fails them all
            return [row[0] for row, new in zip(rows, outcomes, strict=True) if new]

        created = (
            await self.db.write(_insert, inline=len(jobs) <= INLINE_ROWS, shared=True)
            if jobs
            else []
        )
        new = set(created)
        for kind in {job.kind for job in jobs if job.id in new}:
            self._notify(kind)
        return created

    def add_listener(self, callback: Any) -> None:
        """`callback(kind)` runs when this process enqueues a job (wakes idle pools),
        and, while `listen` is on (PostgreSQL), when any node does."""
        self._listeners.append(callback)

    def listen(self) -> None:
        """Hear other nodes' enqueues too (on the event loop's thread; a pool calls it as
        it starts, `unlisten` as it stops): on PostgreSQL, one connection of this queue
        LISTENs while any pool does, and each notification runs the listeners at once.
        Notifications can be lost (a dropped connection): the pools' polling still finds
        every job. On SQLite, nothing: the nodes of one home are processes of one machine
        whose pools poll a file."""
        self._listening += 1
        if self.db.dialect != "postgres" or self._wakeups is not None:
            return
        from .pg import PgDatabase
        from .pg_wakeups import Wakeups

        assert isinstance(self.db, PgDatabase)  # the only Database of dialect postgres
        self._wakeups = Wakeups(self.db.url, WAKE_CHANNEL, self._notify, asyncio.get_running_loop())
        self._wakeups.start()

    @property
    def node(self) -> str:
        """What pins a job to this process (`enqueue_in(node=...)`): its lease owner."""
        return self._owner_text

    def hears_other_nodes(self) -> bool:
        """Whether other nodes' enqueues reach this queue's listeners now (its LISTEN is
        in place: PostgreSQL, while a pool listens)."""
        wakeups = self._wakeups
        return wakeups is not None and wakeups.ready.is_set()

    async def unlisten(self) -> None:
        """Undo one `listen`; the last one stops the listening connection."""
        self._listening = max(0, self._listening - 1)
        wakeups = self._wakeups
        if self._listening == 0 and wakeups is not None:
            self._wakeups = None
            await wakeups.stop()

    def _notify(self, kind: str) -> None:
        for callback in self._listeners:
            callback(kind)

    # -- claim ---------------------------------------------------------------------

    async def claim(self, kinds: Sequence[str]) -> Lease | None:
        """Lease the oldest runnable job of `kinds`, or None."""
        _, leases = await self.settle_and_claim((), kinds, 1)
        return leases[0] if leases else None

    async def claim_many(self, kinds: Sequence[str], limit: int) -> list[Lease]:
        """Lease up to `limit` of the oldest runnable jobs of `kinds`, in one statement."""
        _, leases = await self.settle_and_claim((), kinds, limit)
        return leases

    async def complete_and_claim(
        self, lease: Lease, result: dict[str, Any] | None, kinds: Sequence[str]
    ) -> tuple[bool, Lease | None]:
        """`complete(lease, result)` then `claim(kinds)`, in one transaction (one hop).

        Returns (whether the previous job was ours to complete, the new lease or None).
        A lost lease on the previous job writes nothing to it and does not stop the
        claim: the caller learns both outcomes.
        """
        (finished,), leases = await self.settle_and_claim([(lease, result)], kinds, 1)
        return finished, leases[0] if leases else None

    async def settle_and_claim(
        self,
        done: Sequence[tuple[Lease, dict[str, Any] | None]],
        kinds: Sequence[str],
        limit: int,
        *,
        inline: bool = True,
    ) -> tuple[list[bool], list[Lease]]:
        """Complete each (lease, result) of `done`, then lease up to `limit` jobs of
        `kinds`: one transaction, one trip to the database thread.

        Returns whether each job of `done` was still ours to complete (a lost lease
        writes nothing to it and does not stop the rest), and the new leases.

        `inline=False` keeps it off the loop's thread even when small: for a caller
        with other work on the loop meanwhile (a pool with jobs running), whose
        transaction runs on the database thread beside that work, on another core.
        """
        claim = self._claimer(kinds)
        # Inline only when small and no reap is due: reaping probes processes and runs
        # the kinds' bookkeeping, which belongs on the database thread.
        reap = limit > 0 and time.time() - self._last_reap >= REAP_INTERVAL
        inline = inline and not reap and len(done) + limit <= INLINE_ROWS
        # A claim alone (`claim`, `claim_many`) builds no completer.
        finish = _completer(self.db.dialect, done) if done else None

        def _settle(conn: Conn) -> tuple[list[bool], list[Job]]:
            finished = finish(conn) if finish is not None else []
            return finished, claim(conn, limit, not inline) if limit > 0 else []

        try:
            finished, jobs = await self.db.write(_settle, inline=inline, shared=True)
        except sqlite3.IntegrityError:
            if self.db.dialect != "postgres":
                raise
            # Another node started a job of a serial key this claim found free, and
            # committed first (jobs_serial_running refused ours): nothing of this
            # transaction was written. Once more, now that its job shows as running.
            finished, jobs = await self.db.write(_settle, inline=inline, shared=True)
        if done:
            for (lease, _), ours in zip(done, finished, strict=True):
                if ours:
                    lease.job.status = "done"
        owner, seconds = self._owner_text, self.lease_seconds
        return finished, [Lease(job, owner, seconds) for job in jobs]

    def _claimer(self, kinds: Sequence[str]) -> Claimer:
        """The claim as a function of a connection already inside a write transaction
        (one per set of kinds, built once: a pool claims with the same kinds every time)."""
        key = tuple(kinds)
        claimer = self._claimers.get(key)
        if claimer is None:
            claimer = self._claimers[key] = self._new_claimer(key)
        return claimer

    def _new_claimer(self, kinds: tuple[str, ...]) -> Claimer:
        if self.db.dialect == "postgres":
            return self._new_pg_claimer(kinds)
        owner = self._owner_text
        host, pid = self.owner.host, self.owner.pid
        lease_seconds = self.lease_seconds
        hosted = self._hosted
        agents = len(hosted) if hosted is not None else None
        sql = claim_sql(len(kinds), agents)
        pick = pick_sql(len(kinds), agents)
        among = hosted or ()  # the agents' parameters, after the kinds and now

        def _claim(conn: Conn, limit: int, reap: bool) -> list[Job]:
            now = time.time()
            # Reaping scans running jobs and probes owner pids: once a second
            # is plenty, and it keeps a busy claim loop cheap.
            if reap and now - self._last_reap >= REAP_INTERVAL:
                self._last_reap = now
                _reap(conn, self.owner, now)
            until = now + lease_seconds
            if limit == 1:
                row = conn.execute(pick, (*kinds, now, owner, *among)).fetchone()
                if row is None:
                    return []
                conn.execute(LEASE_SQL, (owner, until, host, pid, now, row[16]))
                job = Job.from_values(row)  # as it was picked: now leased as below
                job.status, job.attempts, job.lease_owner = "running", job.attempts + 1, owner
                job.lease_until, job.updated_at = until, now
                return [job]
            # One statement: pick the oldest runnable jobs and lease them.
            rows = conn.execute(
                sql, (owner, until, host, pid, now, *kinds, now, owner, *among, limit)
            ).fetchall()
            if len(rows) > 1:
                # RETURNING follows no ORDER BY: oldest first again, as the claim chose.
                rows.sort(key=_CLAIM_ORDER)
            return [Job.from_values(row) for row in rows]

        return _claim

    def _new_pg_claimer(self, kinds: tuple[str, ...]) -> Claimer:
        """The claim on PostgreSQL: one statement for any number of jobs, whose pick
        skips the rows another node's claim holds (`pg_claim_sql`), so nodes claim
        side by side without waiting for each other."""
        owner = self._owner_text
        host, pid = self.owner.host, self.owner.pid
        lease_seconds = self.lease_seconds
        hosted = list(self._hosted) if self._hosted is not None else None
        sql = pg_claim_sql(len(kinds) == 1, hosted is not None)
        picked: tuple[Any, ...] = (kinds[0],) if len(kinds) == 1 else (list(kinds),)

        def _claim(conn: Conn, limit: int, reap: bool) -> list[Job]:
            now = time.time()
            if reap and now - self._last_reap >= REAP_INTERVAL:
                self._last_reap = now
                _reap(conn, self.owner, now)
            params = (*picked, now, owner, *((hosted,) if hosted is not None else ()), limit)
            rows = conn.execute(
                sql, (*params, owner, now + lease_seconds, host, pid, now)
            ).fetchall()
            if len(rows) > 1:
                rows.sort(key=_CLAIM_ORDER)
            return [Job.from_values(row) for row in rows]

        return _claim

    # -- while running ---------------------------------------------------------------

    async def heartbeat(self, lease: Lease) -> bool:
        """Extend the lease; False when it was lost. Also refreshes `cancel_requested`."""
        (owned,) = await self.heartbeat_many([lease])
        return owned

    async def heartbeat_many(self, leases: Sequence[Lease]) -> list[bool]:
        """`heartbeat` for several leases in one transaction (a pool beats all its jobs)."""

        def _beat(conn: Conn) -> list[bool | None]:
            now = time.time()
            if self.db.dialect == "postgres" and len(leases) > 1:
                return _beat_pg(conn, leases, now)
            beats: list[bool | None] = []
            for lease in leases:
                row = conn.execute(
                    "UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ?"
                    " AND status = 'running' RETURNING cancel_requested",
                    (now + lease.lease_seconds, lease.job.id, lease.owner),
                ).fetchone()
                beats.append(None if row is None else bool(row[0]))
            return beats

        beats = (
            await self.db.write(
                _beat,
                inline=len(leases) <= INLINE_ROWS,
                shared=True,
                one_statement=len(leases) == 1,  # one UPDATE
            )
            if leases
            else []
        )
        for lease, cancel in zip(leases, beats, strict=True):
            lease.job.cancel_requested = bool(cancel)
        return [cancel is not None for cancel in beats]

    async def complete(self, lease: Lease, result: dict[str, Any] | None = None) -> None:
        """Mark the job done (only if still ours)."""
        await self._finish(lease, "done", result=result)

    async def cancelled(self, lease: Lease, result: dict[str, Any] | None = None) -> None:
        """Mark the job cancelled after the worker stopped it cleanly."""
        await self._finish(lease, "cancelled", result=result)

    async def fail(self, lease: Lease, error: str, *, retry: bool = True) -> JobStatus:
        """Record a failure: back to the queue with backoff, or failed for good.

        Returns the job's new status.
        """
        job = lease.job
        error = redact(error)  # a provider's error body may quote the key it was sent
        if retry and attempts_left(job):
            delay = backoff_delay(job.attempts)

            def _requeue(conn: Conn) -> None:
                conn.execute(
                    "UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL,"
                    " run_after = ?, error = ?, updated_at = ? WHERE id = ? AND lease_owner = ?",
                    (time.time() + delay, error, time.time(), job.id, lease.owner),
                )

            await self.db.write(_requeue)
            lease.job.status = "queued"
            return "queued"
        await self._finish(lease, "failed", error=error)
        return "failed"

    async def release(self, lease: Lease) -> None:
        """Give the job back with its attempt (a clean shutdown, or a job claimed but
        never started): the next worker starts it at once. A job of an at-most-once kind
        whose handler started is never given back: see `interrupted`."""

        def _release(conn: Conn) -> None:
            # CASE, not max(0, ...): one spelling for both engines (PostgreSQL's max is
            # only an aggregate).
            # Unpinned: given back because this process stops, any node may run it.
            conn.execute(
                "UPDATE jobs SET status = 'queued',"
                " attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                " lease_owner = NULL, lease_until = NULL, node = '', updated_at = ?"
                " WHERE id = ? AND lease_owner = ? AND status = 'running'",
                (time.time(), lease.job.id, lease.owner),
            )

        await self.db.write(_release)

    async def interrupted(self, lease: Lease, cause: Interruption = "stopped") -> None:
        """End the job failed as interrupted by `cause`, with its kind's bookkeeping
        (`JobKind.on_interrupted`) in the same transaction: what a clean shutdown does to
        a job of an at-most-once kind whose handler had started. LeaseLost when the job
        is no longer ours (whoever took it recorded the interruption)."""
        job = lease.job
        reason = interruption_reason(job, cause, final=True)

        def _end(conn: Conn) -> bool:
            cursor = conn.execute(
                "UPDATE jobs SET status = 'failed', error = ?, lease_owner = NULL,"
                " lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?"
                " AND status = 'running'",
                (reason, time.time(), job.id, lease.owner),
            )
            if cursor.rowcount != 1:
                return False
            _tell_kind(conn, Interrupted(job, cause))
            return True

        if not await self.db.write(_end):
            raise LeaseLost(f"job {job.id}: lease lost before it was interrupted")
        lease.job.status = "failed"

    async def _finish(
        self,
        lease: Lease,
        status: JobStatus,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        finish = self._finisher(lease, status, result=result, error=error)
        if not await self.db.write(finish, inline=True, one_statement=True):
            raise LeaseLost(f"job {lease.job.id}: lease lost before it finished")
        lease.job.status = status

    @staticmethod
    def _finisher(
        lease: Lease, status: JobStatus, *, result: dict[str, Any] | None, error: str | None
    ) -> Callable[[Conn], bool]:
        """Settle the job if still ours, as a function of a connection in a transaction."""
        body = _compact_json(result) if result is not None else None
        error = redact_optional(error)
        job_id, owner = lease.job.id, lease.owner

        def _done(conn: Conn) -> bool:
            cursor = conn.execute(
                "UPDATE jobs SET status = ?, result = ?, error = ?, lease_owner = NULL,"
                " lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?"
                " AND status = 'running'",
                (status, body, error, time.time(), job_id, owner),
            )
            return cursor.rowcount == 1

        return _done

    # -- control -------------------------------------------------------------------

    async def cancel(self, job_id: str) -> JobStatus | None:
        """Stop a job: a queued one is cancelled now, a running one is asked to stop."""

        def _cancel(conn: Conn) -> JobStatus | None:
            # Each UPDATE states the status it changes: a claim (an inline write, which
            # on PostgreSQL runs beside this one) may start the job between statements.
            now = time.time()
            cancelled = conn.execute(
                "UPDATE jobs SET status = 'cancelled', updated_at = ?"
                " WHERE id = ? AND status = 'queued'",
                (now, job_id),
            )
            if cancelled.rowcount == 1:
                return "cancelled"
            conn.execute(
                "UPDATE jobs SET cancel_requested = 1, updated_at = ?"
                " WHERE id = ? AND status = 'running'",
                (now, job_id),
            )
            row = conn.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return None
            status: JobStatus = row["status"]  # only the queue writes the column
            return status

        return await self.db.write(_cancel)

    async def get(self, job_id: str) -> Job | None:
        row = await self.db.fetchone("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return Job.from_row(row) if row else None

    async def active_for(self, serial_key: str) -> list[Job]:
        """Queued or running jobs of one serial key (e.g. a session's turns), oldest first."""
        # Jobs with a serial key are read through jobs_serial (whose condition the
        # query must state); the jobs without one are in no index of their own.
        keyed = " AND serial_key != ''" if serial_key else ""
        rows = await self.db.fetchall(
            "SELECT * FROM jobs WHERE serial_key = ? AND status IN ('queued', 'running')"
            f"{keyed} ORDER BY seq",
            (serial_key,),
        )
        return [Job.from_row(r) for r in rows]

    async def depth(self) -> dict[tuple[str, str], int]:
        """Job counts by (kind, status) for queued and running jobs."""
        # Read through jobs_state (SQLite) or the table (PostgreSQL): on SQLite each
        # queued or running job's row is read for its kind (SQLite 3.40 reads no
        # expression of an index as a covering value).
        rows = await self.db.fetchall(
            "SELECT kind, status, count(*) FROM jobs WHERE status IN ('queued', 'running')"
            " GROUP BY kind, status"
        )
        return {(r[0], r[1]): r[2] for r in rows}

    async def upcoming(self, limit: int = 10, *, now: float | None = None) -> list[Job]:
        """Queued jobs that wait for a time (timed jobs, retries in backoff), soonest first."""
        rows = await self.db.fetchall(
            "SELECT * FROM jobs WHERE status = 'queued' AND run_after > ?"
            " ORDER BY run_after, seq LIMIT ?",
            (time.time() if now is None else now, limit),
        )
        return [Job.from_row(r) for r in rows]

    async def failed_count(self, kind_prefix: str, error_prefix: str, since: float) -> int:
        """Jobs of a kind starting `kind_prefix` that failed for good since `since` (epoch
        seconds) with an error starting `error_prefix`."""
        at, _ = finished_time(self.db.dialect)
        row = await self.db.fetchone(
            f"SELECT count(*) FROM jobs WHERE status = 'failed' AND {FINISHED_SQL}"
            f" AND {at} >= ?"
            " AND substr(kind, 1, ?) = ? AND substr(coalesce(error, ''), 1, ?) = ?",
            (since, len(kind_prefix), kind_prefix, len(error_prefix), error_prefix),
        )
        return int(row[0]) if row else 0

    async def recent_failures(self, limit: int = 10, *, errors_only: bool = False) -> list[Job]:
        """The newest jobs that failed for good. `errors_only` leaves out those whose error
        is not told as one (SILENT: a turn a budget paused), so a busy pause does not push
        the real errors out of a short list."""
        at, _ = finished_time(self.db.dialect)
        quiet = " AND substr(COALESCE(error, ''), 1, ?) != ?" if errors_only else ""
        rows = await self.db.fetchall(
            f"SELECT * FROM jobs WHERE status = 'failed' AND {FINISHED_SQL}{quiet}"
            f" ORDER BY {at} DESC LIMIT ?",
            (len(SILENT), SILENT, limit) if errors_only else (limit,),
        )
        return [Job.from_row(r) for r in rows]


# A job with a serial key is runnable only when it is its key's oldest queued job and
# none of the key's jobs runs (one turn per session at a time), on both engines.
SERIAL_FREE = """(j.serial_key = '' OR (
                NOT EXISTS (SELECT 1 FROM jobs r WHERE r.serial_key = j.serial_key
                              AND r.serial_key != '' AND r.status = 'running')
                AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.serial_key = j.serial_key
                              AND r.serial_key != '' AND r.status = 'queued'
                              AND r.seq < j.seq)))"""


def _runnable(kind_count: int, agent_count: int | None = None) -> str:
    """FROM and WHERE of the jobs of `kind_count` kinds that may start now (parameters:
    the kinds, now, this process's pin (`JobQueue.node`), then the `agent_count` agents
    hosted, when given: None takes every agent's jobs), oldest first; the table is `j`."""
    placeholders = ",".join("?" for _ in range(kind_count))
    agents = ""
    if agent_count is not None:
        agents = "\n          AND j.agent IN (" + ",".join(["''"] + ["?"] * agent_count) + ")"
    # A queued job's kind and run_after as jobs_state holds them (STATE_KEY, STATE_ORDER).
    kind, run_after = state_sql(STATE_KEY, "j"), state_sql(STATE_ORDER, "j")
    return f"""
        FROM jobs j
        WHERE j.status = 'queued' AND {kind} IN ({placeholders})
          AND {run_after} <= ? AND j.node IN ('', ?){agents}
          -- Of the jobs sharing a serial key only the oldest queued one qualifies, and
          -- only when none of them runs. Two NOT EXISTS, not one with an OR: each reads
          -- jobs_serial(serial_key, status) for its status alone, where the OR read
          -- every job the key ever had (`r.serial_key != ''`, true here, is the
          -- partial index's condition).
          AND {SERIAL_FREE}
        ORDER BY {run_after}, j.seq"""


@functools.lru_cache(maxsize=32)
def claim_sql(kind_count: int, agent_count: int | None = None) -> str:
    """The claim of several jobs of `kind_count` kinds in one statement, taking up to a
    number of jobs given as its last parameter (one text per count: sqlite3 caches it).
    The subquery runs once, before any row changes, so the serial-key rule holds among
    the jobs it takes together."""
    return f"""
        UPDATE jobs SET status = 'running', attempts = attempts + 1,
            lease_owner = ?, lease_until = ?, owner_host = ?, owner_pid = ?, updated_at = ?
        WHERE seq IN (SELECT j.seq {_runnable(kind_count, agent_count)} LIMIT ?)
        RETURNING {JOB_COLUMNS}, seq
        """


@functools.lru_cache(maxsize=32)
def pick_sql(kind_count: int, agent_count: int | None = None) -> str:
    """The claim of one job, first half: the oldest runnable job of `kind_count` kinds as
    `JOB_COLUMNS` and seq, which `LEASE_SQL` then leases by its seq in the same
    transaction. Two statements cost less than the one of `claim_sql`: RETURNING's rows
    always go through a table built on each run, and `seq IN (...)` another."""
    columns = ", ".join(f"j.{name.strip()}" for name in JOB_COLUMNS.split(","))
    return f"SELECT {columns}, j.seq {_runnable(kind_count, agent_count)} LIMIT 1"


@functools.lru_cache(maxsize=8)
def pg_claim_sql(one_kind: bool, agents: bool) -> str:
    """The claim on PostgreSQL, for any number of jobs. Parameters: the kind (`one_kind`)
    or the kinds as a list, now, this process's pin (`JobQueue.node`), the hosted agents
    as a list (`agents`), the limit; then owner, lease until, host, pid, now.

    The pick locks the rows it takes and skips those another transaction holds (FOR
    UPDATE SKIP LOCKED), so concurrent claims never wait for each other and never take
    one job twice: a row another claim leased and committed meanwhile is read again as
    it is now, and is no longer queued. The serial-key rule is read from the statement's
    snapshot; jobs_serial_running refuses the one case a snapshot can miss (two nodes
    each starting a job of one key), and `settle_and_claim` claims again."""
    kind = "j.kind = ?" if one_kind else "j.kind = ANY(?)"
    agent = " AND (j.agent = '' OR j.agent = ANY(?))" if agents else ""
    return f"""
        WITH picked AS (
            SELECT j.seq FROM jobs j
            WHERE j.status = 'queued' AND {kind} AND j.run_after <= ?
              AND (j.node = '' OR j.node = ?){agent}
              AND {SERIAL_FREE}
            ORDER BY j.run_after, j.seq
            LIMIT ?
            FOR UPDATE OF j SKIP LOCKED)
        UPDATE jobs SET status = 'running', attempts = attempts + 1,
            lease_owner = ?, lease_until = ?, owner_host = ?, owner_pid = ?, updated_at = ?
        FROM picked WHERE jobs.seq = picked.seq
        RETURNING {JOB_COLUMNS}, jobs.seq
        """


# Several jobs done at once on PostgreSQL, each only if still ours (parameters: now, then
# the ids, the lease owners and the results, as arrays); the ids it completed.
PG_COMPLETE_MANY = (
    "UPDATE jobs SET status = 'done', result = v.result, error = NULL, lease_owner = NULL,"
    " lease_until = NULL, updated_at = ?"
    " FROM unnest(?::text[], ?::text[], ?::text[]) AS v(id, owner, result)"
    " WHERE jobs.id = v.id AND jobs.lease_owner = v.owner AND jobs.status = 'running'"
    " RETURNING jobs.id"
)


def _completer(
    dialect: str, done: Sequence[tuple[Lease, dict[str, Any] | None]]
) -> Callable[[Conn], list[bool]]:
    """Complete each (lease, result) of `done` if still ours, as a function of a
    connection in a transaction: whether each was. On PostgreSQL several are one
    statement (each statement is a round trip to the server); on SQLite a statement
    costs no trip, and one each is the cheapest."""
    if dialect == "postgres" and len(done) > 1:
        ids = [lease.job.id for lease, _ in done]
        owners = [lease.owner for lease, _ in done]
        bodies = [_compact_json(r) if r is not None else None for _, r in done]

        def _complete_all(conn: Conn) -> list[bool]:
            rows = conn.execute(PG_COMPLETE_MANY, (time.time(), ids, owners, bodies))
            completed = {row[0] for row in rows.fetchall()}
            return [job_id in completed for job_id in ids]

        return _complete_all
    finishers = [JobQueue._finisher(lease, "done", result=r, error=None) for lease, r in done]
    return lambda conn: [finish(conn) for finish in finishers]


# Several leases extended at once on PostgreSQL, each only if still ours (parameters: the
# ids, the owners and the new lease ends, as arrays); the ids extended, with whether each
# was asked to stop.
PG_BEAT_MANY = (
    "UPDATE jobs SET lease_until = v.until"
    " FROM unnest(?::text[], ?::text[], ?::double precision[]) AS v(id, owner, until)"
    " WHERE jobs.id = v.id AND jobs.lease_owner = v.owner AND jobs.status = 'running'"
    " RETURNING jobs.id, jobs.cancel_requested"
)


def _beat_pg(conn: Conn, leases: Sequence[Lease], now: float) -> list[bool | None]:
    """`heartbeat_many`'s write in one statement: for each lease, None when it was lost,
    else whether its job was asked to stop."""
    ids = [lease.job.id for lease in leases]
    owners = [lease.owner for lease in leases]
    until = [now + lease.lease_seconds for lease in leases]
    rows = conn.execute(PG_BEAT_MANY, (ids, owners, until)).fetchall()
    beaten = {row[0]: bool(row[1]) for row in rows}
    return [beaten.get(job_id) for job_id in ids]


# The claim of one job, second half (see `pick_sql`): parameters owner, lease until,
# host, pid, now, seq.
LEASE_SQL = (
    "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_owner = ?,"
    " lease_until = ?, owner_host = ?, owner_pid = ?, updated_at = ? WHERE seq = ?"
)


# -- on a connection the caller holds ----------------------------------------------
# For a caller whose own transaction (on another database, control.db attached to it)
# should also enqueue or complete a job, so one trip to a database thread does both.


def enqueue_in(
    conn: Conn,
    job_id: str,
    kind: str,
    payload: PayloadIn = None,
    *,
    serial_key: str = "",
    max_attempts: int = 5,
    delay: float = 0.0,
    schema: str = "control",
    now: float | None = None,
    agent: str = "",
    node: str = "",
) -> bool:
    """Queue a job inside the caller's transaction, unless one with this ID exists (the
    jobs table of `schema`: "main" on control.db's own connection, "control" where it
    is attached); True when it was new. `agent`: the agent it belongs to ('' for
    none); `node`: the process that must run it (`JobQueue.node`; '' for any). After
    the commit, the caller wakes this process's pools with `enqueued(queue, kind)` (on
    PostgreSQL, every node's pools hear of it anyway)."""
    row = (
        job_id, kind, serial_key, encode_payload(kind, payload), max_attempts, delay, agent, node
    )  # fmt: skip
    return _insert_row(conn, row, time.time() if now is None else now, schema)


def jobs_table(schema: str) -> str:
    """The jobs table as a statement on a connection names it: unqualified on control's
    own connection (`schema` "main"; on PostgreSQL its search_path is control), else
    qualified by the name control is attached under (or, on PostgreSQL, its schema)."""
    return "jobs" if schema == "main" else f"{schema}.jobs"


def on_postgres(conn: Conn) -> bool:
    """Whether `conn` is a PostgreSQL connection (a function handed a connection by a
    caller of either engine picks its statement by this)."""
    return not isinstance(conn, sqlite3.Connection)


# (id, kind, serial key, payload as JSON, max attempts, delay in seconds, agent, node)
_Row = tuple[str, str, str, str, int, float, str, str]

_INSERT = (
    "INSERT INTO {table}(id, kind, serial_key, payload, max_attempts, run_after,"
    " created_at, updated_at, agent, node) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT(id) DO NOTHING"
)
# On PostgreSQL a new job also notifies every node listening (`JobQueue.listen`); the
# notification is delivered at commit, and not at all when the transaction rolls back.
_INSERT_NOTIFY = (
    "WITH added AS (" + _INSERT + " RETURNING kind)"
    f" SELECT pg_notify('{WAKE_CHANNEL}', kind) FROM added"
)


def _insert_row(conn: Conn, row: _Row, now: float, schema: str = "main") -> bool:
    """The one INSERT every enqueue runs; True when the id was new."""
    job_id, kind, serial_key, payload, max_attempts, delay, agent, node = row
    if max_attempts != 1 and at_most_once(kind):
        max_attempts = 1  # the kind's declaration wins over what the caller asked
    cursor = conn.execute(
        _insert_sql(on_postgres(conn), schema),
        (job_id, kind, serial_key, payload, max_attempts, now + delay, now, now, agent, node),
    )
    return cursor.rowcount == 1


@functools.cache
def _insert_sql(postgres: bool, schema: str) -> str:
    """`_insert_row`'s statement on an engine, for the jobs table of `schema` (formatted
    once: each enqueue runs it)."""
    return (_INSERT_NOTIFY if postgres else _INSERT).format(table=jobs_table(schema))


# Several jobs in one statement on PostgreSQL (each statement is a round trip); the
# parameters are arrays, one per column; the ids that were new, each notified.
_PG_INSERT_MANY = (
    "WITH added AS (INSERT INTO jobs(id, kind, serial_key, payload, max_attempts, run_after,"
    " created_at, updated_at, agent, node)"
    " SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[],"
    " ?::double precision[], ?::double precision[], ?::double precision[], ?::text[],"
    " ?::text[])"
    " ON CONFLICT(id) DO NOTHING RETURNING id, kind)"
    f" SELECT id, pg_notify('{WAKE_CHANNEL}', kind) FROM added"
)


def _insert_rows_pg(conn: Conn, rows: Sequence[_Row], now: float) -> list[bool]:
    """`_insert_row` for each of `rows` in one statement (PostgreSQL, control's own
    connection): whether each was new. An id twice in `rows` is new the first time."""
    columns: list[list[Any]] = [[] for _ in range(10)]
    for job_id, kind, serial_key, payload, max_attempts, delay, agent, node in rows:
        if max_attempts != 1 and at_most_once(kind):
            max_attempts = 1
        values = (
            job_id, kind, serial_key, payload, max_attempts, now + delay, now, now, agent, node
        )  # fmt: skip
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    added = {row[0] for row in conn.execute(_PG_INSERT_MANY, columns).fetchall()}
    outcomes = []
    for row in rows:
        outcomes.append(row[0] in added)
        added.discard(row[0])
    return outcomes


def _inserter(
    rows: Sequence[_Row], dialect: str = "sqlite"
) -> Callable[[Conn], list[bool | Exception]]:
    """The write of `enqueue`: the INSERT of each row in the caller's transaction, whether
    each was new, or (SQLite) the error of a row whose statement alone failed and left
    nothing. On PostgreSQL a failed statement aborts its transaction: the error is
    every row's."""

    def _insert(conn: Conn) -> list[bool | Exception]:
        now = time.time()
        if dialect == "postgres" and len(rows) > 1:
            return list(_insert_rows_pg(conn, rows, now))
        outcomes: list[bool | Exception] = []
        for row in rows:
            try:
                outcomes.append(_insert_row(conn, row, now))
            except sqlite3.Error as exc:
                if dialect == "postgres" or not conn.in_transaction:
                    raise  # the transaction is gone (disk full, I/O): every row failed
                outcomes.append(exc)  # this statement alone failed and left nothing
        return outcomes

    return _insert


def _reap(conn: Conn, owner: Owner, now: float) -> None:
    """Take back running jobs whose owner died on this host (`owner`'s) or whose lease expired:
    queued again while they have attempts left (the crash used one up), else failed
    as interrupted, with their kind's bookkeeping (`JobKind.on_interrupted`)."""
    pids = conn.execute(
        "SELECT DISTINCT owner_pid FROM jobs WHERE status = 'running' AND owner_host = ?"
        " AND owner_pid != ?",
        (owner.host, owner.pid),
    ).fetchall()
    for (pid,) in pids:
        if pid is not None and not process_alive(pid):
            rows = conn.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE status = 'running'"
                " AND owner_host = ? AND owner_pid = ?",
                (owner.host, pid),
            ).fetchall()
            _take_back(conn, [Job.from_values(r) for r in rows], "died", now)
    # Another host's job (or a live one's here) only once its lease ran out: its pid
    # means nothing on this machine.
    rows = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE status = 'running' AND lease_until < ?",
        (now,),
    ).fetchall()
    _take_back(conn, [Job.from_values(r) for r in rows], "lost", now)
    _free_pins(conn, owner, now)


def _free_pins(conn: Conn, owner: Owner, now: float) -> None:
    """Unpin the queued jobs of a process that is gone (not `owner`'s): dead, when it ran
    on this host; holding no live lease for PIN_GRACE_SECONDS since the job was queued,
    elsewhere."""
    mine = str(owner)
    pins = conn.execute(
        "SELECT node, MIN(created_at) FROM jobs WHERE node != '' AND status = 'queued'"
        " GROUP BY node"
    ).fetchall()
    for node, oldest in pins:
        if node == mine:
            continue
        host, _, rest = str(node).partition(":")
        pid = rest.partition(":")[0]
        if host == owner.host and pid.isdigit():
            gone = not process_alive(int(pid))
        else:
            live = conn.execute(
                "SELECT 1 FROM jobs WHERE status = 'running' AND lease_owner = ?"
                " AND lease_until >= ? LIMIT 1",
                (node, now),
            ).fetchone()
            gone = live is None and now - float(oldest) > PIN_GRACE_SECONDS
        if gone:
            conn.execute("UPDATE jobs SET node = '' WHERE node = ? AND status = 'queued'", (node,))


def _take_back(conn: Conn, jobs: Sequence[Job], cause: Interruption, now: float) -> None:
    """Running jobs whose worker is gone (`cause`): queued again while they have
    attempts left, else failed as interrupted and their kind told."""
    for job in jobs:
        if attempts_left(job):
            status, reason = "queued", interruption_reason(job, cause, final=False)
        else:
            status, reason = "failed", interruption_reason(job, cause, final=True)
        # Only while it is still the run that was found gone: on PostgreSQL its owner's
        # heartbeat (an inline write) may have renewed it since, and another node's
        # reaper may have taken it back first.
        taken = conn.execute(
            "UPDATE jobs SET status = ?, error = ?, lease_owner = NULL, lease_until = NULL,"
            " node = '', updated_at = ? WHERE id = ? AND status = 'running' AND lease_owner = ?"
            " AND (? = 1 OR lease_until < ?)",
            (status, reason, now, job.id, job.lease_owner, int(cause == "died"), now),
        )
        if taken.rowcount != 1:
            continue
        if status == "failed":
            log.warning("job %s: %s", job.id, reason)
            _tell_kind(conn, Interrupted(job, cause))


def _tell_kind(conn: Conn, interrupted: Interrupted) -> None:
    """Run the kind's `on_interrupted` inside the caller's transaction, in a savepoint:
    a hook that fails is logged and undone alone, never the job's end with it."""
    kind = _KINDS.get(interrupted.job.kind)
    if kind is None or kind.on_interrupted is None:
        return
    conn.execute("SAVEPOINT kind_hook")
    try:
        kind.on_interrupted(conn, interrupted)
    except Exception:
        log.exception("job %s: its kind could not record the interruption", interrupted.job.id)
        if not conn.in_transaction:
            raise  # the whole transaction is gone (disk full, I/O): nothing was written
        conn.execute("ROLLBACK TO kind_hook")
    conn.execute("RELEASE kind_hook")


def enqueued(queue: JobQueue, kind: str) -> None:
    """Tell `queue`'s listeners (the idle pools) that a job of `kind` was queued."""
    queue._notify(kind)


def complete_in(
    conn: Conn,
    lease: Lease,
    result: dict[str, Any] | None = None,
    *,
    schema: str = "control",
) -> None:
    """`JobQueue.complete` inside the caller's transaction (control.db attached as
    `schema`): the job is done with the write it commits with, or neither happens.
    LeaseLost (the transaction rolls back) when the job is no longer ours. After the
    commit the caller marks `lease.job.status = "done"`, so the pool does not complete
    it again."""
    body = _compact_json(result) if result is not None else None
    cursor = conn.execute(
        f"UPDATE {jobs_table(schema)} SET status = 'done', result = ?, error = NULL,"
        " lease_owner = NULL, lease_until = NULL, updated_at = ?"
        " WHERE id = ? AND lease_owner = ? AND status = 'running'",
        (body, time.time(), lease.job.id, lease.owner),
    )
    if cursor.rowcount != 1:
        raise LeaseLost(f"job {lease.job.id}: lease lost before it finished")
