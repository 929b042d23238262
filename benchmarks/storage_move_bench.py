"""`habakkuk storage migrate` on a big home: an SQLite home of N messages (with their
sessions, jobs and usage rows) moved into a fresh PostgreSQL database and back,
printing for each direction the rows, the time of the copy and of the verification,
and rows per second (issue 29, item 4).

The home is written with plain SQL into the stores' own SQLite tables (the messages'
triggers index them, as a turn's writes would); the moves are the command's service
(habakkuk.services.storage_move), so the figures are the command's less its printing.
The server is HABAKKUK_TEST_DATABASE_URL's (default the one .ci/run starts); the
database made for the run is dropped after.

    python benchmarks/storage_move_bench.py [--messages 100000] [--server URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from habakkuk.engine.home import Home
from habakkuk.engine.storage import SqliteStorage
from habakkuk.server.webstore import SCHEMA as WEB
from habakkuk.services.storage_move import (
    MoveReport,
    Progress,
    home_layout,
    move_to_postgres,
    move_to_sqlite,
    prepare,
)

DEFAULT_SERVER = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
PER_SESSION = 50


def build_home(root: Path, messages: int) -> None:
    """A home of `messages` messages in sessions of PER_SESSION, a job per ten
    messages and a usage row per ten."""
    home = Home(root)
    home.prepare()
    asyncio.run(prepare(SqliteStorage(home), home_layout(WEB)))
    now = time.time()
    transcripts = sqlite3.connect(root / "transcripts.db", isolation_level=None)
    control = sqlite3.connect(root / "control.db", isolation_level=None)
    usage = sqlite3.connect(root / "usage.db", isolation_level=None)
    try:
        transcripts.execute("BEGIN")
        for s in range(messages // PER_SESSION):
            session = f"ses_{s:08d}"
            transcripts.execute(
                "INSERT INTO sessions(id, agent, title, created_at, updated_at)"
                " VALUES (?, 'main', ?, ?, ?)",
                (session, f"session {s}", now, now + s),
            )
            transcripts.executemany(
                "INSERT INTO messages(session_id, seq, role, blocks, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        session,
                        n,
                        "user" if n % 2 == 0 else "assistant",
                        json.dumps([{"type": "text", "text": f"message {n} of {s}: tea é ✓"}]),
                        now + n,
                    )
                    for n in range(PER_SESSION)
                ],
            )
        transcripts.execute("COMMIT")
        control.executemany(
            "INSERT INTO jobs(id, kind, payload, status, created_at, updated_at)"
            " VALUES (?, 'turn', '{}', 'done', ?, ?)",
            [(f"job_{n}", now, now) for n in range(messages // 10)],
        )
        usage.executemany(
            "INSERT INTO calls(at, provider, model, agent, session, input_tokens,"
            " output_tokens) VALUES (?, 'mock', 'scripted', 'main', 'ses_0', ?, ?)",
            [(now + n, n, n // 2) for n in range(messages // 10)],
        )
    finally:
        transcripts.close()
        control.close()
        usage.close()


def timed(
    move: str, run: object, started: float, last: list[float]
) -> tuple[MoveReport, float, float]:
    """The report, the copy's seconds (to its last progress) and the verification's."""
    assert asyncio.iscoroutine(run)
    report = asyncio.run(run)
    ended = time.perf_counter()
    copy_end = last[0] if last else started
    if not report.ok:
        raise SystemExit(f"{move}: verification failed")
    return report, copy_end - started, ended - copy_end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument(
        "--server", default=os.environ.get("HABAKKUK_TEST_DATABASE_URL") or DEFAULT_SERVER
    )
    args = parser.parse_args()
    import psycopg

    name = f"hk_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    url = urlunsplit(urlsplit(args.server)._replace(path=f"/{name}"))
    layout = home_layout(WEB)
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder) / "home"
            started = time.perf_counter()
            build_home(root, args.messages)
            print(
                f"home of {args.messages:,} messages built in {time.perf_counter() - started:.1f} s"
            )
            for move in ("to PostgreSQL", "back to SQLite"):
                last: list[float] = []

                def seen(progress: Progress, last: list[float] = last) -> None:
                    last[:] = [time.perf_counter()]

                started = time.perf_counter()
                run = (
                    move_to_postgres(root, url, layout, on_progress=seen)
                    if move == "to PostgreSQL"
                    else move_to_sqlite(url, Path(folder) / "back", layout, on_progress=seen)
                )
                report, copy_s, verify_s = timed(move, run, started, last)
                rows = sum(check.target_rows for check in report.checks)
                print(
                    f"{move:<15} {rows:>10,} rows  copy {copy_s:6.1f} s"
                    f" ({rows / copy_s:>9,.0f} rows/s)  verify {verify_s:6.1f} s"
                    f" ({rows / verify_s:>9,.0f} rows/s)"
                )
    finally:
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
