"""Flat costs as the home grows: the same measurements on an empty home and a big one
(benchmarks/big_home.py: 100,000 sessions, 1,000,000 messages by default), side by side
with the ratio big / empty.

Measured on each home, each in a fresh process, the homes alternating (--repeat runs
each; medians printed):

- turns/s and turn latency p99: --turns turns on new sessions, --concurrency at a time
  (submit to JobFinished), the mock provider, as benchmarks/turns_bench.py;
- session search: median latency of searches for common words, a pair and a word that
  is nowhere (the sessions screen's search: limit 100);
- the sessions screen's first paint: push to the first frame that paints the session
  table with rows (Textual's test driver, 160x40), as the other screen benchmarks;
- POST /v1/chat/completions req/s: --rounds rounds of --requests requests on one
  runtime (a new session each, the turn run by the workers), each round's rate printed;
- POST /api/chat req/s (turn queued, workers stopped), as benchmarks/http_bench.py.

The load comes from a second process on loopback.

Usage: python benchmarks/scale_bench.py [--big HOME] [--sessions N] [--messages M]
           [--repeat R] [--turns T] [--requests Q] [--rounds 5]
Without --big a big home is built in a temporary folder first (a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import BIG_HOME_CONFIG, first_paints, headless_app, running

TOKEN = "bench-token-0123456789"
CONFIG = BIG_HOME_CONFIG
SEARCHES = ("deploy", "garden", "budget review", "invoice python", "xylophone")


# -- the load (a second process) -------------------------------------------------------------


async def _hammer(url: str, count: int, concurrency: int, kind: str) -> dict[str, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    statuses: dict[int, int] = {}
    next_index = 0

    def body(index: int) -> dict[str, Any]:
        if kind == "v1":
            return {"model": "habakkuk/main", "messages": [{"role": "user", "content": "hi"}]}
        return {
            "text": "queued by the bench",
            "id": f"scale-{index}-{time.time_ns()}",
            "conversation": f"scale-{index % 50}",
        }

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            async with session.post(url, json=body(index), headers=headers) as response:
                await response.read()
            statuses[response.status] = statuses.get(response.status, 0) + 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {"rps": count / elapsed, "statuses": statuses}


async def _load(url: str, count: int, concurrency: int, kind: str) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--load",
        url,
        "--kind",
        kind,
        "--requests",
        str(count),
        "--concurrency",
        str(concurrency),
        stdout=subprocess.PIPE,
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"load process failed with exit code {process.returncode}")
    return dict(json.loads(out))


# -- the measurements (one process per home) ------------------------------------------------


async def _open(root: Path) -> Any:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    home = Home(root)
    return await Runtime.open(home, parse_config(CONFIG, home.config_path, home))


async def measure_turns(root: Path, count: int, concurrency: int) -> dict[str, float]:
    from habakkuk.engine.events import JobFinished

    runtime = await _open(root)
    try:
        waiting: dict[str, asyncio.Future[str]] = {}
        subscription = runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), count + 64)

        async def dispatch() -> None:
            async for event in subscription:
                future = waiting.get(event.job)
                if future is not None and not future.done():
                    future.set_result(event.status)

        reader = asyncio.create_task(dispatch())
        sessions = [await runtime.sessions.new_session() for _ in range(count)]
        runtime.start_workers()
        latencies: list[float] = []
        failed = 0
        loop = asyncio.get_running_loop()

        async def client(mine: list[Any]) -> None:
            nonlocal failed
            for session in mine:
                started = time.perf_counter()
                turn = f"turn_scale_{session.id}"
                waiting[turn] = loop.create_future()
                await runtime.turns.submit(session.id, "hello", turn_id=turn)
                status = await waiting[turn]
                latencies.append(time.perf_counter() - started)
                failed += status != "done"

        started = time.perf_counter()
        await asyncio.gather(*(client(sessions[i::concurrency]) for i in range(concurrency)))
        elapsed = time.perf_counter() - started
        subscription.close()
        await reader
    finally:
        await runtime.close()
    latencies.sort()
    return {
        "turns_per_s": count / elapsed,
        "turn_p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
        "turns_failed": failed,
    }


async def measure_search(root: Path, rounds: int = 5) -> dict[str, float]:
    runtime = await _open(root)
    try:
        times = []
        hits = 0
        for _ in range(rounds):
            for query in SEARCHES:
                started = time.perf_counter()
                found = await runtime.sessions.search_sessions(query, limit=100)
                times.append(time.perf_counter() - started)
                hits += len(found)
    finally:
        await runtime.close()
    return {"search_ms": statistics.median(times) * 1000, "search_max_ms": max(times) * 1000}


async def measure_screen(root: Path, runs: int = 5) -> dict[str, float]:
    from habakkuk.screens.sessions import SessionsScreen

    app = headless_app(root, None)
    async with running(app, (160, 40)) as pilot:
        times = await first_paints(
            app,
            pilot,
            SessionsScreen,
            lambda screen: screen._table,
            runs,
            what="the sessions",
            timeout=60,
        )
    return {"screen_ms": statistics.median(times) * 1000}


async def measure_http(root: Path, requests: int, rounds: int, concurrency: int) -> dict[str, Any]:
    os.environ["HABAKKUK_BENCH_TOKEN"] = TOKEN
    runtime = await _open(root)
    try:
        server = await runtime.http.start()
        runtime.start_workers()
        v1 = []
        for _ in range(rounds):
            result = await _load(f"{server.url}/v1/chat/completions", requests, concurrency, "v1")
            if set(result["statuses"]) != {"200"}:
                raise SystemExit(f"/v1 answered {result['statuses']}")
            v1.append(result["rps"])
    finally:
        await runtime.close()
    # POST /api/chat measures the path up to "turn queued": no workers competing.
    runtime = await _open(root)
    try:
        server = await runtime.http.start()
        chat = await _load(f"{server.url}/api/chat", requests * 2, concurrency, "chat")
        if set(chat["statuses"]) - {"200", "201", "202"}:
            raise SystemExit(f"/api/chat answered {chat['statuses']}")
    finally:
        await runtime.close()
    return {"v1_rounds": v1, "v1_rps": statistics.median(v1), "chat_rps": chat["rps"]}


async def measure_all(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {}
    result.update(await measure_turns(root, args.turns, args.concurrency))
    result.update(await measure_search(root))
    result.update(await measure_screen(root))
    result.update(await measure_http(root, args.requests, args.rounds, args.http_concurrency))
    return result


# -- the comparison ----------------------------------------------------------------------------


def _settle(root: Path) -> None:
    """Write the copied home's files to disk before it is measured.

    A fresh copy of a big home is a gigabyte of dirty pages in the OS cache: the first
    WAL checkpoint of each database (its fsync) would wait for all of them inside the
    measured window (a 400 ms commit on transcripts.db), a cost no real home pays.
    """
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _measure_in_child(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--measure",
        str(root),
        "--turns",
        str(args.turns),
        "--concurrency",
        str(args.concurrency),
        "--requests",
        str(args.requests),
        "--rounds",
        str(args.rounds),
        "--http-concurrency",
        str(args.http_concurrency),
    ]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, timeout=3600).stdout
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


ROWS = (
    ("turns/s", "turns_per_s", "{:,.0f}", True),
    ("turn p99 (ms)", "turn_p99_ms", "{:,.1f}", False),
    ("POST /api/chat req/s", "chat_rps", "{:,.0f}", True),
    ("POST /v1 req/s", "v1_rps", "{:,.1f}", True),
    ("session search (ms)", "search_ms", "{:,.2f}", False),
    ("session search worst (ms)", "search_max_ms", "{:,.2f}", False),
    ("sessions screen paint (ms)", "screen_ms", "{:,.0f}", False),
)


def compare(empty: list[dict[str, Any]], big: list[dict[str, Any]]) -> None:
    print(f"{'':28} {'empty':>10} {'big':>10} {'big/empty':>10}")
    for label, key, shape, higher_better in ROWS:
        a = statistics.median(r[key] for r in empty)
        b = statistics.median(r[key] for r in big)
        ratio = b / a if a else float("nan")
        note = "" if (ratio >= 0.9 if higher_better else ratio <= 1.1) else "  (beyond 10 %)"
        print(f"{label:28} {shape.format(a):>10} {shape.format(b):>10} {ratio:>10.2f}{note}")
    for name, runs in (("empty", empty), ("big", big)):
        for number, run in enumerate(runs, 1):
            rounds = ", ".join(f"{r:.1f}" for r in run["v1_rounds"])
            print(f"/v1 rounds, {name} home, run {number}: {rounds} req/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=Path, help="a home built by benchmarks/big_home.py")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--http-concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="chat", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        result = asyncio.run(_hammer(args.load, args.requests, args.concurrency, args.kind))
        print(json.dumps(result))
        return
    if args.measure:
        print(json.dumps(asyncio.run(measure_all(args.measure, args))))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from big_home import build

    with tempfile.TemporaryDirectory(prefix="habakkuk-scale-") as tmp:
        big_source = args.big
        if big_source is None:
            big_source = Path(tmp) / "big-source"
            started = time.perf_counter()
            build(big_source, args.sessions, args.messages)
            print(f"big home built in {time.perf_counter() - started:.0f} s")
        empty_runs: list[dict[str, Any]] = []
        big_runs: list[dict[str, Any]] = []
        for run in range(args.repeat):
            # Each run starts from the same two homes: the runs add sessions and jobs.
            empty = Path(tmp) / f"empty-{run}"
            empty.mkdir()
            big = Path(tmp) / f"big-{run}"
            shutil.copytree(big_source, big)
            _settle(big)
            for root in (empty, big):
                (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
            empty_runs.append(_measure_in_child(empty, args))
            big_runs.append(_measure_in_child(big, args))
            shutil.rmtree(empty)
            shutil.rmtree(big)
            print(f"run {run + 1} of {args.repeat} done", flush=True)
        compare(empty_runs, big_runs)


if __name__ == "__main__":
    main()
