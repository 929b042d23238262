"""The queue's guarantees with pools in several real processes on one control.db."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from habakkuk.engine.jobs import MIGRATIONS, NewJob
from habakkuk.engine.store import SqliteDatabase
from tests.helpers import eventually_sync

# One worker process: a Pool of 4 over kind "k" until told to stop (its stdin closes).
# An optional third argument is how long every job works, in seconds. Each job writes
# "start ID PID" and "end ID PID" lines to the log (O_APPEND: lines of several processes
# never interleave), so the log is the order things happened in.
WORKER = """
import asyncio, os, sys
from pathlib import Path
from habakkuk.engine.jobs import MIGRATIONS, JobQueue
from habakkuk.engine.pools import Pool
from habakkuk.engine.store import SqliteDatabase

home, log = Path(sys.argv[1]), sys.argv[2]
pause = float(sys.argv[3]) if len(sys.argv) > 3 else None

def note(word, job):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{word} {job} {os.getpid()}\\n".encode())
    os.close(fd)

async def handler(lease):
    note("start", lease.job.id)
    await asyncio.sleep(pause if pause is not None else 0.002 if lease.job.serial_key else 0)
    note("end", lease.job.id)
    return {"by": os.getpid()}

async def main():
    queue = JobQueue(await SqliteDatabase.open(home / "control.db", MIGRATIONS), lease_seconds=60)
    pool = Pool(queue, ["k"], handler, concurrency=4, poll_interval=0.05)
    pool.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await pool.stop()
    await queue.db.close()

asyncio.run(main())
"""

KEYS = [f"session-{n}" for n in range(5)]


def jobs() -> list[NewJob]:
    free = [NewJob(f"free-{n:03}", "k", {}) for n in range(150)]
    serial = [NewJob(f"{key}-{n:02}", "k", {}, serial_key=key) for n in range(12) for key in KEYS]
    return free + serial


def queue_jobs(home: Path, new: list[NewJob]) -> None:
    db = SqliteDatabase.open_sync(home / "control.db", MIGRATIONS)
    try:
        db.run_sync(
            lambda conn: [
                conn.execute(
                    "INSERT INTO jobs(id, kind, serial_key, created_at, updated_at)"
                    " VALUES (?, ?, ?, 0, 0)",
                    (job.id, job.kind, job.serial_key),
                )
                for job in new
            ]
        )
    finally:
        db.close_sync()


def start_workers(
    home: Path, log: Path, count: int, *, pause: float | None = None
) -> list[subprocess.Popen[str]]:
    extra = [] if pause is None else [str(pause)]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(home), str(log), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        for _ in range(count)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    return workers


def stop_workers(workers: list[subprocess.Popen[str]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            assert worker.stdin is not None
            worker.stdin.close()
    for worker in workers:
        worker.wait(timeout=30)
        # Every pipe closed, a killed worker's too (an open one is a ResourceWarning).
        for pipe in (worker.stdin, worker.stdout):
            if pipe is not None:
                pipe.close()


def rows(home: Path) -> dict[str, tuple[str, int]]:
    conn = sqlite3.connect(home / "control.db")
    try:
        return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, status, attempts FROM jobs")}
    finally:
        conn.close()


def all_settled(home: Path) -> bool:
    return all(status in ("done", "failed", "cancelled") for status, _ in rows(home).values())


def lines(log: Path) -> list[tuple[str, str, int]]:
    out = []
    for line in log.read_text().splitlines():
        word, job, pid = line.split()
        out.append((word, job, int(pid)))
    return out


def test_pools_in_three_processes_run_every_job_once_and_a_serial_key_one_at_a_time(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    new = jobs()
    queue_jobs(tmp_path, [])  # the schema first, before the workers open it
    workers = start_workers(tmp_path, log, 3)
    try:
        queue_jobs(tmp_path, new)
        eventually_sync(lambda: all_settled(tmp_path), what="every job done", timeout=60)
    finally:
        stop_workers(workers)
    assert rows(tmp_path) == {job.id: ("done", 1) for job in new}
    happened = lines(log)
    starts = [job for word, job, _ in happened if word == "start"]
    assert sorted(starts) == sorted(job.id for job in new)  # each ran once, nothing lost
    assert len({pid for _, _, pid in happened}) > 1  # the processes shared the work
    for key in KEYS:
        mine = [(word, job) for word, job, _ in happened if job.startswith(key)]
        # One at a time and oldest first: start 00, end 00, start 01, end 01, ...
        expected = [(word, f"{key}-{n:02}") for n in range(12) for word in ("start", "end")]
        assert mine == expected, key


def test_a_worker_killed_mid_run_loses_nothing_its_jobs_run_again_elsewhere(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    new = jobs()
    queue_jobs(tmp_path, [])
    # The victim works alone, slowly (50 ms a job), and dies as soon as it is at work,
    # holding its four leases with some 200 jobs left; then the other two start and take
    # over. (Killed only once the others were up, it could finish every job first on a
    # loaded machine, and die holding none.)
    [victim] = start_workers(tmp_path, log, 1, pause=0.05)
    workers = [victim]
    try:
        queue_jobs(tmp_path, new)
        eventually_sync(lambda: log.exists() and lines(log), what="the victim at work")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        workers += start_workers(tmp_path, log, 2)
        eventually_sync(lambda: all_settled(tmp_path), what="every job done", timeout=60)
    finally:
        stop_workers(workers)
    settled = rows(tmp_path)
    assert {job: status for job, (status, _) in settled.items()} == {j.id: "done" for j in new}
    ended: dict[str, list[int]] = defaultdict(list)
    for word, job, pid in lines(log):
        if word == "end":
            ended[job].append(pid)
    for job, (_, attempts) in settled.items():
        # Finished by a live worker; run twice only when the killed one had it.
        assert any(pid != victim.pid for pid in ended[job]) or attempts == 1, job
    # Only the jobs the victim held when it died were claimed again: a pool of 4 holds at
    # most 4 leases. (It may die between claiming a job and logging its start, so the
    # log alone cannot name them.)
    again = sorted(job for job, (_, attempts) in settled.items() if attempts > 1)
    assert 1 <= len(again) <= 4, again
    started_twice = {
        job for job in again if sum(1 for w, j, _ in lines(log) if w == "start" and j == job) > 1
    }
    for job in started_twice:
        assert victim.pid in {pid for _, j, pid in lines(log) if j == job}, job


# A worker whose handler kills its own process, every time: a job that crashes whoever
# runs it. Kind "deadly" is ordinary; kind "deadly.once" is declared at most once.
KILLER = """
import asyncio, os, signal, sys
from pathlib import Path
from habakkuk.engine.jobs import MIGRATIONS, JobKind, JobQueue, declare_kind
from habakkuk.engine.pools import Pool
from habakkuk.engine.store import SqliteDatabase

home, log = Path(sys.argv[1]), sys.argv[2]
pause = float(sys.argv[3]) if len(sys.argv) > 3 else None
declare_kind(JobKind("deadly.once", at_most_once=True))

async def handler(lease):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"start {lease.job.id} {os.getpid()}\\n".encode())
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)

async def main():
    queue = JobQueue(await SqliteDatabase.open(home / "control.db", MIGRATIONS), lease_seconds=60)
    pool = Pool(queue, ["deadly", "deadly.once"], handler, poll_interval=0.05)
    pool.start()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await pool.stop()
    await queue.db.close()

asyncio.run(main())
"""


def queue_deadly(home: Path, job_id: str, kind: str, max_attempts: int) -> None:
    db = SqliteDatabase.open_sync(home / "control.db", MIGRATIONS)
    try:
        db.run_sync(
            lambda conn: conn.execute(
                "INSERT INTO jobs(id, kind, max_attempts, created_at, updated_at)"
                " VALUES (?, ?, ?, 0, 0)",
                (job_id, kind, max_attempts),
            )
        )
    finally:
        db.close_sync()


def job_row(home: Path, job_id: str) -> tuple[str, int, str | None]:
    conn = sqlite3.connect(home / "control.db")
    try:
        status, attempts, error = conn.execute(
            "SELECT status, attempts, error FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    finally:
        conn.close()
    return str(status), int(attempts), error


def workers_until_failed(home: Path, log: Path, job_id: str, most: int) -> int:
    """Start killer workers one after another, each once the last one died, until the
    job fails (at most `most` of them); how many were started."""
    for started in range(1, most + 1):
        worker = subprocess.Popen(
            [sys.executable, "-c", KILLER, str(home), str(log)],
            stdin=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )

        def died_or_failed(w: subprocess.Popen[str] = worker) -> bool:
            return w.poll() is not None or job_row(home, job_id)[0] == "failed"

        try:
            eventually_sync(
                died_or_failed,
                what="the worker to die or the job to fail",
                timeout=60,
            )
        finally:
            if worker.poll() is None:
                stop_workers([worker])
            elif worker.stdin is not None:
                worker.stdin.close()  # it died on its own: its pipe is still ours to close
        if job_row(home, job_id)[0] == "failed":
            return started
    return most + 1


def test_a_job_that_kills_its_worker_every_time_fails_after_its_attempts_with_why(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    queue_jobs(tmp_path, [])
    queue_deadly(tmp_path, "deadly-1", "deadly", max_attempts=3)
    # Three workers die running it; the fourth takes it back and ends it.
    assert workers_until_failed(tmp_path, log, "deadly-1", most=6) == 4
    assert job_row(tmp_path, "deadly-1") == (
        "failed",
        3,
        "the process running it died mid-run (attempt 3 of 3, none left)",
    )
    assert [job for word, job, _ in lines(log)] == ["deadly-1"] * 3


def test_an_at_most_once_job_whose_worker_died_is_never_started_again(tmp_path: Path) -> None:
    log = tmp_path / "log"
    queue_jobs(tmp_path, [])
    # Queued asking for five attempts, by a process that knows nothing of the kind.
    queue_deadly(tmp_path, "once-1", "deadly.once", max_attempts=5)
    assert workers_until_failed(tmp_path, log, "once-1", most=4) == 2
    assert job_row(tmp_path, "once-1") == (
        "failed",
        1,
        "the process running it died mid-run; not started again: it runs at most once",
    )
    assert [job for word, job, _ in lines(log)] == ["once-1"]
