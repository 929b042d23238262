"""The first turns on a freshly opened home against its steady state: per-window throughput
of turns 1-100, 101-200, ... on a cold copy of a big home (benchmarks/big_home.py) and,
as the control, of a small one; the code before (--before: another checkout, e.g. the
main branch) beside this one, in alternating runs.

Each run copies the built home (cp -a: every run starts on the same files), writes the
copy to disk, drops the OS page cache when it can (root: `sync; echo 3 >
/proc/sys/vm/drop_caches`; the line "page cache dropped: yes/no" says whether it did),
then opens the home in a fresh process with the real runtime (the app's and `serve`'s
workers: maintenance included) and the mock provider, and runs --turns turns, each on a
new session (made in the timed window: a first turn makes its session too), one at a time
(concurrency 1) and, as a second mode, a few at a time. A window's rate is its 100 turns
over the time from the end of the window before (the runtime open for the first) to its
last turn's end; "first/steady" is the first window's rate over the median of the last half.

Usage: python benchmarks/first_turns_bench.py --big HOME [--small HOME] [--before CHECKOUT]
           [--turns 1000] [--window 100] [--concurrency 1 4] [--repeat 3] [--work DIR]
           [--warm] [--settle SECONDS] [--season TURNS]
--warm keeps the OS page cache (a process restarted on a home the machine has been using,
not a cold boot); --settle idles that long after the workers start before the clock
starts (the seconds a person takes to type a first message), so work the runtime does
ahead at start counts only when a turn has to wait for it; --season has each checkout
serve its copy for that many turns and stop before the measured open (a restart of a
home that code has served, not the first start of new code on an old home).
Without --small a small home (1,000 sessions, 10,000 messages) is built in --work first.
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
import time
from pathlib import Path
from typing import Any

from _harness import BIG_HOME_CONFIG

CONFIG = BIG_HOME_CONFIG
TOKEN = "bench-token-0123456789"


# -- one measured run (a fresh process) --------------------------------------------------------


async def measure(
    root: Path, turns: int, concurrency: int, maintenance: bool, settle: float = 0.0
) -> dict[str, Any]:
    """Open the home at `root`, run `turns` turns `concurrency` at a time; each turn's end.

    With `settle`, the workers start and the process idles that long before the clock
    starts (what a person typing a first message gives the start-up work)."""
    import habakkuk
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.events import JobFinished
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    os.environ["HABAKKUK_BENCH_TOKEN"] = TOKEN  # the web chat's channel runs, as in `serve`
    started = time.perf_counter()
    home = Home(root)
    runtime = await Runtime.open(home, parse_config(CONFIG, home.config_path, home))
    opened = time.perf_counter()
    ends: list[float] = []
    # (CPU s, read calls, bytes read from disk) at the open, then at each turn's end
    counters = [_counters()]
    failed = 0
    try:
        waiting: dict[str, asyncio.Future[str]] = {}
        subscription = runtime.bus.subscribe(lambda e: isinstance(e, JobFinished), turns + 64)

        async def dispatch() -> None:
            async for event in subscription:
                future = waiting.get(event.job)
                if future is not None and not future.done():
                    future.set_result(event.status)

        reader = asyncio.create_task(dispatch())
        runtime.start_workers(maintenance=maintenance)
        if settle:
            await asyncio.sleep(settle)
            opened = time.perf_counter()
            counters = [_counters()]
        loop = asyncio.get_running_loop()
        next_index = 0

        async def client() -> None:
            nonlocal failed, next_index
            while next_index < turns:
                next_index += 1
                session = await runtime.sessions.new_session()
                turn = f"turn_first_{session.id}"
                waiting[turn] = loop.create_future()
                await runtime.turns.submit(session.id, "hello", turn_id=turn)
                status = await waiting[turn]
                del waiting[turn]
                ends.append(time.perf_counter())
                counters.append(_counters())
                failed += status != "done"

        await asyncio.gather(*(client() for _ in range(concurrency)))
        subscription.close()
        await reader
    finally:
        await runtime.close()
    return {
        "code": str(Path(habakkuk.__file__).parent.parent),
        "open_s": opened - started,
        "ends": [end - opened for end in ends],
        "counters": counters,
        "failed": failed,
    }


def _counters() -> tuple[float, int, int]:
    """This process's CPU seconds (all threads), read calls (each page SQLite's own cache
    missed is one) and bytes read from the disk (pages the OS cache missed)."""
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return time.process_time(), int(io["syscr"]), int(io["read_bytes"])


# -- the comparison ------------------------------------------------------------------------------


def windows(ends: list[float], size: int) -> list[float]:
    """Turns per second of each window of `size` turns (ends: seconds since the open)."""
    rates = []
    previous = 0.0
    for stop in range(size, len(ends) + 1, size):
        end = ends[stop - 1]
        rates.append(size / (end - previous))
        previous = end
    return rates


def window_costs(counters: list[list[float]], size: int) -> list[tuple[float, float, float]]:
    """Per window of `size` turns: CPU ms, read calls and KB read from disk, per turn."""
    costs = []
    for stop in range(size, len(counters), size):
        before, after = counters[stop - size], counters[stop]
        cpu, reads, disk = (after[i] - before[i] for i in range(3))
        costs.append((cpu * 1000 / size, reads / size, disk / 1024 / size))
    return costs


def first_over_steady(rates: list[float]) -> float:
    """The first window's rate over the median of the last half of the windows."""
    steady = statistics.median(rates[len(rates) // 2 :])
    return rates[0] / steady


def _settle(root: Path) -> None:
    """Write the copy to disk (a gigabyte of dirty pages would otherwise be flushed by the
    first checkpoint's fsync inside the measured window: a cost no real home pays)."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def drop_page_cache() -> bool:
    """Drop the OS page cache (needs root and a writable /proc/sys); whether it did."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def run_one(
    code: Path, source: Path, work: Path, args: argparse.Namespace, concurrency: int
) -> tuple[dict[str, Any], bool]:
    """One cold run of the home `source` on the checkout `code`; (result, cache dropped)."""
    copy = work / "run"
    if copy.exists():
        shutil.rmtree(copy)
    subprocess.run(["cp", "-a", str(source), str(copy)], check=True)
    (copy / "config.yaml").write_text(CONFIG, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(code))
    if args.season:
        # The code serves the copy once and stops: the next open is a restart of a home
        # it has served (what it keeps between runs, such as the reply sweep's place).
        season = [sys.executable, __file__, "--measure", str(copy), "--turns", str(args.season)]
        subprocess.run(season, check=True, stdout=subprocess.DEVNULL, env=env, timeout=600)
    _settle(copy)
    dropped = False if args.warm else drop_page_cache()
    command = [sys.executable, __file__, "--measure", str(copy), "--turns", str(args.turns)]
    command += ["--concurrency", str(concurrency)]
    if args.no_maintenance:
        command.append("--no-maintenance")
    command += ["--settle", str(args.settle)]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, env=env, timeout=1800)
    result = dict(json.loads(out.stdout.decode().strip().splitlines()[-1]))
    if Path(result["code"]).resolve() != code.resolve():
        raise SystemExit(f"the run imported habakkuk from {result['code']}, not {code}")
    shutil.rmtree(copy)
    return result, dropped


def report(
    results: dict[tuple[str, str, int], list[dict[str, Any]]], window: int, codes: list[str]
) -> None:
    """Per window: the median rate of each (code, home, mode) over its runs; the ratios."""
    for (code, home, concurrency), runs in sorted(results.items()):
        per_run = [windows(run["ends"], window) for run in runs]
        count = min(len(rates) for rates in per_run)
        medians = [statistics.median(rates[i] for rates in per_run) for i in range(count)]
        ratios = [first_over_steady(rates) for rates in per_run]
        cells = " ".join(f"{rate:6.0f}" for rate in medians)
        opened = statistics.median(run["open_s"] for run in runs) * 1000
        print(
            f"{code:7} {home:5} c={concurrency}  open {opened:6.0f} ms  turns/s by {window}:"
            f" {cells}  first/steady {statistics.median(ratios):.2f}"
            f" (runs: {', '.join(f'{r:.2f}' for r in ratios)})"
        )
        costs = [window_costs(run["counters"], window) for run in runs]
        for index, what in enumerate(("CPU ms", "read calls", "disk KB")):
            cells = " ".join(
                f"{statistics.median(c[i][index] for c in costs):6.1f}" for i in range(count)
            )
            print(f"{'':21}{what + ' per turn':>21}: {cells}")
    for home in ("big", "small"):
        for concurrency in sorted({key[2] for key in results}):
            line = []
            for code in codes:
                runs = results.get((code, home, concurrency), [])
                if runs:
                    ratio = statistics.median(
                        first_over_steady(windows(r["ends"], window)) for r in runs
                    )
                    line.append(f"{code} {ratio:.2f}")
            print(f"first {window} / steady, {home} home, c={concurrency}: " + ", ".join(line))


def build_small(work: Path) -> Path:
    """The control: a small home (1,000 sessions, 10,000 messages) built once in `work`."""
    sys.path.insert(0, str(Path(__file__).parent))
    from big_home import build

    small = work / "small-source"
    if not (small / "transcripts.db").exists():
        build(small, 1_000, 10_000)
    return small


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=Path, help="a home built by benchmarks/big_home.py")
    parser.add_argument("--small", type=Path, help="the control home (default: built)")
    parser.add_argument("--before", type=Path, help="the checkout to compare with")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/first-turns"))
    parser.add_argument("--no-maintenance", action="store_true", help="workers without it")
    parser.add_argument(
        "--warm", action="store_true", help="keep the OS page cache (a restart, not a boot)"
    )
    parser.add_argument(
        "--settle", type=float, default=0.0, help="idle seconds after start before the clock"
    )
    parser.add_argument(
        "--season", type=int, default=0, help="turns each checkout serves the copy first"
    )
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        result = asyncio.run(
            measure(
                args.measure,
                args.turns,
                args.concurrency[0],
                not args.no_maintenance,
                args.settle,
            )
        )
        print(json.dumps(result))
        return
    if args.big is None:
        raise SystemExit("first_turns_bench: --big HOME (benchmarks/big_home.py builds one)")
    args.work.mkdir(parents=True, exist_ok=True)
    small = args.small or build_small(args.work)
    here = Path(__file__).resolve().parent.parent
    codes = [("before", args.before)] if args.before else []
    codes.append(("ours", here))
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    dropped_all = True
    for number in range(args.repeat):
        for concurrency in args.concurrency:
            for home, source in (("big", args.big), ("small", small)):
                for code, checkout in codes:
                    result, dropped = run_one(checkout, source, args.work, args, concurrency)
                    dropped_all &= dropped
                    results.setdefault((code, home, concurrency), []).append(result)
        print(f"run {number + 1} of {args.repeat} done", flush=True)
    print(f"page cache dropped before each run: {'yes' if dropped_all else 'no'}")
    print(f"idle after start before the clock: {args.settle:g} s")
    print(f"turns each checkout served the copy before the measured open: {args.season}")
    report(results, args.window, [code for code, _ in codes])


if __name__ == "__main__":
    main()
