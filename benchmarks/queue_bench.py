"""Our durable queue beside persist-queue and huey: enqueue + claim + complete per second.

Every queue gets the same N jobs on one SQLite file at the same durability (WAL,
synchronous NORMAL; set on their connections, whose defaults differ), in
alternating rounds, and the medians and ratios ours/theirs are printed.

- ours (Pool): the real worker pool (`Pool`, concurrency W, as the turn pool runs),
  its handler returning at once: a task per job, the pool's heartbeat, and its
  dispatcher, which completes every job finished since its last trip and claims as
  many as there are free slots in one transaction. The producer calls
  `JobQueue.enqueue` once per job, all at once.
- ours (Pool; enqueue_many): the same, the producer queueing 100 jobs per call.
- ours (W workers; complete_and_claim): W worker loops, each completing its job and
  claiming the next in one trip: how the pool worked before its dispatcher.
- persist-queue: SQLiteAckQueue(multithreading=True): a producer thread puts, a
  consumer thread gets and acks each item.
- huey: SqliteHuey: a producer thread enqueues a task, a consumer thread dequeues
  it, runs it and stores its result (what huey's consumer does).

Ours opens control.db as the runtime does (`SqliteDatabase.open(..., inline=True)`: the
connection of inline writes opened with it).

One at a time (the pattern the peers' own scripts use): one producer-consumer does
each operation in turn, waiting for each before the next, N times:
- ours: await enqueue; lease = await claim; await complete.
- persist-queue: put; get; ack.
- huey: enqueue a task; dequeue it; execute it (which stores its result).

Usage: python benchmarks/queue_bench.py [N] [--rounds R] [--workers W] [--one M]
The others are bench-only dependencies: pip install -e '.[bench]'
(or pip install persist-queue huey).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from habakkuk.engine.jobs import MIGRATIONS, JobQueue, Lease, NewJob
from habakkuk.engine.pools import Pool
from habakkuk.engine.store import SqliteDatabase

KIND = "bench"


async def _ours(folder: Path, count: int, workers: int) -> float:
    queue = JobQueue(await SqliteDatabase.open(folder / "control.db", MIGRATIONS, inline=True))
    done = 0
    wake = asyncio.Event()
    queue.add_listener(lambda kind: wake.set())

    async def worker() -> None:
        nonlocal done
        lease: Lease | None = None
        while done < count:
            if lease is None:
                wake.clear()  # before the claim, so an enqueue during it is not missed
                lease = await queue.claim([KIND])
                if lease is None:
                    await wake.wait()
                    continue
            finished, lease = await queue.complete_and_claim(lease, {"ok": True}, [KIND])
            assert finished
            done += 1
        wake.set()  # the last jobs are done: wake the workers that found none left
        if lease is not None:  # claimed past the end: give it back
            await queue.release(lease)

    started = time.perf_counter()
    producer = asyncio.gather(*[queue.enqueue(f"job-{i}", KIND, {"i": i}) for i in range(count)])
    await asyncio.gather(producer, *[worker() for _ in range(workers)])
    elapsed = time.perf_counter() - started
    await queue.db.close()
    return count / elapsed


async def _ours_pool(folder: Path, count: int, workers: int, *, chunk: int = 1) -> float:
    queue = JobQueue(await SqliteDatabase.open(folder / "control.db", MIGRATIONS, inline=True))
    finished = asyncio.Event()
    done = 0

    async def handler(lease: Lease) -> dict[str, Any]:
        return {"ok": True}

    def on_finished(_job: object) -> None:
        nonlocal done
        done += 1
        if done == count:
            finished.set()

    pool = Pool(queue, [KIND], handler, concurrency=workers, on_finished=on_finished)
    started = time.perf_counter()
    pool.start()
    if chunk == 1:
        await asyncio.gather(*[queue.enqueue(f"job-{i}", KIND, {"i": i}) for i in range(count)])
    else:
        jobs = [NewJob(f"job-{i}", KIND, {"i": i}) for i in range(count)]
        await asyncio.gather(
            *[queue.enqueue_many(jobs[i : i + chunk]) for i in range(0, count, chunk)]
        )
    await finished.wait()
    elapsed = time.perf_counter() - started
    await pool.stop()
    await queue.db.close()
    return count / elapsed


async def _ours_one(folder: Path, count: int) -> tuple[float, float]:
    queue = JobQueue(await SqliteDatabase.open(folder / "control.db", MIGRATIONS, inline=True))
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(count):
        await queue.enqueue(f"job-{i}", KIND, {"i": i})
        lease = await queue.claim([KIND])
        assert lease is not None
        await queue.complete(lease, {"ok": True})
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await queue.db.close()
    return count / elapsed, count / cpu


def _persist_queue_one(folder: Path, count: int) -> tuple[float, float]:
    from persistqueue import SQLiteAckQueue

    queue = SQLiteAckQueue(str(folder / "pq"), auto_commit=True)
    queue._putter.execute("PRAGMA synchronous = NORMAL")  # one connection without threads
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(count):
        queue.put({"i": i})
        queue.ack(queue.get(block=False))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert queue.acked_count() == count
    return count / elapsed, count / cpu


def _huey_one(folder: Path, count: int) -> tuple[float, float]:
    from huey import SqliteHuey

    huey = SqliteHuey(filename=str(folder / "huey.db"), results=True, journal_mode="wal")
    huey.storage.conn.execute("PRAGMA synchronous = NORMAL")

    @huey.task()
    def work(i: int) -> dict[str, bool]:
        return {"ok": True}

    started, cpu = time.perf_counter(), time.process_time()
    for i in range(count):
        result = work(i)
        task = huey.dequeue()
        assert task is not None
        huey.execute(task)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert result.get() == {"ok": True}
    huey.storage.close()
    return count / elapsed, count / cpu


def _threads(produce: Callable[[], None], consume: Callable[[], None]) -> float:
    started = time.perf_counter()
    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def _persist_queue(folder: Path, count: int) -> float:
    from persistqueue import SQLiteAckQueue

    queue = SQLiteAckQueue(str(folder / "pq"), multithreading=True, auto_commit=True)
    # Same durability as ours: WAL is its default, synchronous NORMAL is not.
    for conn in {id(c): c for c in (queue._getter, queue._putter)}.values():
        conn.execute("PRAGMA synchronous = NORMAL")

    def produce() -> None:
        for i in range(count):
            queue.put({"i": i})

    def consume() -> None:
        for _ in range(count):
            item = queue.get(block=True, timeout=30)
            queue.ack(item)

    elapsed = _threads(produce, consume)
    assert queue.acked_count() == count
    return count / elapsed


def _huey(folder: Path, count: int) -> float:
    from huey import SqliteHuey

    huey = SqliteHuey(filename=str(folder / "huey.db"), results=True, journal_mode="wal")
    huey.storage.conn.execute("PRAGMA synchronous = NORMAL")

    @huey.task()
    def work(i: int) -> dict[str, bool]:
        return {"ok": True}

    results: list[Any] = []

    def produce() -> None:
        for i in range(count):
            results.append(work(i))

    def consume() -> None:
        handled = 0
        while handled < count:
            task = huey.dequeue()
            if task is None:
                time.sleep(0.0005)  # huey's consumer polls too (far slower, by default)
                continue
            huey.execute(task)
            handled += 1

    elapsed = _threads(produce, consume)
    assert results[-1].get() == {"ok": True}
    huey.storage.close()
    return count / elapsed


def _missing() -> list[str]:
    missing = []
    for module, package in (("persistqueue", "persist-queue"), ("huey", "huey")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    return missing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    # As wide as the turn pool by default (workers.turns: 8): group commit joins the
    # completions of workers that finish together into one transaction.
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument(
        "--one", type=int, default=None, help="jobs in the one-at-a-time runs (default: N)"
    )
    args = parser.parse_args()
    missing = _missing()
    if missing:
        print(
            f"queue_bench: missing {', '.join(missing)}: install the bench extra"
            f" (pip install -e '.[bench]' or pip install {' '.join(missing)})",
            file=sys.stderr,
        )
        raise SystemExit(2)
    one = args.one if args.one is not None else args.count
    batched: dict[str, Callable[[Path], float]] = {
        "ours (Pool)": lambda d: asyncio.run(_ours_pool(d, args.count, args.workers)),
        "persist-queue": lambda d: _persist_queue(d, args.count),
        "huey": lambda d: _huey(d, args.count),
        "ours (Pool; enqueue_many)": lambda d: asyncio.run(
            _ours_pool(d, args.count, args.workers, chunk=100)
        ),
        f"ours ({args.workers} workers; complete_and_claim)": lambda d: asyncio.run(
            _ours(d, args.count, args.workers)
        ),
    }
    in_turn: dict[str, Callable[[Path], tuple[float, float]]] = {
        "ours": lambda d: asyncio.run(_ours_one(d, one)),
        "persist-queue": lambda d: _persist_queue_one(d, one),
        "huey": lambda d: _huey_one(d, one),
    }
    # Each run: jobs/s, and for the single-threaded ones also jobs per CPU second (the
    # process's CPU time, steadier than the clock on a machine others load).
    runs: dict[str, Callable[[Path], tuple[float, float | None]]] = {
        f"batched: {name}": functools.partial(_no_cpu, run) for name, run in batched.items()
    }
    runs |= {f"one at a time: {name}": run for name, run in in_turn.items()}
    figures: dict[str, list[float]] = {name: [] for name in runs}
    cpu_figures: dict[str, list[float]] = {}
    for round_no in range(1, args.rounds + 1):
        line = []
        for name, run in runs.items():  # alternating: one of each per round
            with tempfile.TemporaryDirectory() as tmp:
                rate, cpu_rate = run(Path(tmp))
            figures[name].append(rate)
            if cpu_rate is not None:
                cpu_figures.setdefault(name, []).append(cpu_rate)
            line.append(f"{name} {rate:,.0f}")
        print(f"round {round_no}: " + " | ".join(line) + " jobs/s", flush=True)
    medians = {name: statistics.median(rates) for name, rates in figures.items()}
    cpu_medians = {name: statistics.median(rates) for name, rates in cpu_figures.items()}
    width = max(len(name) for name in medians)
    sections = (
        ("batched", f"{args.count} jobs, all queued at once, W={args.workers}"),
        ("one at a time", f"{one} jobs, each operation awaited before the next"),
    )
    print(
        f"\nenqueue+claim+complete per second, one SQLite file, WAL + synchronous NORMAL,"
        f" median of {args.rounds} rounds:"
    )
    for section, what in sections:
        print(f"{section} ({what}):")
        _print_section(section, medians, width, "jobs/s")
        if any(name.startswith(section + ":") for name in cpu_medians):
            _print_section(section, cpu_medians, width, "jobs per CPU second")


def _no_cpu(run: Callable[[Path], float], folder: Path) -> tuple[float, None]:
    return run(folder), None


def _print_section(section: str, medians: dict[str, float], width: int, unit: str) -> None:
    """The medians of one section in `unit`, and ours over each peer."""
    mine = {n: r for n, r in medians.items() if n.startswith(section + ":")}
    for name, rate in mine.items():
        print(f"  {name:<{width}} {rate:>8,.0f} {unit}")
    pq, huey = mine[f"{section}: persist-queue"], mine[f"{section}: huey"]
    for name in (n for n in mine if n.startswith(f"{section}: ours")):
        print(
            f"  {name} / persist-queue = {mine[name] / pq:.2f}x,"
            f" / huey = {mine[name] / huey:.2f}x, / the best peer = "
            f"{mine[name] / max(pq, huey):.2f}x ({unit})"
        )


if __name__ == "__main__":
    main()
