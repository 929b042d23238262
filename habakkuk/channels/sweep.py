"""The reply sweep: replies a crash left unqueued, found by reading only new finished jobs.

The runtime queues a reply when a channel turn finishes; a crash between the turn's end
and that enqueue leaves a finished turn without a delivery, which the sweep (run when
channels start, and periodically) repairs. Queuing is idempotent by the reply's job id
(`reply:<turn id>`), so a turn the sweep and the runtime both see is replied to once.

What it costs follows the jobs finished since its last pass, not the jobs of the day:
- it reads finished jobs in (updated_at, seq) order through an index (`finished_time`),
  one status at a time (so the index gives the order and no sort reads the whole slice),
  at most `batch` rows per status per trip to the database thread;
- it keeps its place (`SweepMark`) between passes, and in control.db (`reply_sweep`)
  across restarts, so a restart reads from where the last process got to (never further
  back than SWEEP_WINDOW_SECONDS: older turns have nobody waiting);
- each pass starts again SWEEP_SLACK_SECONDS before the previous one began. A job is
  stamped with `time.time()` inside its write transaction, so commits come in stamp order;
  the slack covers what does not (a wall clock set back, a writer that stamps before it
  takes the lock): such a job is read by the next pass, not skipped. The price: each pass
  re-reads the jobs finished in the slack before it (a minute's turns, not a day's).
The place is saved after the replies of what it read are queued: a kill in between
reads those rows again, and queuing twice is a no-op.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from habakkuk.engine.jobs import FINISHED_SQL, JobQueue, finished_time
from habakkuk.engine.sql import Conn, Dialect

from .deliveries import REPLY_PREFIX, enqueue_reply
from .store import ChannelStore, SweepMark

FINISHED = ("done", "failed", "cancelled")
# Finished turns older than this are not swept for a missing reply (nobody waits any more).
SWEEP_WINDOW_SECONDS = 86400.0
# Rows per status per trip: one trip holds control.db's thread for a bounded time.
SWEEP_BATCH = 200
SWEEP_SLACK_SECONDS = 60.0

# One status's finished jobs after a place, in index order; `missing` says whether it is a
# channel turn without its reply job (the only rows the sweep then reads whole). Only the
# JSON lookup of the turn's reply address is said differently by each engine.
_REPLY_TO = {
    "sqlite": "json_extract(j.payload, '$.reply_to.to')",
    "postgres": "(j.payload::jsonb -> 'reply_to' ->> 'to')",
}


def _trip_sql(dialect: Dialect) -> str:
    # (updated_at, seq) as the engine's index of finished jobs holds them
    # (`finished_time`); the place's time alone once more, as a range of the index (a
    # pair of expressions compared as one is not).
    at, tie = finished_time(dialect, "j")
    return (
        f"SELECT j.seq, j.updated_at, j.id, j.kind = ? AND {_REPLY_TO[dialect]} IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM jobs d WHERE d.id = ? || j.id) AS missing"
        f" FROM jobs j WHERE j.status = ? AND j.{FINISHED_SQL} AND {at} >= ?"
        f" AND ({at}, {tie}) > (?, ?) ORDER BY {at}, {tie} LIMIT ?"
    )


@dataclass(frozen=True)
class SweepPass:
    """What one pass did: replies queued, finished-job rows read, trips to the database."""

    queued: int
    read: int
    trips: int


@dataclass(frozen=True)
class _Trip:
    missing: list[str]  # turn ids without a reply, in order
    read: int
    reached: SweepMark  # everything up to here has been looked at
    more: bool  # a status had a full batch: there may be more after `reached`


class ReplySweep:
    """The reply sweep of turn kind `turn_kind`, keeping its place between passes (and,
    given the channel `store`, across restarts)."""

    def __init__(
        self,
        queue: JobQueue,
        turn_kind: str,
        store: ChannelStore | None = None,
        *,
        batch: int = SWEEP_BATCH,
    ):
        self.queue = queue
        self.turn_kind = turn_kind
        self.store = store
        self.batch = batch
        self.mark: SweepMark | None = None  # None: not loaded yet

    async def run(self) -> SweepPass:
        """One pass: queue the replies finished channel turns lack, from the sweep's place
        on, in trips of at most `batch` rows per status."""
        started = time.time()
        mark = self.mark
        if mark is None and self.store is not None:
            mark = await self.store.sweep_mark(self.turn_kind)
        floor = SweepMark(started - SWEEP_WINDOW_SECONDS, 0)
        mark = floor if mark is None else max(mark, floor)
        queued = read = trips = 0
        while True:
            trip = await self.queue.db.run(self._trip(mark))
            trips += 1
            read += trip.read
            for turn_id in trip.missing:
                job = await self.queue.get(turn_id)
                if job is not None and await enqueue_reply(self.queue, job):
                    queued += 1
            mark = trip.reached
            if not trip.more:
                break
        # The next pass starts a little before this one began (see the module's doc).
        mark = min(mark, SweepMark(started - SWEEP_SLACK_SECONDS, 0))
        if mark != self.mark:
            self.mark = mark
            if self.store is not None:
                await self.store.save_sweep_mark(self.turn_kind, mark)
        return SweepPass(queued, read, trips)

    def _trip(self, after: SweepMark) -> Callable[[Conn], _Trip]:
        kind, batch = self.turn_kind, self.batch
        sql = _trip_sql(self.queue.db.dialect)

        def read(conn: Conn) -> _Trip:
            at = after.updated_at  # twice: the range's start, then the place's time
            rows: list[tuple[SweepMark, str, bool]] = []
            full: list[SweepMark] = []  # the last place of each status with a full batch
            for status in FINISHED:
                found = conn.execute(
                    sql,
                    (kind, REPLY_PREFIX, status, at, at, after.seq, batch),
                ).fetchall()
                marks = [(SweepMark(r[1], r[0]), str(r[2]), bool(r[3])) for r in found]
                rows.extend(marks)
                if len(found) == batch:
                    full.append(marks[-1][0])
            # A status with a full batch may have more after its last row: what has been
            # looked at in every status reaches the earliest such last row.
            rows.sort()
            reached = min(full) if full else (rows[-1][0] if rows else after)
            missing = [turn for place, turn, lacks in rows if lacks and place <= reached]
            return _Trip(missing, len(rows), reached, bool(full))

        return read


async def sweep_replies(queue: JobQueue, turn_kind: str) -> int:
    """One pass of a fresh sweep over the window (no place kept): replies queued."""
    return (await ReplySweep(queue, turn_kind).run()).queued
