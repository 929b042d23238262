"""Several `habakkuk --serve` nodes on one PostgreSQL: failover and turns/s.

1. Failover: three nodes (each its own home folder and HABAKKUK_HOSTNAME, as three
   machines) share one database and one Telegram bot (the fake Bot API of the tests on
   127.0.0.1). The node holding the scheduler's tick lease is killed with SIGKILL, then
   the node holding the bot's connection lease: printed is how long until another node
   holds each (target <= 15 s). Different host names: no node can see the dead one's pid,
   so a lease passes only when it runs out.
2. Turns/s with 1, 2 and 3 nodes on one PostgreSQL (mock provider, N turns submitted at
   once by a client of the same database), beside one node on an SQLite home; with each,
   the turns' p50 and p99 from submit to done (the jobs' created_at to updated_at), and
   two figures the machine's other load does not move much:
   - CPU per turn: the CPU time the nodes and the database's server backends spent
     from the first submit to the last turn done, divided by the turns (the server's
     part read from /proc: a server on this machine; the submitting client, the
     server's WAL writer and checkpointer are not counted);
   - lock waits: pg_stat_activity and pg_locks sampled every 20 ms meanwhile, the mean
     number of the database's backends waiting on a lock, by what they wait for (a
     schema's writer lock, a keyed write's advisory lock, a row, ...).
   With `--baseline DIR` (another checkout, e.g. `git archive main | tar -x -C DIR`),
   each figure is taken with that code's nodes too, alternately, in the same run.

Usage: python benchmarks/pg_nodes_bench.py [--server URL] [--turns N] [--lease S]
                                           [--skip-failover] [--skip-turns]
                                           [--baseline DIR] [--rounds R]
The server (default: the tests', postgresql://postgres:postgres@127.0.0.1:5432/postgres)
gets a fresh database per run, dropped after. Figures are ratios on a loaded machine,
not absolutes: the load average is printed with each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_SERVER = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
TOKEN = "123:SECRET"
START_BOUND = 120.0  # seconds for a cold-started node to say it serves
WAIT_BOUND = 300.0
# The application name of the bench's own connections, whose CPU is not the nodes'.
BENCH_APP = "pg_nodes_bench"


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

    with psycopg.connect(url, connect_timeout=5, application_name=BENCH_APP) as conn:
        return list(conn.execute(sql, params).fetchall())


class Nodes:
    """`habakkuk --serve` processes, each on its own home with its own host name (or all
    on `shared`: an SQLite home is one machine's)."""

    def __init__(self, base: Path, config: str, shared: Path | None = None, root: Path = ROOT):
        self.base = base
        self.config = config
        self.shared = shared
        self.root = root  # the code the nodes run
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
                "PYTHONPATH": str(self.root),
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
async def nodes_on(
    config: str, shared: Path | None = None, root: Path = ROOT
) -> AsyncIterator[Nodes]:
    with tempfile.TemporaryDirectory() as tmp:
        nodes = Nodes(Path(tmp), config, shared, root)
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


@dataclass
class Figures:
    """One run's figures: turns/s, p50 and p99 (ms), CPU ms per turn and the lock
    waits (mean backends waiting, by what they wait for)."""

    rate: float
    p50: float
    p99: float
    cpu_ms: float  # the nodes' and the server's, per turn
    server_ms: float  # the server's part
    waits: dict[str, float] = field(default_factory=dict)


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


def cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """CPU seconds (user + system, every thread) of each process still there."""
    tick = os.sysconf("SC_CLK_TCK")
    seconds: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            seconds[pid] = (int(fields[11]) + int(fields[12])) / tick
    return seconds


class CpuMeter:
    """CPU seconds the nodes and the server's backends of a database spend between
    `start` and `stop`."""

    def __init__(self, nodes: Nodes, url: str | None):
        self.nodes = nodes
        self.url = url
        self.before: dict[int, float] = {}

    def pids(self) -> tuple[list[int], list[int]]:
        """(the nodes', the server backends')."""
        backends: list[int] = []
        if self.url is not None:
            found = rows(
                self.url,
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name <> %s",
                (BENCH_APP,),
            )
            backends = [int(pid) for (pid,) in found]
        return [process.pid for process in self.nodes.running.values()], backends

    def start(self) -> None:
        self.before = cpu_seconds([pid for pids in self.pids() for pid in pids])

    def stop(self) -> tuple[float, float]:
        """CPU seconds since `start`: (the nodes', the server's)."""

        def spent(pids: list[int]) -> float:
            after = cpu_seconds(pids)
            return sum(seconds - self.before.get(pid, 0.0) for pid, seconds in after.items())

        nodes, backends = self.pids()
        return spent(nodes), spent(backends)


def _lock_name(schemas: dict[int, str], locktype: str, key: int, mode: str, query: str) -> str:
    if locktype != "advisory":
        what = {"transactionid": "a row", "tuple": "a row"}.get(locktype, locktype)
        return f"{what} ({' '.join(query.split()[:4])})"
    schema = schemas.get(key)
    if schema is None:
        return "a keyed write (a session)"
    return f"{schema}'s writer lock{' (shared)' if mode == 'ShareLock' else ''}"


def _writer_key(schema: str) -> int:
    """engine/pg.lock_key, copied: the baseline's code may be another version."""
    digest = hashlib.blake2b(f"habakkuk:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class LockSampler:
    """The database's backends waiting on a lock, sampled every 20 ms on a thread of
    its own until `stop`; `waits()`: the mean number waiting, by what they wait for."""

    def __init__(self, url: str):
        self.url = url
        self.samples = 0
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lock-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {what: n / max(self.samples, 1) for what, n in self.counts.most_common()}

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, application_name=BENCH_APP) as conn:
            names = [str(n) for (n,) in conn.execute("SELECT nspname FROM pg_namespace")]
            schemas = {_writer_key(name): name for name in names}
            while not self._stop.wait(0.02):
                waiting = conn.execute(
                    "SELECT l.locktype, l.mode, (l.classid::bigint << 32) | l.objid::bigint,"
                    " a.query FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                    " WHERE NOT l.granted AND a.datname = current_database()"
                ).fetchall()
                self.samples += 1
                for locktype, mode, key, query in waiting:
                    signed = key - (1 << 64) if key is not None and key >= 1 << 63 else key
                    name = _lock_name(schemas, str(locktype), signed or 0, str(mode), str(query))
                    self.counts[name] += 1


async def turns_on(
    count: int,
    processes: int,
    storage: str,
    read: Callable[[str], list[tuple[Any, ...]]],
    *,
    url: str | None = None,
    shared: Path | None = None,
    root: Path = ROOT,
) -> Figures:
    """The figures of `count` turns with `processes` nodes running `root`'s code (all on
    `shared` for an SQLite home; `url`: the PostgreSQL database, sampled meanwhile)."""
    config = turns_config(storage)
    async with nodes_on(config, shared, root) as nodes:
        hosts = [f"node-{i}" for i in range(processes)]
        for host in hosts:
            await nodes.start(host)
        meter = CpuMeter(nodes, url)
        meter.start()
        sampler = LockSampler(url) if url is not None else None
        if sampler is not None:
            sampler.start()
        try:
            started = await submit(shared or nodes.base / "client", config, count)
            await until(lambda: turn_times(read)[0] >= count, f"{count} turns done")
        finally:
            waits = sampler.stop() if sampler is not None else {}
        on_nodes, on_server = meter.stop()
        _, last, each = turn_times(read)
    each.sort()
    p99 = each[min(len(each) - 1, int(len(each) * 0.99))]
    return Figures(
        count / (last - started),
        statistics.median(each) * 1000,
        p99 * 1000,
        (on_nodes + on_server) / count * 1000,
        on_server / count * 1000,
        waits,
    )


async def turns_pg(server: str, count: int, processes: int, root: Path = ROOT) -> Figures:
    with fresh_database(server) as url:

        def read(sql: str) -> list[tuple[Any, ...]]:
            return rows(url, sql.format(jobs="control.jobs"))

        return await turns_on(
            count, processes, f"storage: {{url: '{url}'}}\n", read, url=url, root=root
        )


async def turns_sqlite(count: int, root: Path = ROOT) -> Figures:
    """One node on an SQLite home (the client shares the home's files)."""
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        shared = Path(tmp) / "home"
        shared.mkdir()
        (shared / "config.yaml").write_text(turns_config(""), encoding="utf-8")

        def read(sql: str) -> list[tuple[Any, ...]]:
            path = shared / "control.db"
            if not path.exists():
                return []
            with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
                try:
                    return conn.execute(sql.format(jobs="jobs")).fetchall()
                except sqlite3.OperationalError:
                    return []

        return await turns_on(count, 1, "", read, shared=shared, root=root)


def show(label: str, figures: Figures, *, postgres: bool = True) -> None:
    """One line of figures (and, when any, one of lock waits)."""
    server = f" (server {figures.server_ms:4.1f})" if figures.server_ms else ""
    print(
        f"  {label}: {figures.rate:6.1f} turns/s  p50 {figures.p50:6.0f} ms"
        f"  p99 {figures.p99:6.0f} ms  cpu {figures.cpu_ms:5.1f} ms/turn{server}"
        f"  load {os.getloadavg()[0]:4.1f}",
        flush=True,
    )
    if postgres:
        total = sum(figures.waits.values())
        parts = ", ".join(f"{what} {n:.2f}" for what, n in figures.waits.items() if n >= 0.005)
        print(f"      lock waits {total:5.2f} backends{': ' if parts else ''}{parts}", flush=True)


async def turns(args: argparse.Namespace) -> None:
    """Every turns figure, the baseline's (when given) and this code's alternately."""
    trees = [("this", ROOT)]
    if args.baseline is not None:
        trees.insert(0, ("base", args.baseline.resolve()))
    print(f"turns, {args.turns} submitted at once (mock provider, 8 per node):")
    for _ in range(args.rounds):
        for name, root in trees:
            figures = await turns_sqlite(args.turns, root)
            show(f"SQLite      1 node  {name}", figures, postgres=False)
        for processes in () if args.skip_postgres else (1, 2, 3):
            for name, root in trees:
                figures = await turns_pg(args.server, args.turns, processes, root)
                nodes = f"{processes} node{'s' if processes > 1 else ' '}"
                show(f"PostgreSQL  {nodes} {name}", figures)


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
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose nodes run each figure too"
    )
    parser.add_argument("--rounds", type=int, default=1, help="times each figure is taken")
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / "habakkuk" / "cli").is_dir():
        raise SystemExit(f"pg_nodes_bench: --baseline {args.baseline}: no habakkuk/cli there")
    if not args.skip_failover:
        print(f"failover, 3 nodes, workers.lease_seconds {args.lease:g} (target <= 15 s):")
        for name, seconds in await failover(args.server, args.lease):
            print(f"  {name:<16} taken over by another node after {seconds:5.1f} s")
    if not args.skip_turns:
        await turns(args)


if __name__ == "__main__":
    asyncio.run(main())
