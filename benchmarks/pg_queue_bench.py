"""The durable queue on PostgreSQL: which driver, and how we compare with PgQueuer.

Issue 29 asks to measure asyncpg and psycopg 3 (with its pool) on the queue before the
stores move onto PostgreSQL. Every run gets a fresh `jobs` table (the columns of our
queue, a partial index on the queued jobs) in one database made for this run
(`hk_bench_<random>`, dropped at the end), at the server's default durability
(synchronous_commit on: every commit waits for its WAL flush).

The three operations, each one transaction (BEGIN ... COMMIT, as a store function
`fn(conn)` runs), on the same SQL for every client:
- enqueue: INSERT (batched: `executemany` of 100 rows in one transaction);
- claim: UPDATE ... WHERE seq = (SELECT seq ... ORDER BY seq LIMIT 1 FOR UPDATE SKIP
  LOCKED) RETURNING ... (batched: up to 100 jobs in one UPDATE);
- complete: UPDATE by seq, fenced by the lease owner (batched: every job claimed).

The clients, each used from asyncio (one event loop per process, one connection each):
- asyncpg: an asyncpg pool (acquire, transaction, statement), the baseline of the ratios;
- asyncpg (no pool): one asyncpg connection (the pool resets each connection it gets
  back: one more round trip per transaction);
- psycopg async pool: psycopg 3's AsyncConnectionPool, AsyncConnection;
- psycopg sync (thread+queue): one psycopg 3 Connection owned by one thread; the loop
  hands it a whole transaction `fn(conn)` through a queue and awaits a future settled by
  `call_soon_threadsafe` (how our SQLite `Database` runs its stores), one hop per
  transaction;
- psycopg sync (pool+executor): psycopg 3's sync ConnectionPool, each transaction
  `fn(conn)` sent with `loop.run_in_executor` to a one-thread executor.

What is measured, in alternating rounds (each client in turn, the order rotated):
- one at a time, in turn: one process enqueues a job, claims it and completes it, each
  awaited before the next, M times;
- enqueue batched: one producer fills the table with N jobs, 100 per transaction;
- drain one at a time / drain batched: with the table filled first, P worker processes
  (1, 2 and 4) claim and complete concurrently, one job (or up to 100) per transaction,
  until none is left; jobs/s = N / the time from the go signal to the last worker done.
CPU per job is the client processes' CPU (every thread's) over the jobs: the server's
share is the same SQL for every client. The machine is shared: read the ratios.

Our queue: the real JobQueue and Pool (`--workers`: 8 slots per process, the turn
pool's width, and 100, the others' batch; the Pool's dispatcher completes the finished
jobs and claims as many as there are free slots in one transaction) on SQLite
(control.db in a temporary folder, WAL, synchronous NORMAL: the embedded default) and,
once the job queue has its PostgreSQL schema, on PostgreSQL (opened as the runtime opens
it on `storage.url`), with 1, 2 and 4 processes on one queue, in the batched drains.

PgQueuer (the baseline of the issue's target) runs on the same server at the same
durability (its default, every table logged), its schema installed by its own Queries
API in its own fresh database: a producer enqueues N jobs, 100 per `Queries.enqueue`,
then 1, 2 and 4 consumer processes (`QueueManager.run` in drain mode, an entrypoint that
returns at once) drain them, with batch_size 10 (its default) and 100 (ours). It runs
beside the batched drains, and their rows say how each does against its best.

Flows (ours and PgQueuer, the queues whose consumers wait for work): the 1, 2 or 4
worker processes are waiting (ours: the Pool started, its LISTEN in place on
PostgreSQL, polling every 50 ms on SQLite; PgQueuer: QueueManager in continuous mode)
when one producer process enqueues N jobs, 100 per call: jobs/s from the go signal to
the last job done, the CPU of all of them.

What it found (PostgreSQL 15, 2 cores under heavy shared load, median of 3-5 rounds):
every client is bound by the WAL flush, not by its driver: jobs/s are within noise of
each other except with 4 processes, where psycopg sync (thread+queue) drained 1.3-1.4x
asyncpg's pool batched and 2.5x one at a time. Client CPU per job: a bare asyncpg
connection is the leanest (0.6-0.8x the asyncpg pool's, which pays a reset round trip
per transaction), psycopg sync in a thread next (0.7-1.05x; 1.8-1.9x on `executemany`,
about 13 us against 7 per job), psycopg's AsyncConnectionPool the heaviest (1.05-1.4x,
2x on `executemany`). So the stores run on psycopg 3's sync connections on a database
thread, as on SQLite: the same `fn(conn)` transactions on both engines, no slower; its
price against a bare asyncpg connection (1-3 us a job more batched, 8 on `executemany`,
50-400 one at a time: a thread hop per transaction) stays under asyncpg's own pool's
one at a time, and small beside our Pool's own 25-130 us a job.

Usage: python benchmarks/pg_queue_bench.py [N] [--one M] [--rounds R] [--procs 1,2,4]
       [--url URL] [--clients A,B] [--pgqueuer-batch 10,100] [--skip-pgqueuer]
       [--workers 8,100] [--skip-ours] [--no-flow]
The URL defaults to $HABAKKUK_BENCH_DATABASE_URL, else $HABAKKUK_TEST_DATABASE_URL, else
postgresql://postgres:postgres@127.0.0.1:5432/postgres (a server database to connect to
for CREATE/DROP DATABASE; nothing is written into it). asyncpg, psycopg[binary,pool] and
pgqueuer: pip install -e '.[bench]'. A round takes about a minute on 2 idle cores and
3-4 under heavy load (`--no-flow`, `--skip-ours`, `--skip-pgqueuer`, `--clients`,
`--procs` make it shorter; the one-at-a-time runs wait for a WAL flush per commit).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import functools
import multiprocessing
import os
import queue
import re
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")

DEFAULT_URL = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
KIND = "bench"
LEASE_SECONDS = 60.0

SCHEMA = (
    "DROP TABLE IF EXISTS jobs",
    "CREATE TABLE jobs ("
    " seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, payload TEXT NOT NULL,"
    " status TEXT NOT NULL, run_after DOUBLE PRECISION NOT NULL,"
    " lease_owner TEXT, lease_until DOUBLE PRECISION, attempts INT NOT NULL DEFAULT 0,"
    " created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX jobs_queued ON jobs (seq) WHERE status = 'queued'",
)

# asyncpg's placeholders; `_pg` gives psycopg's (%s) for the same statement.
ENQUEUE = (
    "INSERT INTO jobs (id, kind, payload, status, run_after, attempts, created_at, updated_at)"
    " VALUES ($1, $2, $3, 'queued', $4, 0, $5, $6)"
)
CLAIM_ONE = (
    "UPDATE jobs SET status = 'running', lease_owner = $1, lease_until = $2,"
    " attempts = attempts + 1, updated_at = $3"
    " WHERE seq = (SELECT seq FROM jobs WHERE status = 'queued' AND run_after <= $4"
    " ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
    " RETURNING seq, id, kind, payload, attempts"
)
CLAIM_MANY = (
    "WITH next AS (SELECT seq FROM jobs WHERE status = 'queued' AND run_after <= $1"
    " ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED)"
    " UPDATE jobs SET status = 'running', lease_owner = $3, lease_until = $4,"
    " attempts = attempts + 1, updated_at = $5 FROM next WHERE jobs.seq = next.seq"
    " RETURNING jobs.seq, jobs.id, jobs.kind, jobs.payload, jobs.attempts"
)
COMPLETE_ONE = (
    "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_until = NULL,"
    " updated_at = $1 WHERE seq = $2 AND lease_owner = $3"
)
COMPLETE_MANY = (
    "UPDATE jobs SET status = 'done', lease_owner = NULL, lease_until = NULL,"
    " updated_at = $1 WHERE seq = ANY($2::bigint[]) AND lease_owner = $3"
)


def _pg(sql: str) -> str:
    """`sql` with psycopg's placeholders (every $n is used once, in order)."""
    numbers = [int(n) for n in re.findall(r"\$(\d+)", sql)]
    assert numbers == list(range(1, len(numbers) + 1)), sql
    return re.sub(r"\$\d+", "%s", sql)


Row = tuple[str, str, str, float, float, float]


def _rows(start: int, count: int) -> list[Row]:
    now = time.time()
    return [(f"job-{i}", KIND, f'{{"i": {i}}}', now, now, now) for i in range(start, start + count)]


def _claim_args(owner: str, limit: int) -> tuple[Any, ...]:
    now = time.time()
    if limit == 1:
        return (owner, now + LEASE_SECONDS, now, now)
    return (now, limit, owner, now + LEASE_SECONDS, now)


class Client(Protocol):
    """One connection's worth of queue operations, each one transaction."""

    async def open(self, url: str) -> None: ...

    async def close(self) -> None: ...

    async def enqueue(self, rows: Sequence[Row]) -> None: ...

    async def claim(self, owner: str, limit: int) -> list[int]: ...

    async def complete(self, owner: str, seqs: Sequence[int]) -> None: ...


class AsyncpgClient:
    """asyncpg: a pool of one connection, a transaction per operation. The pool resets
    a connection it gets back (`Connection.reset()`: one more round trip)."""

    async def open(self, url: str) -> None:
        import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no types

        self.pool = await asyncpg.create_pool(url, min_size=1, max_size=1)

    async def close(self) -> None:
        await self.pool.close()

    def acquire(self) -> Any:
        return self.pool.acquire()

    async def enqueue(self, rows: Sequence[Row]) -> None:
        async with self.acquire() as conn, conn.transaction():
            if len(rows) == 1:
                await conn.execute(ENQUEUE, *rows[0])
            else:
                await conn.executemany(ENQUEUE, rows)

    async def claim(self, owner: str, limit: int) -> list[int]:
        sql = CLAIM_ONE if limit == 1 else CLAIM_MANY
        async with self.acquire() as conn, conn.transaction():
            records = await conn.fetch(sql, *_claim_args(owner, limit))
        return [record[0] for record in records]

    async def complete(self, owner: str, seqs: Sequence[int]) -> None:
        async with self.acquire() as conn, conn.transaction():
            if len(seqs) == 1:
                status = await conn.execute(COMPLETE_ONE, time.time(), seqs[0], owner)
            else:
                status = await conn.execute(COMPLETE_MANY, time.time(), list(seqs), owner)
        _check_completed(int(status.rsplit(" ", 1)[1]), seqs)


class AsyncpgConnectionClient(AsyncpgClient):
    """asyncpg: one connection, no pool (the driver without the pool's reset)."""

    async def open(self, url: str) -> None:
        import asyncpg

        self.conn = await asyncpg.connect(url)

    async def close(self) -> None:
        await self.conn.close()

    def acquire(self) -> Any:
        return contextlib.nullcontext(self.conn)


class PsycopgAsyncClient:
    """psycopg 3: an AsyncConnectionPool of one connection, a transaction per operation."""

    async def open(self, url: str) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.pool = AsyncConnectionPool(
            url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False
        )
        await self.pool.open(wait=True)

    async def close(self) -> None:
        await self.pool.close()

    async def enqueue(self, rows: Sequence[Row]) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            cursor = conn.cursor()
            if len(rows) == 1:
                await cursor.execute(PG_ENQUEUE, rows[0])
            else:
                await cursor.executemany(PG_ENQUEUE, rows)

    async def claim(self, owner: str, limit: int) -> list[int]:
        sql = PG_CLAIM_ONE if limit == 1 else PG_CLAIM_MANY
        async with self.pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(sql, _claim_args(owner, limit))
            records = await cursor.fetchall()
        return [record[0] for record in records]

    async def complete(self, owner: str, seqs: Sequence[int]) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            if len(seqs) == 1:
                cursor = await conn.execute(PG_COMPLETE_ONE, (time.time(), seqs[0], owner))
            else:
                cursor = await conn.execute(PG_COMPLETE_MANY, (time.time(), list(seqs), owner))
        _check_completed(cursor.rowcount, seqs)


PG_ENQUEUE = _pg(ENQUEUE)
PG_CLAIM_ONE = _pg(CLAIM_ONE)
PG_CLAIM_MANY = _pg(CLAIM_MANY)
PG_COMPLETE_ONE = _pg(COMPLETE_ONE)
PG_COMPLETE_MANY = _pg(COMPLETE_MANY)


def _check_completed(count: int, seqs: Sequence[int]) -> None:
    if count != len(seqs):
        raise SystemExit(f"completed {count} of {len(seqs)} claimed jobs: a lease was lost")


# The store functions of the sync clients: each is a whole transaction's work on a
# psycopg Connection, run where the connection lives.


def _enqueue_sync(rows: Sequence[Row]) -> Callable[[Any], None]:
    def fn(conn: Any) -> None:
        cursor = conn.cursor()
        if len(rows) == 1:
            cursor.execute(PG_ENQUEUE, rows[0])
        else:
            cursor.executemany(PG_ENQUEUE, rows)

    return fn


def _claim_sync(owner: str, limit: int) -> Callable[[Any], list[int]]:
    sql = PG_CLAIM_ONE if limit == 1 else PG_CLAIM_MANY

    def fn(conn: Any) -> list[int]:
        return [record[0] for record in conn.execute(sql, _claim_args(owner, limit)).fetchall()]

    return fn


def _complete_sync(owner: str, seqs: Sequence[int]) -> Callable[[Any], int]:
    def fn(conn: Any) -> int:
        if len(seqs) == 1:
            cursor = conn.execute(PG_COMPLETE_ONE, (time.time(), seqs[0], owner))
        else:
            cursor = conn.execute(PG_COMPLETE_MANY, (time.time(), list(seqs), owner))
        return int(cursor.rowcount)

    return fn


class _SyncClient(ABC):
    """The operations of a sync client: each a transaction `fn(conn)` handed to `run`,
    which runs it where the client's connection lives."""

    @abstractmethod
    async def run(self, fn: Callable[[Any], T]) -> T: ...

    async def enqueue(self, rows: Sequence[Row]) -> None:
        await self.run(_enqueue_sync(rows))

    async def claim(self, owner: str, limit: int) -> list[int]:
        return await self.run(_claim_sync(owner, limit))

    async def complete(self, owner: str, seqs: Sequence[int]) -> None:
        _check_completed(await self.run(_complete_sync(owner, seqs)), seqs)


_Call = tuple[Callable[[Any], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class PsycopgThreadClient(_SyncClient):
    """psycopg 3 sync: one Connection owned by one thread; the loop hands it each
    transaction through a queue and awaits a future (our SQLite Database's pattern)."""

    async def open(self, url: str) -> None:
        import psycopg

        self.calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self.conn: psycopg.Connection[Any] = await asyncio.to_thread(
            functools.partial(psycopg.Connection.connect, url, autocommit=True)
        )
        self.thread = threading.Thread(target=self._serve, name="pg-bench", daemon=True)
        self.thread.start()

    async def close(self) -> None:
        self.calls.put(None)
        await asyncio.to_thread(self.thread.join)

    async def run(self, fn: Callable[[Any], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.calls.put((fn, loop, future))
        return await future

    def _serve(self) -> None:
        conn = self.conn
        while (call := self.calls.get()) is not None:
            fn, loop, future = call
            try:
                with conn.transaction():
                    value = fn(conn)
            except Exception as error:
                loop.call_soon_threadsafe(_settle, future, False, error)
            else:
                loop.call_soon_threadsafe(_settle, future, True, value)
        conn.close()


class PsycopgExecutorClient(_SyncClient):
    """psycopg 3 sync: a ConnectionPool of one connection, each transaction sent to a
    one-thread executor with `loop.run_in_executor`."""

    async def open(self, url: str) -> None:
        from psycopg_pool import ConnectionPool

        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pg-bench")
        self.pool = ConnectionPool(
            url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False
        )
        await asyncio.to_thread(self.pool.open, wait=True)

    async def close(self) -> None:
        await asyncio.to_thread(self.pool.close)
        self.executor.shutdown()

    async def run(self, fn: Callable[[Any], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self._transaction, fn)

    def _transaction(self, fn: Callable[[Any], T]) -> T:
        with self.pool.connection() as conn, conn.transaction():
            return fn(conn)


CLIENTS: dict[str, Callable[[], Client]] = {
    "asyncpg": AsyncpgClient,
    "asyncpg (no pool)": AsyncpgConnectionClient,
    "psycopg async pool": PsycopgAsyncClient,
    "psycopg sync (thread+queue)": PsycopgThreadClient,
    "psycopg sync (pool+executor)": PsycopgExecutorClient,
}
BASELINE = "asyncpg"


FORK = multiprocessing.get_context("fork")

# The process bodies. Each opens its client, waits at the barrier (so connecting and
# importing are not timed), works, and puts (jobs, CPU seconds) on `results`.


@dataclass(frozen=True)
class Work:
    """What one process does: `what` (fill, drain, in-turn) with `client` (one of
    CLIENTS, PgQueuer, or one of ours) on `url` (ours on SQLite: a folder)."""

    what: str
    client: str
    url: str
    # fill: the jobs to queue; in-turn: the jobs to cycle; drain: ours, the jobs all the
    # processes finish together (the others drain until none is left)
    count: int
    # jobs per transaction (1: one at a time; PgQueuer: batch_size); ours, draining: the
    # Pool's slots
    batch: int


def _process(work: Work, barrier: Any, results: Any, *shared: Any) -> None:
    if work.client.startswith(OURS):
        results.put(asyncio.run(_ours_work(work, barrier, *shared)))
    elif work.client.startswith(PGQUEUER):
        results.put(asyncio.run(_pgqueuer_work(work, barrier, *shared)))
    else:
        results.put(asyncio.run(_work(work, barrier)))


async def _work(work: Work, barrier: Any) -> tuple[int, float]:
    client = CLIENTS[work.client]()
    await client.open(work.url)
    owner = f"bench-{os.getpid()}"
    barrier.wait()  # every process connected: the clock starts
    cpu = time.process_time()
    done = 0
    if work.what == "fill":
        for start in range(0, work.count, work.batch):
            size = min(work.batch, work.count - start)
            await client.enqueue(_rows(start, size))
            done += size
    elif work.what == "in-turn":
        for i in range(work.count):
            await client.enqueue(_rows(i, 1))
            seqs = await client.claim(owner, 1)
            if len(seqs) != 1:
                raise SystemExit(f"{work.client}: claimed {len(seqs)} jobs, not 1")
            await client.complete(owner, seqs)
            done += 1
    else:
        while seqs := await client.claim(owner, work.batch):
            await client.complete(owner, seqs)
            done += len(seqs)
    cpu = time.process_time() - cpu
    await client.close()
    return done, cpu


def run_processes(works: Sequence[Work], shared: Sequence[Any] = ()) -> Result:
    """Run `works` in one process each (forked: no connection is open here; `shared`:
    more arguments, made by `FORK`), started together at a barrier once each is ready;
    the jobs done, the seconds from the barrier until the last one reported, and their
    CPU seconds."""
    barrier = FORK.Barrier(len(works) + 1)
    results = FORK.Queue()
    processes = [FORK.Process(target=_process, args=(w, barrier, results, *shared)) for w in works]
    for process in processes:
        process.start()
    try:
        barrier.wait(timeout=120)
        started = time.perf_counter()
        outcomes = [_outcome(results, processes) for _ in processes]
        elapsed = time.perf_counter() - started
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    failed = [p.exitcode for p in processes if p.exitcode]
    if failed:
        raise SystemExit(f"a benchmark process failed (exit codes {failed})")
    return Result(sum(o[0] for o in outcomes), elapsed, sum(o[1] for o in outcomes))


def _outcome(results: Any, processes: Sequence[Any]) -> tuple[int, float]:
    """The next process's (jobs, CPU seconds); exits if one died without reporting."""
    while True:
        try:
            outcome: tuple[int, float] = results.get(timeout=0.5)
        except queue.Empty:
            if any(p.exitcode for p in processes):
                raise SystemExit("a benchmark process failed (see above)") from None
            continue
        return outcome


@dataclass(frozen=True)
class Result:
    """One measured run: jobs done in `seconds`, using `cpu` CPU seconds in the clients."""

    jobs: int
    seconds: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.jobs * 1e6


# The database of the run.


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextlib.contextmanager
def bench_database(url: str, prefix: str = "hk_bench") -> Any:
    """A fresh database on the server of `url` for this run; its URL. Dropped after."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield _with_database(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def reset_table(url: str) -> None:
    """A fresh, empty `jobs` table (no dead rows left by the last run)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in SCHEMA:
            conn.execute(statement)


def count_done(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
    return int(row[0]) if row else 0


def server_settings(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        values = [
            conn.execute(f"SHOW {name}").fetchone()
            for name in ("server_version", "synchronous_commit", "fsync", "wal_sync_method")
        ]
    version, sync, fsync, method = (str(v[0]) if v else "?" for v in values)
    return f"PostgreSQL {version}, synchronous_commit={sync}, fsync={fsync} ({method})"


# One measurement of each kind.


def measure_in_turn(url: str, client: str, count: int) -> dict[str, Result]:
    """One process: enqueue, claim, complete, each awaited in turn, `count` times."""
    reset_table(url)
    result = run_processes([Work("in-turn", client, url, count, 1)])
    _check_done(url, result.jobs, count, client)
    return {IN_TURN: result}


def measure_drain(url: str, client: str, count: int, batch: int, procs: int) -> dict[str, Result]:
    """Fill the table with `count` jobs (the same client, `batch` per transaction), then
    drain it with `procs` worker processes claiming `batch` at a time. Batched, the fill
    is measured too."""
    reset_table(url)
    fill = run_processes([Work("fill", client, url, count, BATCHED)])
    if fill.jobs != count:
        raise SystemExit(f"{client}: queued {fill.jobs} of {count} jobs")
    drain = run_processes([Work("drain", client, url, 0, batch) for _ in range(procs)])
    _check_done(url, drain.jobs, count, client)
    if batch == 1:
        return {drain_kind(1, procs): drain}
    return {drain_kind(batch, procs): drain, enqueue_kind(batch): fill}


# Jobs per transaction of the batched runs (PgQueuer's enqueue calls too).
BATCHED = 100
IN_TURN = "one at a time, in turn (enqueue; claim; complete), 1 process"


def enqueue_kind(batch: int) -> str:
    return f"enqueue batched ({batch} per transaction), 1 process"


def drain_kind(batch: int, procs: int) -> str:
    if batch == 1:
        return f"drain one at a time (claim 1; complete 1), {procs} process(es)"
    return f"drain batched (claim <= {batch}; complete them; see above), {procs} process(es)"


def _check_done(url: str, reported: int, count: int, what: str) -> None:
    done = count_done(url)
    if reported != count or done != count:
        raise SystemExit(f"{what}: {reported} jobs reported and {done} done, of {count}")


# PgQueuer, through its own API: its schema (`Queries.install`, what `pgq install` runs),
# its batch enqueue (`Queries.enqueue` of lists: one INSERT ... SELECT unnest), and its
# worker (`QueueManager.run` in drain mode: it exits once the queue is empty and its jobs
# are done), over asyncpg connections as its documentation shows. A finished job leaves
# the queue table for the log table in batches (its JobStatusLogBuffer), as it ships.

PGQUEUER = "PgQueuer"
PGQ_ENTRYPOINT = "bench"


async def _pgqueuer_queries(url: str) -> tuple[Any, Any]:
    """An asyncpg connection (its driver does not close it) and PgQueuer's Queries on it."""
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(url)
    return conn, Queries(AsyncpgDriver(conn))


async def _pgqueuer_work(
    work: Work, barrier: Any, finished: Any = None, done_total: Any = None
) -> tuple[int, float]:
    """Fill (`Queries.enqueue`), drain (`QueueManager.run` in drain mode), or, in a flow
    (`finished` and `done_total` shared), consume in continuous mode until the processes
    have handled `work.count` jobs together."""
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.types import QueueExecutionMode

    conn, queries = await _pgqueuer_queries(work.url)
    manager = QueueManager(queries)
    done = 0

    @manager.entrypoint(PGQ_ENTRYPOINT)
    async def handle(job: Job) -> None:
        nonlocal done
        done += 1
        if done_total is not None:
            with done_total.get_lock():
                done_total.value += 1
                if done_total.value == work.count:
                    finished.set()

    async def stop_when_finished() -> None:
        await asyncio.to_thread(finished.wait)
        manager.shutdown.set()

    barrier.wait()
    cpu = time.process_time()
    if work.what in ("fill", "produce"):
        for start in range(0, work.count, BATCHED):
            size = min(BATCHED, work.count - start)
            payloads: list[bytes | None] = [b'{"i": %d}' % i for i in range(start, start + size)]
            await queries.enqueue([PGQ_ENTRYPOINT] * size, payloads, [0] * size)
        done = 0 if work.what == "produce" else work.count
    elif work.what == "flow":
        watcher = asyncio.create_task(stop_when_finished())
        await manager.run(batch_size=work.batch)
        await watcher
    else:
        await manager.run(batch_size=work.batch, mode=QueueExecutionMode.drain)
    cpu = time.process_time() - cpu
    await conn.close()
    return done, cpu


async def _pgqueuer_reset(url: str, *, install: bool = False) -> int:
    """Install PgQueuer's schema (`install`), or empty its queue and log tables; the
    jobs left in its queue table."""
    conn, queries = await _pgqueuer_queries(url)
    try:
        if install:
            await queries.install()
        else:
            await queries.clear_queue()
            await queries.clear_queue_log()
            await queries.clear_statistics_log()
        rows = await queries.driver.fetch("SELECT count(*) AS n FROM pgqueuer")
        return int(rows[0]["n"])
    finally:
        await conn.close()


def measure_pgqueuer(url: str, count: int, batch: int, procs: int) -> dict[str, Result]:
    """Fill PgQueuer's queue with `count` jobs (BATCHED per enqueue), then drain it with
    `procs` QueueManager processes dequeuing `batch` at a time."""
    asyncio.run(_pgqueuer_reset(url))
    fill = run_processes([Work("fill", PGQUEUER, url, count, BATCHED)])
    drain = run_processes([Work("drain", PGQUEUER, url, 0, batch) for _ in range(procs)])
    left = asyncio.run(_pgqueuer_reset(url))
    if fill.jobs != count or drain.jobs != count or left:
        raise SystemExit(
            f"PgQueuer: {fill.jobs} queued, {drain.jobs} handled, {left} left, of {count}"
        )
    return {drain_kind(BATCHED, procs): drain, enqueue_kind(BATCHED): fill}


# Ours: the real JobQueue and worker Pool (as benchmarks/queue_bench.py drives them) on
# the home's control database, a Pool of W slots per process (`--workers`: 8, the turn
# pool's width, and 100, the others' batch), its handler returning at once: its
# dispatcher completes the jobs finished since its last trip and claims as many as there
# are free slots, in one transaction. A producer fills the queue first (`enqueue_many`,
# 100 per call); the processes stop when, together, they have finished N jobs.

OURS = "ours ("


def ours_name(where: str, slots: int | None = None) -> str:
    """`ours (PostgreSQL JobQueue + Pool, 8 slots)`; without `slots`, the row of its
    enqueue (the same at any width)."""
    engine = "PostgreSQL" if _is_url(where) else "SQLite"
    return f"{OURS}{engine} JobQueue + Pool{f', {slots} slots' if slots else ''})"


def _is_url(where: str) -> bool:
    return where.startswith(("postgresql://", "postgres://"))


async def _open_queue(where: str) -> Any:
    """Our JobQueue on the control database: PostgreSQL when `where` is a URL (opened
    as the runtime opens it on that storage), else control.db in the folder `where`."""
    from habakkuk.engine.jobs import SCHEMA, JobQueue

    if _is_url(where):
        from habakkuk.engine.storage import PostgresStorage

        return JobQueue(await PostgresStorage(where).open(SCHEMA, inline=True))
    from pathlib import Path

    from habakkuk.engine.store import SqliteDatabase

    path = Path(where) / "control.db"
    return JobQueue(await SqliteDatabase.open(path, SCHEMA.sqlite, inline=True))


async def _ours_work(work: Work, barrier: Any, finished: Any, done_total: Any) -> tuple[int, float]:
    from habakkuk.engine.jobs import Job, Lease, NewJob
    from habakkuk.engine.pools import Pool

    # Each process a node of its own, as on several machines (leases name their host).
    os.environ["HABAKKUK_HOSTNAME"] = f"bench-node-{os.getpid()}"
    queue = await _open_queue(work.url)
    done = 0

    async def handler(lease: Lease) -> dict[str, Any]:
        return {"ok": True}

    def on_finished(_job: Job) -> None:
        nonlocal done
        done += 1
        with done_total.get_lock():
            done_total.value += 1
            if done_total.value == work.count:
                finished.set()

    if work.what in ("fill", "produce"):
        jobs = [NewJob(f"job-{i}", KIND, {"i": i}) for i in range(work.count)]
        barrier.wait()
        cpu = time.process_time()
        for start in range(0, work.count, BATCHED):
            await queue.enqueue_many(jobs[start : start + BATCHED])
        cpu = time.process_time() - cpu
        await queue.db.close()
        return (0 if work.what == "produce" else work.count), cpu
    # In a flow, the jobs come from another process: a Pool hears of them by PostgreSQL's
    # NOTIFY, or by polling (SQLite), every 50 ms here.
    poll = 0.05 if work.what == "flow" else 0.5
    pool = Pool(
        queue, [KIND], handler, concurrency=work.batch, poll_interval=poll, on_finished=on_finished
    )
    if work.what == "flow":  # waiting for work before the clock starts
        pool.start()
        # Until its LISTEN is in place, so the first enqueue wakes it (no event says so).
        while queue.db.dialect == "postgres" and not queue.hears_other_nodes():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    barrier.wait()
    cpu = time.process_time()
    pool.start()  # draining: the clock runs from its first claim
    await asyncio.to_thread(finished.wait)
    cpu = time.process_time() - cpu
    await pool.stop()
    await queue.db.close()
    return done, cpu


def measure_ours(where: str, count: int, slots: int, procs: int) -> dict[str, Result]:
    """Fill our queue at `where` (a folder: SQLite; a URL: PostgreSQL, its control
    schema dropped first) with `count` jobs, then drain it with `procs` processes, each
    a Pool of `slots` slots."""
    name = ours_name(where, slots)
    _reset_ours(where)
    fill = run_processes(
        [Work("fill", name, where, count, slots)], (FORK.Event(), FORK.Value("q", 0))
    )
    finished, done_total = FORK.Event(), FORK.Value("q", 0)
    drain = run_processes(
        [Work("drain", name, where, count, slots) for _ in range(procs)], (finished, done_total)
    )
    if fill.jobs != count or drain.jobs != count:
        raise SystemExit(f"{name}: {fill.jobs} queued and {drain.jobs} finished, of {count}")
    return {drain_kind(BATCHED, procs): drain, enqueue_kind(BATCHED): fill}


# A flow: the worker processes wait (ours: Pool started, its LISTEN in place; PgQueuer:
# QueueManager in continuous mode), then one producer process enqueues N jobs, 100 per
# call, while they work: jobs/s from the go signal to the last job done, CPU of them
# all. Only the queues with a consumer that waits for work run it.


def measure_flow(where: str, name: str, count: int, batch: int, procs: int) -> dict[str, Result]:
    """`procs` processes of `name` (ours at `where`, `batch` slots; PgQueuer, its
    batch_size) working while a producer enqueues `count` jobs."""
    if name.startswith(PGQUEUER):
        asyncio.run(_pgqueuer_reset(where))
    else:
        _reset_ours(where)
        run_processes([Work("fill", name, where, 0, batch)], (FORK.Event(), FORK.Value("q", 0)))
    finished, done_total = FORK.Event(), FORK.Value("q", 0)
    works = [Work("flow", name, where, count, batch) for _ in range(procs)]
    result = run_processes(
        [*works, Work("produce", name, where, count, batch)], (finished, done_total)
    )
    if result.jobs != count:
        raise SystemExit(f"{name}: {result.jobs} jobs done in the flow, of {count}")
    return {flow_kind(procs): result}


def flow_kind(procs: int) -> str:
    return f"flow: {procs} worker process(es) waiting, one producer (100 per call)"


def _reset_ours(where: str) -> None:
    """Our queue at `where` empty: PostgreSQL's control schema dropped, or the SQLite
    folder emptied."""
    if _is_url(where):
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS control CASCADE")
    else:
        for leftover in os.listdir(where):
            os.remove(os.path.join(where, leftover))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=5000, help="jobs batched")
    parser.add_argument("--one", type=int, default=100, help="jobs one at a time (default 100)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--procs", default="1,2,4", help="worker processes (default 1,2,4)")
    parser.add_argument("--url", default=_default_url())
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma-separated, of {', '.join(CLIENTS)}"
    )
    parser.add_argument(
        "--pgqueuer-batch",
        default="10,100",
        help="PgQueuer's batch_size, comma-separated (default 10 (its own default),100)",
    )
    parser.add_argument("--skip-pgqueuer", action="store_true")
    parser.add_argument(
        "--workers", default="8,100", help="our Pool's slots per process (default 8,100)"
    )
    parser.add_argument("--skip-ours", action="store_true", help="not our JobQueue + Pool")
    parser.add_argument(
        "--no-flow",
        dest="flow",
        action="store_false",
        help="not the flows (workers waiting while a producer enqueues)",
    )
    args = parser.parse_args()
    procs = [int(p) for p in args.procs.split(",")]
    clients = [c.strip() for c in args.clients.split(",")]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        raise SystemExit(f"pg_queue_bench: unknown client {unknown[0]!r}: one of {list(CLIENTS)}")
    pgqueuer_batches = (
        [] if args.skip_pgqueuer else [int(b) for b in args.pgqueuer_batch.split(",")]
    )
    _require("asyncpg", "psycopg", "psycopg_pool", *(["pgqueuer"] if pgqueuer_batches else []))
    figures: dict[tuple[str, str], list[Result]] = {}
    # A stopped run (timeout, kill) still drops its databases.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with (
            bench_database(args.url) as url,
            bench_database(args.url, "hk_bench_pgq") as pgqueuer_url,
            tempfile.TemporaryDirectory(prefix="hk-pg-queue-bench-") as sqlite_folder,
        ):
            settings = server_settings(url)
            print(settings, flush=True)
            if pgqueuer_batches:
                asyncio.run(_pgqueuer_reset(pgqueuer_url, install=True))
            ours = [] if args.skip_ours else _ours_systems(url, sqlite_folder)
            slots = [int(w) for w in args.workers.split(",")]
            steps = _steps(args, url, pgqueuer_url, clients, procs, pgqueuer_batches, ours, slots)
            for round_no in range(1, args.rounds + 1):
                for step in steps:
                    shift = round_no % len(step)
                    line: dict[str, list[str]] = {}
                    for name, run in step[shift:] + step[:shift]:  # who goes first changes
                        for kind, result in run().items():
                            label = enqueue_label(name) if kind == enqueue_kind(BATCHED) else name
                            figures.setdefault((kind, label), []).append(result)
                            line.setdefault(kind, []).append(f"{label} {result.rate:,.0f}")
                    for kind, parts in line.items():
                        print(f"round {round_no}: {kind}: " + " | ".join(parts), flush=True)
    except OSError as error:
        raise SystemExit(f"pg_queue_bench: cannot reach {args.url}: {error}") from None
    print(
        f"\n{settings}; N={args.count} jobs batched, M={args.one} one at a time,"
        f" median of {args.rounds} rounds; jobs/s, client CPU per job, and over {BASELINE}"
        " (and over PgQueuer's best, where it runs):"
    )
    kinds = [IN_TURN, enqueue_kind(BATCHED)]
    kinds += [drain_kind(batch, p) for batch in (1, BATCHED) for p in procs]
    kinds += [flow_kind(p) for p in procs]
    print_table(kinds, figures)


Run = Callable[[], dict[str, Result]]


def _steps(
    args: argparse.Namespace,
    url: str,
    pgqueuer_url: str,
    clients: Sequence[str],
    procs: Sequence[int],
    pgqueuer_batches: Sequence[int],
    ours: Sequence[str],
    slots: Sequence[int],
) -> list[list[tuple[str, Run]]]:
    """The runs of a round: each step is the systems measured back to back on one kind
    of run (named, each a run giving its results by kind)."""
    partial = functools.partial
    steps: list[list[tuple[str, Run]]] = [
        [(c, partial(measure_in_turn, url, c, args.one)) for c in clients]
    ]
    steps += [[(c, partial(measure_drain, url, c, args.one, 1, p)) for c in clients] for p in procs]
    for p in procs:
        step: list[tuple[str, Run]] = [
            (c, partial(measure_drain, url, c, args.count, BATCHED, p)) for c in clients
        ]
        step += [
            (
                f"PgQueuer (batch_size={b})",
                partial(measure_pgqueuer, pgqueuer_url, args.count, b, p),
            )
            for b in pgqueuer_batches
        ]
        step += [
            (ours_name(where, w), partial(measure_ours, where, args.count, w, p))
            for where in ours
            for w in slots
        ]
        steps.append(step)
    for p in procs if args.flow else ():
        flow: list[tuple[str, Run]] = [
            (name, partial(measure_flow, where, name, args.count, w, p))
            for where in ours
            for w in slots
            for name in [ours_name(where, w)]
        ]
        flow += [
            (name, partial(measure_flow, pgqueuer_url, name, args.count, b, p))
            for b in pgqueuer_batches
            for name in [f"{PGQUEUER} (batch_size={b})"]
        ]
        steps.append(flow)
    return steps


def _ours_systems(url: str, sqlite_folder: str) -> list[str]:
    """Where our queues are measured: SQLite (a folder) always; PostgreSQL (the URL)
    once the job queue has its PostgreSQL schema (engine/jobs.py's PG_MIGRATIONS)."""
    from habakkuk.engine.jobs import SCHEMA

    if SCHEMA.postgres:
        return [sqlite_folder, url]
    print(f"{ours_name(url)}: not measured: the job queue has no PostgreSQL schema here yet")
    return [sqlite_folder]


def enqueue_label(name: str) -> str:
    """The row of a system's enqueue: PgQueuer's and ours are the same at any batch_size
    or Pool width, so their runs make one row."""
    if name.startswith(PGQUEUER):
        return PGQUEUER
    return re.sub(r", \d+ slots\)$", ")", name)


def _default_url() -> str:
    """$HABAKKUK_BENCH_DATABASE_URL, else the tests' server ($HABAKKUK_TEST_DATABASE_URL),
    else the local one."""
    for name in ("HABAKKUK_BENCH_DATABASE_URL", "HABAKKUK_TEST_DATABASE_URL"):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    return DEFAULT_URL


def _require(*modules: str) -> None:
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            print(f"pg_queue_bench: missing {module}: pip install -e '.[bench]'", file=sys.stderr)
            raise SystemExit(2) from None


def print_table(kinds: Sequence[str], figures: dict[tuple[str, str], list[Result]]) -> None:
    """The medians by kind of run: jobs/s and client CPU per job, each over asyncpg's
    where it ran, and jobs/s over PgQueuer's best where PgQueuer ran."""
    names = list(dict.fromkeys(name for _, name in figures))
    width = max(len(n) for n in names) + 2
    print(f"  {'':<{width}} {'jobs/s':>9} {'CPU us/job':>11} {'x jobs/s':>9} {'x CPU':>7}")
    for kind in kinds:
        here = [n for n in names if (kind, n) in figures]
        if not here:
            continue
        print(kind)
        rates = {n: statistics.median(r.rate for r in figures[(kind, n)]) for n in here}
        cpus = {n: statistics.median(r.cpu_us for r in figures[(kind, n)]) for n in here}
        peers = [rates[n] for n in here if n.startswith(PGQUEUER)]
        for name in here:
            over = f"{'':>9} {'':>7}"  # the kinds asyncpg does not run
            if BASELINE in here:
                over = (
                    f"{rates[name] / rates[BASELINE]:>8.2f}x {cpus[name] / cpus[BASELINE]:>6.2f}x"
                )
            against = f" {rates[name] / max(peers):>6.2f}x PgQueuer" if peers else ""
            print(f"  {name:<{width}} {rates[name]:>9,.0f} {cpus[name]:>11,.1f} {over}{against}")


if __name__ == "__main__":
    main()
