"""Several `habakkuk --serve` nodes on one PostgreSQL: failover and turns/s.

1. Failover: three nodes (each its own home folder and HABAKKUK_HOSTNAME, as three
   machines) share one database and one Telegram bot (the fake Bot API of the tests on
   127.0.0.1). The node holding the scheduler's tick lease is killed with SIGKILL, then
   the node holding the bot's connection lease: printed is how long until another node
   holds each (target <= 15 s). Different host names: no node can see the dead one's pid,
   so a lease passes only when it runs out.
2. Turns/s with 1, 2 and 3 nodes on one PostgreSQL (mock provider, N turns submitted at
   once by a client of the same database), beside one node on an SQLite home; with each,
   the turns' p50 and p99 from submit to done (the jobs' created_at to updated_at).

Usage: python benchmarks/pg_nodes_bench.py [--server URL] [--turns N] [--lease S]
                                           [--skip-failover] [--skip-turns]
The server (default: the tests', postgresql://postgres:postgres@127.0.0.1:5432/postgres)
gets a fresh database per run, dropped after. Figures are ratios on a loaded machine,
not absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_SERVER = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
TOKEN = "123:SECRET"
START_BOUND = 120.0  # seconds for a cold-started node to say it serves
WAIT_BOUND = 300.0


@contextlib.contextmanager
def fresh_database(server: str) -> Any:
    """A new empty database on `server` (its URL), dropped after."""
    import psycopg

    name = f"hk_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        return list(conn.execute(sql, params).fetchall())


class Nodes:
    """`habakkuk --serve` processes, each on its own home with its own host name (or all
    on `shared`: an SQLite home is one machine's)."""

    def __init__(self, base: Path, config: str, shared: Path | None = None):
        self.base = base
        self.config = config
        self.shared = shared
        self.running: dict[str, asyncio.subprocess.Process] = {}

    def home(self, host: str) -> Path:
        root = self.shared or self.base / host
        if not root.exists():
            root.mkdir(parents=True)
            (root / "config.yaml").write_text(self.config, encoding="utf-8")
        return root

    async def start(self, host: str) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "habakkuk.cli", "--serve",
            env={
                **os.environ,
                "HABAKKUK_HOME": str(self.home(host)),
                "HABAKKUK_HOSTNAME": host,
                "TG_TOKEN": TOKEN,
                "PYTHONPATH": str(ROOT),
            },
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self.running[host] = process
        assert process.stderr is not None
        seen: list[str] = []
        while True:
            line = await asyncio.wait_for(process.stderr.readline(), START_BOUND)
            if not line:
                raise SystemExit(f"pg_nodes_bench: {host} exited: {''.join(seen)}")
            seen.append(line.decode(errors="replace"))
            if "habakkuk: serving" in seen[-1]:
                break
        # Its later lines are read and dropped, so a full pipe never blocks it.
        asyncio.get_running_loop().create_task(_drain(process))

    def kill(self, host: str) -> None:
        process = self.running.pop(host)
        process.send_signal(signal.SIGKILL)

    async def stop_all(self) -> None:
        for process in self.running.values():
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 60)
            if process.returncode is None:
                process.kill()
                await process.wait()
        self.running.clear()


async def _drain(process: asyncio.subprocess.Process) -> None:
    assert process.stderr is not None
    while await process.stderr.readline():
        pass


@contextlib.asynccontextmanager
async def nodes_on(config: str, shared: Path | None = None) -> AsyncIterator[Nodes]:
    with tempfile.TemporaryDirectory() as tmp:
        nodes = Nodes(Path(tmp), config, shared)
        try:
            yield nodes
        finally:
            await nodes.stop_all()


async def until(condition: Callable[[], Any], what: str, bound: float = WAIT_BOUND) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"pg_nodes_bench: gave up waiting for {what}")
        await asyncio.sleep(0.05)


# -- 1. failover --


def holder(url: str, table: str, name: str) -> str | None:
    """The host holding lease `name` now, or None."""
    found = rows(
        url,
        f"SELECT host FROM control.{table} WHERE name = %s AND until >= %s",
        (name, time.time()),
    )
    return str(found[0][0]) if found else None


async def failover(server: str, lease: float) -> list[tuple[str, float]]:
    """Seconds from SIGKILL of each lease's holder to another node holding it."""
    from tests.channels.fake_telegram import FakeTelegram

    figures = []
    async with FakeTelegram(token=TOKEN) as tg:
        config = (
            "providers:\n  mock: {type: mock, script: ['ok']}\n"
            "agents:\n  main: {model: mock/bench, mode: read-only}\n"
            f"workers: {{lease_seconds: {lease}}}\n"
            "channels:\n  tg:\n    type: telegram\n    token_env: TG_TOKEN\n"
            f"    base_url: {tg.base_url}\n    allow_from: ['42']\n    poll_timeout: 1\n"
        )
        with fresh_database(server) as url:
            config += f"storage: {{url: '{url}'}}\n"
            async with nodes_on(config) as nodes:
                for host in ("node-a", "node-b", "node-c"):
                    await nodes.start(host)
                for table, name in (("leases", "schedules:tick"), ("channel_leases", "channel:tg")):
                    figures.append((name, await take_over(nodes, url, table, name)))
    return figures


async def take_over(nodes: Nodes, url: str, table: str, name: str) -> float:
    """Kill the holder of lease `name`; seconds until another node holds it. The killed
    node is started again after (as a supervisor would)."""

    def held() -> str | None:
        return holder(url, table, name)

    await until(held, f"a holder of {name}")
    victim = held()
    assert victim is not None
    killed = time.monotonic()
    nodes.kill(victim)
    await until(lambda: held() not in (None, victim), f"another node to take {name}")
    seconds = time.monotonic() - killed
    await nodes.start(victim)
    return seconds


# -- 2. turns/s --


def turns_config(storage: str) -> str:
    return (
        "providers:\n  mock: {type: mock, script: ['ok']}\n"
        "agents:\n  main: {model: mock/bench, mode: read-only}\n"
        "workers:\n  turns: 8\n" + storage
    )


async def submit(home: Path, config: str, count: int) -> float:
    """Submit `count` turns (a session each) from a client of the home's database;
    when the first was submitted (wall clock)."""
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    client_home = Home(home)
    client_home.prepare()
    client_home.config_path.write_text(config, encoding="utf-8")
    parsed = parse_config(config, client_home.config_path, client_home)
    async with await Runtime.open(client_home, parsed) as runtime:
        sessions = [await runtime.sessions.new_session() for _ in range(count)]
        started = time.time()
        await asyncio.gather(*(runtime.turns.submit(s.id, "hello") for s in sessions))
    return started


def turn_times(read: Callable[[str], list[tuple[Any, ...]]]) -> tuple[int, float, list[float]]:
    """(turns done, the last one's end, each turn's seconds from submit to done)."""
    done = read("SELECT created_at, updated_at FROM {jobs} WHERE kind = 'turn' AND status = 'done'")
    ends = [float(end) for _, end in done]
    return len(done), max(ends, default=0.0), [float(e) - float(s) for s, e in done]


async def turns_on(
    count: int, processes: int, storage: str, read: Callable[[str], list[tuple[Any, ...]]]
) -> tuple[float, float, float]:
    """turns/s, p50 and p99 (ms) of `count` turns with `processes` nodes."""
    config = turns_config(storage)
    async with nodes_on(config) as nodes:
        hosts = [f"node-{i}" for i in range(processes)]
        for host in hosts:
            await nodes.start(host)
        started = await submit(nodes.base / "client", config, count)
        await until(lambda: turn_times(read)[0] >= count, f"{count} turns done")
        _, last, each = turn_times(read)
    each.sort()
    p99 = each[min(len(each) - 1, int(len(each) * 0.99))]
    return count / (last - started), statistics.median(each) * 1000, p99 * 1000


async def turns_pg(server: str, count: int, processes: int) -> tuple[float, float, float]:
    with fresh_database(server) as url:

        def read(sql: str) -> list[tuple[Any, ...]]:
            return rows(url, sql.format(jobs="control.jobs"))

        return await turns_on(count, processes, f"storage: {{url: '{url}'}}\n", read)


async def turns_sqlite(count: int) -> tuple[float, float, float]:
    """One node on an SQLite home (the client shares the home's files)."""
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        shared = Path(tmp) / "home"
        config = turns_config("")
        shared.mkdir()
        (shared / "config.yaml").write_text(config, encoding="utf-8")

        def read(sql: str) -> list[tuple[Any, ...]]:
            path = shared / "control.db"
            if not path.exists():
                return []
            with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
                try:
                    return conn.execute(sql.format(jobs="jobs")).fetchall()
                except sqlite3.OperationalError:
                    return []

        async with nodes_on(config, shared) as nodes:
            await nodes.start("node-0")
            started = await submit(shared, config, count)
            await until(lambda: turn_times(read)[0] >= count, f"{count} turns done")
            _, last, each = turn_times(read)
    each.sort()
    p99 = each[min(len(each) - 1, int(len(each) * 0.99))]
    return count / (last - started), statistics.median(each) * 1000, p99 * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--server", default=os.environ.get("HABAKKUK_TEST_DATABASE_URL") or DEFAULT_SERVER
    )
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--lease", type=float, default=10.0, help="workers.lease_seconds")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--skip-turns", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true", help="the SQLite figure alone")
    args = parser.parse_args()
    if not args.skip_failover:
        print(f"failover, 3 nodes, workers.lease_seconds {args.lease:g} (target <= 15 s):")
        for name, seconds in await failover(args.server, args.lease):
            print(f"  {name:<16} taken over by another node after {seconds:5.1f} s")
    if not args.skip_turns:
        print(f"turns, {args.turns} submitted at once (mock provider, 8 per node):")
        rate, p50, p99 = await turns_sqlite(args.turns)
        print(f"  SQLite      1 node : {rate:7.1f} turns/s  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms")
        for processes in () if args.skip_postgres else (1, 2, 3):
            rate, p50, p99 = await turns_pg(args.server, args.turns, processes)
            print(
                f"  PostgreSQL {processes} node{'s' if processes > 1 else ' '}:"
                f" {rate:7.1f} turns/s  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms"
            )


if __name__ == "__main__":
    asyncio.run(main())
