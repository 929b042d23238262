"""Every statement the measured paths run, with its query plan: what grows with a big home.

Opens a home (a copy of it: the run adds sessions and jobs), then traces every SQL
statement on every database connection while it runs, in turn:

- turns: --turns turns on new sessions (the mock provider, the workers running);
- the sessions screen's read (the recent list, one page) and a session search;
- POST /v1/chat/completions and POST /api/chat (one request each, over loopback).

Prints, per path and database, each distinct statement (how many times it ran) with
its EXPLAIN QUERY PLAN, and marks the plans that read a whole table or index (SCAN) or
sort in a temporary b-tree: on a big home those are the costs that grow.

The tracing is here, in the benchmark: the product has no tracing code.

Usage: python benchmarks/scale_plans.py HOME [--turns N] [--all]
       (--all prints every plan, not only the flagged ones)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from habakkuk.engine import store

# The same home and settings as the benchmark whose paths these are.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import CONFIG, TOKEN

# A scan of these is bounded by the statement itself, not by the history.
BOUNDED_SCANS = re.compile(r"SCAN (json_each|CONSTANT ROW|\(subquery|[a-z_]*fts)", re.I)


class Tracer:
    """The statements every connection runs while `path` names what is being measured."""

    def __init__(self) -> None:
        self.path = ""
        self.seen: dict[str, Counter[tuple[str, str]]] = {}

    def attach(self, conn: sqlite3.Connection, database: str) -> None:
        def trace(sql: str) -> None:
            if self.path:
                self.seen.setdefault(self.path, Counter())[(database, sql.strip())] += 1

        conn.set_trace_callback(trace)


def _install(tracer: Tracer) -> None:
    original = store.connect

    def connect(path: Path, **kwargs: Any) -> sqlite3.Connection:
        conn = original(path, **kwargs)
        tracer.attach(conn, Path(path).name)
        return conn

    store.connect = connect


def _plan(root: Path, database: str, sql: str) -> list[str] | None:
    head = sql.split(None, 1)[0].upper() if sql else ""
    if head not in {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE"}:
        return None
    conn = store.connect(
        root / database,
        attach={"state": root / "state.db", "control": root / "control.db"}
        if database == "transcripts.db"
        else None,
    )
    try:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
    except sqlite3.Error as exc:
        return [f"(no plan: {exc})"]
    finally:
        conn.close()
    return [str(row["detail"]) for row in rows]


def _grows(plan: list[str]) -> bool:
    for line in plan:
        if "USE TEMP B-TREE" in line:
            return True
        if line.startswith("SCAN") and not BOUNDED_SCANS.match(line):
            return True
    return False


async def _post(url: str, body: dict[str, Any]) -> int:
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as response,
    ):
        await response.read()
        return response.status


async def run(root: Path, turns: int, tracer: Tracer) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    os.environ["HABAKKUK_BENCH_TOKEN"] = TOKEN
    home = Home(root)
    runtime = await Runtime.open(home, parse_config(CONFIG, home.config_path, home))
    try:
        server = await runtime.http.start()
        runtime.start_workers()
        warm = await runtime.sessions.new_session()
        await runtime.turns.wait_turn(await runtime.turns.submit(warm.id, "warm up"))
        tracer.path = "turn"
        for _ in range(turns):
            session = await runtime.sessions.new_session()
            await runtime.turns.wait_turn(await runtime.turns.submit(session.id, "hello"))
        tracer.path = "sessions screen"
        await runtime.sessions.list_sessions(limit=200)
        tracer.path = "search"
        await runtime.sessions.search_sessions("budget review", limit=100)
        tracer.path = "POST /v1/chat/completions"
        v1 = {"model": "habakkuk/main", "messages": [{"role": "user", "content": "hi"}]}
        status = await _post(f"{server.url}/v1/chat/completions", v1)
        tracer.path = ""
        assert status == 200, f"/v1 answered {status}"
        await runtime.close()
        runtime = await Runtime.open(home, parse_config(CONFIG, home.config_path, home))
        server = await runtime.http.start()  # no workers: the path up to "turn queued"
        tracer.path = "POST /api/chat"
        chat = {"text": "queued", "id": "plans-1", "conversation": "plans"}
        status = await _post(f"{server.url}/api/chat", chat)
        tracer.path = ""
        assert status in (200, 201, 202), f"/api/chat answered {status}"
    finally:
        tracer.path = ""
        await runtime.close()


def report(root: Path, tracer: Tracer, every: bool) -> int:
    flagged = 0
    for path, statements in tracer.seen.items():
        print(f"== {path}: {sum(statements.values())} statements")
        for (database, sql), count in sorted(statements.items()):
            plan = _plan(root, database, sql)
            if plan is None:
                continue
            grows = _grows(plan)
            flagged += grows
            if grows or every:
                mark = "GROWS" if grows else "ok"
                short = re.sub(r"\s+", " ", sql)
                print(f"[{mark}] {database} x{count}: {short[:400]}")
                for line in plan:
                    print(f"    {line}")
    return flagged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    tracer = Tracer()
    _install(tracer)
    with tempfile.TemporaryDirectory(prefix="habakkuk-plans-") as tmp:
        root = Path(tmp) / "home"
        shutil.copytree(args.home, root)
        (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
        asyncio.run(run(root, args.turns, tracer))
        flagged = report(root, tracer, args.all)
    print(f"{flagged} statement(s) whose plan grows with the home")
    sys.exit(0)


if __name__ == "__main__":
    main()
