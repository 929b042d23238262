"""GET /healthz req/s: `habakkuk serve` before and after a change, and a peer, with wrk.

Each tree (`--before`, `--after`: a source tree put first on PYTHONPATH) serves a fresh
home of its own with the offline mock provider, as `habakkuk serve` does (every
worker, the web chat's channel); `--peer-url` is a health endpoint already running
(nanobot's `GET /health`, say). The targets are hammered in alternating rounds
(before, after, peer, before, after, peer, ...) with `wrk -t1 -c32 -d5s` and the
medians and ratios printed: on a shared machine only the ratios hold. Each server's
CPU time per request (from /proc; the peer's with `--peer-pid`) is printed too: it
moves less than req/s when other work shares the cores.

    python benchmarks/health_bench.py --before /work/main --after . \
        --peer-url http://127.0.0.1:18900/health --peer-pid PID [--rounds 5] [--seconds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from _harness import mock_config


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    """Return once `url` answers 200; SystemExit when the server dies or never does."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server for {url} exited with {process.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {seconds:.0f}s")


@contextlib.contextmanager
def serving(tree: Path) -> Iterator[tuple[str, int]]:
    """`habakkuk serve` from `tree` on a fresh home; yields its /healthz URL and pid."""
    port = free_port()
    config = mock_config(extra=f"http:\n  listen: 127.0.0.1:{port}\n")
    with tempfile.TemporaryDirectory(prefix="habakkuk-health-bench-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "config.yaml").write_text(config, encoding="utf-8")
        env = dict(os.environ, HABAKKUK_HOME=str(home), PYTHONPATH=str(tree.resolve()))
        process = subprocess.Popen(
            [sys.executable, "-c", "from habakkuk.cli import main; main()", "serve"],
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}/healthz"
        try:
            wait_healthy(url, process)
            yield url, process.pid
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


REQUESTS = re.compile(r"([0-9]+) requests in")
NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s+([0-9]+)")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time process `pid` has used (0 without a pid)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, seconds: int, connections: int, pid: int | None) -> tuple[float, float]:
    """Requests per second wrk measured on `url`, and the server's CPU microseconds per
    request (0 without its pid); SystemExit on any non-2xx answer."""
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu
    failed = NON_2XX.search(out)
    if failed:
        raise SystemExit(f"{url}: {failed.group(1)} non-2xx answers\n{out}")
    found = REQUESTS.search(out)
    if found is None:
        raise SystemExit(f"wrk printed no request count for {url}:\n{out}")
    requests = int(found.group(1))
    # wrk's run time (its -d) is close to `elapsed`, which includes its start-up.
    return requests / min(elapsed, float(seconds)), cpu / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="the tree before the change")
    parser.add_argument("--after", type=Path, default=Path("."), help="the tree after it")
    parser.add_argument("--peer-url", help="a peer's health endpoint, already running")
    parser.add_argument("--peer-pid", type=int, help="the peer server's pid (for its CPU)")
    parser.add_argument("--peer-name", default="peer")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        targets: dict[str, tuple[str, int | None]] = {}
        if args.before is not None:
            targets["before"] = stack.enter_context(serving(args.before))
        targets["after"] = stack.enter_context(serving(args.after))
        if args.peer_url:
            targets[args.peer_name] = (args.peer_url, args.peer_pid)
        rates: dict[str, list[float]] = {name: [] for name in targets}
        costs: dict[str, list[float]] = {name: [] for name in targets}
        for n in range(args.rounds):
            for name, (url, pid) in targets.items():
                rate, cost = wrk(url, args.seconds, args.connections, pid)
                rates[name].append(rate)
                costs[name].append(cost)
            line = "  ".join(
                f"{name} {rates[name][-1]:,.0f} ({costs[name][-1]:.1f} us)" for name in targets
            )
            print(f"round {n + 1}: {line}", flush=True)
    median_rate = {name: statistics.median(values) for name, values in rates.items()}
    median_cost = {name: statistics.median(values) for name, values in costs.items()}
    print(
        f"GET /healthz, wrk -t1 -c{args.connections} -d{args.seconds}s, "
        f"{args.rounds} alternating rounds, medians (req/s; server CPU per request):"
    )
    for name in median_rate:
        spent = f"{median_cost[name]:5.1f} us" if median_cost[name] else "    (no pid)"
        print(f"  {name:>8}: {median_rate[name]:>9,.0f} req/s  {spent}")
    pairs = [("after", "before")] if "before" in median_rate else []
    if args.peer_url:
        pairs += [(name, args.peer_name) for name in ("before", "after") if name in median_rate]
    for ours, other in pairs:
        line = f"  {ours} / {other}: {median_rate[ours] / median_rate[other]:.2f}x req/s"
        if median_cost[ours] and median_cost[other]:
            # Above 1: `ours` spends less CPU on a request than `other`.
            ratio = median_cost[other] / median_cost[ours]
            line += f"; CPU per request {other} / {ours}: {ratio:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
