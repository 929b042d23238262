"""Session search on PostgreSQL (tsvector, GIN) beside SQLite (FTS5), on the same messages.

Builds N messages (default 100,000; `--messages 1000000` for issue 29's figure) of
sentences drawn from big_home.py's 31 common words (each in about 45 % of the
messages), ten to a session, with a rare word planted in 40 messages spread over the
history and a rare phrase in one message near the start. The same rows go into
transcripts.db through its real migrations and triggers (FTS5) and into a PostgreSQL
database through its real migrations (the tsvector generated from the text, the GIN
index), loaded with COPY (the indexing trigger is switched off for the load and the
words written as it writes them), then analysed as autovacuum would.

Both are built once and reused: the SQLite file under --dir, the PostgreSQL database
`hk_search_bench_<N>` on --url (--rebuild builds both again). Each query runs through
the store's own search function (`search_messages` / `search_messages_pg`) on its
database thread, the engines alternating query by query so a shared machine's load
falls on both alike. Prints p50, p95 and the best (min) in ms per query for each engine
(on a machine other work shares, the best says what the query costs, the p50 what it
cost meanwhile: PostgreSQL's server is a process of its own, waiting for a core) and
the ratio PostgreSQL / SQLite of the p50s; the first row, "(one trip)", is no search at all but
one `SELECT 1` through the same database thread: the floor under each engine's figures
(a PostgreSQL query is a round trip to the server, an SQLite one a call in process).

Run: python benchmarks/pg_search_bench.py [--messages N] [--rounds R] [--url URL]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from big_home import WORDS

from habakkuk.engine.pg import PgDatabase
from habakkuk.engine.session_search import search_messages
from habakkuk.engine.session_search_pg import search_messages_pg
from habakkuk.engine.sessions import MIGRATIONS, SCHEMA
from habakkuk.engine.sql import Database
from habakkuk.engine.store import SqliteDatabase

SERVER = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
PER_SESSION = 10
RARE_WORD = "zephyr"
OLD_PHRASE = "quiet harbour lantern"
QUERIES = {
    "(one trip)": "",
    "common word": "garden",
    "two common words": "deploy backup",
    "rare word": RARE_WORD,
    "common phrase": '"garden tomato"',
    "old rare phrase": f'"{OLD_PHRASE}"',
}


def messages(count: int, seed: int = 29) -> Iterator[tuple[str, int, str, str, float]]:
    """(session, seq, role, text, created_at) for `count` messages, oldest first."""
    rng = random.Random(seed)
    plants = set(range(count // 80, count, max(1, count // 40)))
    start = time.time() - 365 * 86400
    for number in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40))).capitalize()
        if number == count // 100:
            text = f"{text} by the {OLD_PHRASE}"
        elif number in plants:
            text = f"{text} a {RARE_WORD} garden"
        session = f"ses_{number // PER_SESSION:012d}"
        role = "user" if number % 2 == 0 else "assistant"
        yield session, number % PER_SESSION, role, text, start + number


def blocks(text: str) -> str:
    return json.dumps([{"type": "text", "text": text}], separators=(",", ":"))


def build_sqlite(path: Path, count: int) -> None:
    """transcripts.db through its migrations, the messages written through its triggers."""
    SqliteDatabase.open_sync(path, MIGRATIONS).close_sync()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for session, seq, role, text, at in messages(count):
        if seq == 0:
            conn.execute(
                "INSERT INTO sessions(id, agent, created_at, updated_at) VALUES (?, 'main', ?, ?)",
                (session, at, at),
            )
        conn.execute(
            "INSERT INTO messages(session_id, seq, role, blocks, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (session, seq, role, blocks(text), at),
        )
    conn.execute("COMMIT")
    conn.execute("PRAGMA optimize")
    conn.close()


def database_url(server: str, name: str) -> str:
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def build_postgres(server: str, name: str, count: int) -> str:
    """A database `name` with the transcripts schema (its migrations), loaded by COPY."""
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    url = database_url(server, name)
    PgDatabase.open_sync(url, SCHEMA).close_sync()
    with psycopg.connect(url, options="-c search_path=transcripts") as conn:
        conn.execute("ALTER TABLE messages DISABLE TRIGGER messages_text_ai")
        with conn.cursor() as cur:
            with cur.copy("COPY sessions(id, agent, created_at, updated_at) FROM STDIN") as copy:
                for session, seq, _role, _text, at in messages(count):
                    if seq == 0:
                        copy.write_row((session, "main", at, at))
            with cur.copy(
                "COPY messages(id, session_id, seq, role, blocks, created_at) FROM STDIN"
            ) as copy:
                for number, (session, seq, role, text, at) in enumerate(messages(count), 1):
                    copy.write_row((number, session, seq, role, blocks(text), at))
            with cur.copy(
                "COPY message_text(message_id, session_id, seq, role, text) FROM STDIN"
            ) as copy:
                for number, (session, seq, role, text, _at) in enumerate(messages(count), 1):
                    copy.write_row((number, session, seq, role, text))
        conn.execute("ALTER TABLE messages ENABLE TRIGGER messages_text_ai")
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('messages', 'id'), max(id)) FROM messages"
        )
        conn.commit()
    with psycopg.connect(url, autocommit=True, options="-c search_path=transcripts") as conn:
        conn.execute("VACUUM ANALYZE sessions, messages, message_text")
    return url


def postgres_ready(server: str, name: str, count: int) -> bool:
    """Whether `name` exists and holds `count` messages (a finished build)."""
    try:
        with psycopg.connect(database_url(server, name), connect_timeout=3) as conn:
            row = conn.execute("SELECT count(*) FROM transcripts.message_text").fetchone()
    except psycopg.Error:
        return False
    return row is not None and row[0] == count


def round_trip(conn: Any, query: str) -> list[Any]:
    """No search: one statement's trip to the engine, the floor under every query."""
    return list(conn.execute("SELECT 1").fetchall())


def timed(db: Database, fn: Callable[..., Any], query: str) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    hits = db.run_sync(functools.partial(fn, query=query))
    return (time.perf_counter() - started) * 1000, hits


def hit_keys(hits: list[Any]) -> list[tuple[str, int]]:
    return [(hit.session, hit.seq) for hit in hits if hasattr(hit, "seq")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--url", default=SERVER, help="a PostgreSQL server (its maintenance db)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/hk_search_bench"))
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    count: int = args.messages
    path = args.dir / f"transcripts_{count}.db"
    name = f"hk_search_bench_{count}"
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.rebuild or not path.exists():
        path.unlink(missing_ok=True)
        started = time.perf_counter()
        build_sqlite(path, count)
        print(f"SQLite: {count:,} messages built in {time.perf_counter() - started:.1f} s")
    if args.rebuild or not postgres_ready(args.url, name, count):
        started = time.perf_counter()
        build_postgres(args.url, name, count)
        print(f"PostgreSQL: {count:,} messages built in {time.perf_counter() - started:.1f} s")
    sqlite_db = SqliteDatabase.open_sync(path, MIGRATIONS)
    pg_db = PgDatabase.open_sync(database_url(args.url, name), SCHEMA, threads=1)
    engines: list[tuple[str, Database, Callable[..., Any]]] = [
        ("sqlite", sqlite_db, search_messages),
        ("postgres", pg_db, search_messages_pg),
    ]

    def search_with(fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
        return round_trip if kind == "(one trip)" else fn

    times: dict[tuple[str, str], list[float]] = {}
    found: dict[tuple[str, str], list[Any]] = {}
    try:
        for kind, query in QUERIES.items():  # a warm-up: caches and plans
            for engine, db, fn in engines:
                found[kind, engine] = timed(db, search_with(fn, kind), query)[1]
        for round_number in range(args.rounds):
            for kind, query in QUERIES.items():
                order = engines if round_number % 2 == 0 else engines[::-1]
                for engine, db, fn in order:
                    spent = timed(db, search_with(fn, kind), query)[0]
                    times.setdefault((kind, engine), []).append(spent)
    finally:
        sqlite_db.close_sync()
        pg_db.close_sync()
    print(f"\nsession search on {count:,} messages, {args.rounds} rounds (ms per query)")
    different: list[str] = []
    print(
        f"{'query':<18} {'hits':>9} {'SQLite p50':>11} {'p95':>7} {'min':>6}"
        f" {'PG p50':>8} {'p95':>7} {'min':>6} {'PG/SQLite':>10}"
    )
    for kind, query in QUERIES.items():
        row = []
        for engine in ("sqlite", "postgres"):
            samples = sorted(times[kind, engine])
            row += [
                statistics.median(samples),
                samples[int(0.95 * (len(samples) - 1))],
                samples[0],
            ]
        both = (found[kind, "sqlite"], found[kind, "postgres"])
        hits = f"{len(both[0])}/{len(both[1])}"
        if hit_keys(both[0]) != hit_keys(both[1]):
            hits += "*"
            different.append(kind)
        print(
            f"{kind:<18} {hits:>9} {row[0]:>11.2f} {row[1]:>7.2f} {row[2]:>6.2f}"
            f" {row[3]:>8.2f} {row[4]:>7.2f} {row[5]:>6.2f} {row[3] / row[0]:>10.2f}   {query}"
        )
    print(
        "hits: SQLite/PostgreSQL; "
        + (f"* the hits differ: {', '.join(different)}" if different else "the same on both")
    )


if __name__ == "__main__":
    main()
