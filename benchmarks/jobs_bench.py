"""Jobs: enqueue + claim + complete per second on one SQLite file (target >= 1,000/s).

Usage: python benchmarks/jobs_bench.py [N] [--workers W]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.store import SqliteDatabase


async def bench(count: int, workers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        queue = JobQueue(await SqliteDatabase.open(Path(tmp) / "control.db", MIGRATIONS))
        done = 0

        async def worker() -> None:
            nonlocal done
            while done < count:
                lease = await queue.claim(["bench"])
                if lease is None:
                    await asyncio.sleep(0)
                    continue
                await queue.complete(lease, {"ok": True})
                done += 1

        started = time.perf_counter()
        producer = asyncio.gather(
            *[queue.enqueue(f"job-{i}", "bench", {"i": i}) for i in range(count)]
        )
        await asyncio.gather(producer, *[worker() for _ in range(workers)])
        elapsed = time.perf_counter() - started
        await queue.db.close()
    print(
        f"jobs: {count} enqueue+claim+complete in {elapsed:.2f}s = {count / elapsed:,.0f} jobs/s"
        f" ({workers} workers, one control.db)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(bench(args.count, args.workers))
