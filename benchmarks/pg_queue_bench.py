"""The durable queue across worker processes: ours on PostgreSQL, ours on SQLite, PgQueuer.

Each system gets the same N jobs with W worker processes (1, 2, 4) at the same
durability (every commit flushed: PostgreSQL's synchronous_commit on, SQLite's WAL with
synchronous NORMAL as the runtime opens control.db), and the jobs/s from the first
enqueue to the last job done are printed side by side, with ours/PgQueuer.

- ours (PostgreSQL): each worker process is a node: its own `PgDatabase` of the control
  schema and a `Pool` (the turn pool's machinery: one dispatcher completing the jobs
  that finished and claiming as many as there are free slots in one transaction, FOR
  UPDATE SKIP LOCKED; woken by the enqueue's NOTIFY). The parent enqueues with
  `JobQueue.enqueue_many`, 100 jobs a call.
- ours (SQLite): the same pools, every process on one control.db file.
- PgQueuer: each worker process a `QueueManager` on an asyncpg connection, its
  entrypoint returning at once (batch_size 10, its default); the parent enqueues with
  `Queries.enqueue`, 100 jobs a call.

The handlers do nothing: this measures the queue. Two cores shared with other work give
ratios, not absolute figures.

Usage: python benchmarks/pg_queue_bench.py [N] [--workers 1,2,4] [--concurrency C]
       [--server postgresql://...]   (default: HABAKKUK_TEST_DATABASE_URL or the local one)
PgQueuer is a bench-only dependency: pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

KIND = "bench"
BATCH = 100
DEFAULT_SERVER = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
SYSTEMS = ("ours-pg", "ours-sqlite", "pgqueuer")


# -- the worker processes ---------------------------------------------------------------


async def _worker_ours(target: str, concurrency: int) -> None:
    from habakkuk.engine.jobs import MIGRATIONS, SCHEMA, JobQueue, Lease
    from habakkuk.engine.pools import Pool
    from habakkuk.engine.sql import Database

    db: Database
    if target.startswith("postgresql://"):
        from habakkuk.engine.storage import PostgresStorage

        db = await PostgresStorage(target).open(SCHEMA, inline=True)
    else:
        from habakkuk.engine.store import SqliteDatabase

        db = await SqliteDatabase.open(Path(target), MIGRATIONS, inline=True)

    async def handle(lease: Lease) -> dict[str, Any] | None:
        return None

    queue = JobQueue(db)
    pool = Pool(queue, [KIND], handle, concurrency=concurrency, poll_interval=0.05)
    pool.start()
    if db.dialect == "postgres":
        while True:  # its LISTEN in place: the parent's first enqueue wakes it
            if queue.hears_other_nodes():
                break
            await asyncio.sleep(0.01)
    print("ready", flush=True)
    await asyncio.Event().wait()  # until the parent ends the process


async def _worker_pgqueuer(target: str, concurrency: int) -> None:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.models import Job

    conn = await asyncpg.connect(target)
    manager = QueueManager(Queries(AsyncpgDriver(conn)))

    @manager.entrypoint(KIND)
    async def handle(job: Job) -> None:
        return None

    print("ready", flush=True)
    await manager.run(batch_size=10, max_concurrent_tasks=max(concurrency, 10) * 2)


# -- the parent -----------------------------------------------------------------------


def _database(server: str, name: str) -> str:
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def _create(server: str) -> str:
    import psycopg

    name = f"hk_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return _database(server, name)


def _drop(server: str, url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _producer_ours(target: str) -> tuple[Callable[[int], Awaitable[None]], Any, Any]:
    """(enqueue n jobs, count the done ones, close)."""
    from habakkuk.engine.jobs import MIGRATIONS, SCHEMA, JobQueue, NewJob
    from habakkuk.engine.sql import Database

    db: Database
    if target.startswith("postgresql://"):
        from habakkuk.engine.storage import PostgresStorage

        db = await PostgresStorage(target).open(SCHEMA, inline=True)
    else:
        from habakkuk.engine.store import SqliteDatabase

        db = await SqliteDatabase.open(Path(target), MIGRATIONS, inline=True)
    queue = JobQueue(db)
    sent = 0

    async def enqueue(count: int) -> None:
        nonlocal sent
        for start in range(0, count, BATCH):
            jobs = [NewJob(f"j{sent + i}", KIND, None) for i in range(min(BATCH, count - start))]
            sent += len(jobs)
            await queue.enqueue_many(jobs)

    async def done() -> int:
        row = await db.fetchone("SELECT count(*) FROM jobs WHERE status = 'done'")
        return int(row[0]) if row else 0

    return enqueue, done, db.close


async def _producer_pgqueuer(target: str) -> tuple[Callable[[int], Awaitable[None]], Any, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries

    conn = await asyncpg.connect(target)
    queries = Queries(AsyncpgDriver(conn))
    await queries.install()
    total = 0

    async def enqueue(count: int) -> None:
        nonlocal total
        for start in range(0, count, BATCH):
            size = min(BATCH, count - start)
            await queries.enqueue([KIND] * size, [None] * size, [0] * size)
            total += size

    async def done() -> int:
        left = await conn.fetchval("SELECT count(*) FROM pgqueuer")
        return total - int(left)

    return enqueue, done, conn.close


async def _prepare_ours(target: str) -> None:
    """Migrate the queue's tables before the workers open them together."""
    _, _, close = await _producer_ours(target)
    await close()


def _spawn(system: str, target: str, concurrency: int, host: str) -> subprocess.Popen[str]:
    """A worker process of `system` (a node of its own host name)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", system, target, "--concurrency", str(concurrency)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HABAKKUK_HOSTNAME": host},
    )


async def _run(system: str, target: str, count: int, workers: int, concurrency: int) -> float:
    """Jobs/s of `system` with `workers` worker processes, first enqueue to last done."""
    if system == "pgqueuer":
        producer = await _producer_pgqueuer(target)
    else:
        await _prepare_ours(target)
        producer = await _producer_ours(target)
    enqueue, done, close = producer
    procs = [_spawn(system, target, concurrency, f"bench-{n}") for n in range(workers)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = await asyncio.to_thread(proc.stdout.readline)
            if line.strip() != "ready":
                raise SystemExit(f"{system}: a worker did not start ({line.strip()!r})")
        started = time.perf_counter()
        await enqueue(count)
        while True:
            if await done() >= count:
                break
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - started
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
        await close()
    return count / elapsed


async def _main(args: argparse.Namespace) -> None:
    server = args.server or os.environ.get("HABAKKUK_TEST_DATABASE_URL") or DEFAULT_SERVER
    workers = [int(w) for w in args.workers.split(",")]
    try:
        import pgqueuer  # noqa: F401
    except ImportError:
        systems = [s for s in SYSTEMS if s != "pgqueuer"]
        print("PgQueuer is not installed (pip install -e '.[bench]'): ours only")
    else:
        systems = list(SYSTEMS)
    print(f"{args.count} jobs, handlers that return at once; jobs/s, first enqueue to last done")
    results: dict[tuple[str, int], float] = {}
    for count in workers:
        for system in systems:
            if system == "ours-sqlite":
                with tempfile.TemporaryDirectory() as folder:
                    target = str(Path(folder) / "control.db")
                    rate = await _run(system, target, args.count, count, args.concurrency)
            else:
                url = await asyncio.to_thread(_create, server)
                try:
                    rate = await _run(system, url, args.count, count, args.concurrency)
                finally:
                    await asyncio.to_thread(_drop, server, url)
            results[(system, count)] = rate
            print(f"  {system:<12} {count} worker process(es): {rate:8.0f} jobs/s", flush=True)
    print()
    print(f"{'workers':<8}" + "".join(f"{s:>14}" for s in systems) + "   ours-pg/PgQueuer")
    for count in workers:
        row = "".join(f"{results[(s, count)]:>14.0f}" for s in systems)
        ratio = ""
        if "pgqueuer" in systems:
            ratio = f"   {results[('ours-pg', count)] / results[('pgqueuer', count)]:.2f}x"
        print(f"{count:<8}{row}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=5000)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--server", default=None)
    parser.add_argument("--worker", nargs=2, metavar=("SYSTEM", "TARGET"))
    args = parser.parse_args()
    if args.worker:
        system, target = args.worker
        run = _worker_pgqueuer if system == "pgqueuer" else _worker_ours
        asyncio.run(run(target, args.concurrency))
        return
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
