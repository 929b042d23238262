"""POST /v1/chat/completions with the agent on the mock provider beside the same agent
on an OpenAI-compatible model over HTTP (issue 27, item 4); run by `http_bench.py --v1`.

Three kinds of process: the fake model server (tests/fakes/model_server.py, answering
"ok" at once to every Chat Completions request), one server process per round (a
runtime on a fresh home, its HTTP server and turn workers, an agent in `full` mode with
its default tools), and the load (aiohttp on loopback, a new conversation per request).
The rounds alternate mock, HTTP, mock, HTTP, ... so both see the same machine.

Run as `python benchmarks/v1_model.py --fake-model | --serve KIND | --load URL` for
the child roles; `compare_v1` is the driver.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789"
WARM_UP = 32
CONCURRENCY = 16
KINDS = ("mock", "openai")
_HTTP = "http:\n  listen: 127.0.0.1:0\n  token_env: HABAKKUK_BENCH_TOKEN\nworkers:\n  turns: 16\n"
CONFIGS = {
    "mock": "providers:\n  mock: {type: mock, script: [ok]}\n"
    "agents:\n  main: {model: mock/bench, mode: full}\n" + _HTTP,
    "openai": "providers:\n  remote: {type: openai, base_url: '{url}', key_env: BENCH_MODEL_KEY}\n"
    "agents:\n  main: {model: remote/bench-model, mode: full}\n" + _HTTP,
}
# Where the profile's time goes, by the file's package.
PACKAGES = ("openai", "httpx2", "httpcore2", "pydantic", "aiohttp", "habakkuk", "sqlite3")


# -- the fake model (its own process) ------------------------------------------------------


def fake_model_main() -> None:
    """Serve the fake model until stdin closes; print its base URL first."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.model_server import FakeModelServer, RecordedRequest, Reply

    async def run() -> None:
        async with FakeModelServer() as server:

            def answer(recorded: RecordedRequest) -> Reply:
                server.requests.clear()  # a bench sends thousands: keep none
                return Reply(text="ok")

            server.responder = answer
            print(server.base_url, flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(run())


# -- the load (its own process) ------------------------------------------------------------


async def _hammer(url: str, count: int, concurrency: int) -> dict[str, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"model": "habakkuk/main", "messages": [{"role": "user", "content": "hi"}]}
    statuses: dict[int, int] = {}
    next_index = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index
        while next_index < count:
            next_index += 1
            async with session.post(url, json=body, headers=headers) as response:
                await response.read()
            statuses[response.status] = statuses.get(response.status, 0) + 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {"rps": count / elapsed, "statuses": statuses}


async def _load(url: str, count: int, concurrency: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--load", url, "--requests", str(count)]
    command += ["--concurrency", str(concurrency)]
    process = await asyncio.create_subprocess_exec(*command, stdout=subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 600)
    if process.returncode != 0:
        raise SystemExit(f"load process failed with exit code {process.returncode}")
    return dict(json.loads(out))


# -- one round's server (its own process) --------------------------------------------------


async def _serve(kind: str, model_url: str, requests: int, profile: Path | None) -> dict[str, Any]:
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    os.environ["HABAKKUK_BENCH_TOKEN"] = TOKEN
    os.environ["BENCH_MODEL_KEY"] = "bench-model-key"
    config = CONFIGS[kind].replace("{url}", f"{model_url}/v1")
    with tempfile.TemporaryDirectory(prefix="habakkuk-v1-bench-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(config, encoding="utf-8")
        runtime = await Runtime.open(home, parse_config(config, home.config_path, home))
        try:
            server = await runtime.http.start()
            runtime.start_workers()
            url = f"{server.url}/v1/chat/completions"
            warm = await _load(url, WARM_UP, CONCURRENCY)
            profiler = cProfile.Profile()
            if profile is not None:
                profiler.enable()
            before = resource.getrusage(resource.RUSAGE_SELF)
            result = await _load(url, requests, CONCURRENCY)
            after = resource.getrusage(resource.RUSAGE_SELF)
            # The server's own CPU (all its threads) per request: what the model call
            # costs the server, whatever else runs on the machine.
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            result["cpu_ms"] = cpu * 1000 / requests
            if profile is not None:
                profiler.disable()
                profile.mkdir(parents=True, exist_ok=True)
                profiler.dump_stats(profile / f"v1-{kind}-{os.getpid()}.prof")
                result["shares"] = package_shares(pstats.Stats(profiler))
        finally:
            await runtime.close()
    for answered in (warm, result):
        if set(answered["statuses"]) != {"200"}:
            raise SystemExit(f"/v1 on {kind} answered {answered['statuses']}")
    return result


def package_shares(stats: pstats.Stats) -> dict[str, float]:
    """The share of the profiled time spent in each package's own code (tottime)."""
    totals: dict[str, float] = dict.fromkeys(PACKAGES, 0.0)
    everything = 0.0
    for (filename, _, _), row in stats.stats.items():  # type: ignore[attr-defined]  # typeshed omits Stats.stats
        own = row[2]
        everything += own
        parts = Path(filename).parts
        for package in PACKAGES:
            if package in parts or f"{package}.py" in parts:
                totals[package] += own
                break
    return {name: (value / everything if everything else 0.0) for name, value in totals.items()}


# -- the driver ----------------------------------------------------------------------------


def _round(
    kind: str, model_url: str, requests: int, profile: Path | None, tree: Path | None = None
) -> Any:
    command = [sys.executable, __file__, "--serve", kind, "--model-url", model_url]
    command += ["--requests", str(requests)]
    if profile is not None:
        command += ["--profile", str(profile)]
    env = dict(os.environ)
    if tree is not None:  # the server of another checkout (the script's folder has none)
        env["PYTHONPATH"] = str(tree)
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, timeout=1200, env=env)
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def compare_v1(
    requests: int, rounds: int, profile: Path | None, baseline: Path | None = None
) -> None:
    """Alternate mock and HTTP-model rounds (and the HTTP model on a `baseline`
    checkout, when given); print each, then the medians side by side."""
    fake = subprocess.Popen(
        [sys.executable, __file__, "--fake-model"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        model_url = fake.stdout.readline().strip()
        runs: list[tuple[str, str, Path | None]] = [(kind, kind, None) for kind in KINDS]
        if baseline is not None:
            runs.append(("baseline", "openai", baseline))
        figures: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        cpu: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for number in range(1, rounds + 1):
            for name, kind, tree in runs:
                result = _round(kind, model_url, requests, profile, tree)
                figures[name].append(result["rps"])
                cpu[name].append(result["cpu_ms"])
                line = f"round {number}, {name:8}: {result['rps']:6.1f} req/s"
                line += f", server CPU {result['cpu_ms']:.2f} ms a request"
                if "shares" in result:
                    shares = ", ".join(f"{k} {v:.0%}" for k, v in result["shares"].items() if v)
                    line += f"  (profile, own time: {shares})"
                print(line, flush=True)
    finally:
        if fake.stdin is not None:
            fake.stdin.close()
        fake.wait(30)
    mock = statistics.median(figures["mock"])
    remote = statistics.median(figures["openai"])
    print(
        f"POST /v1/chat/completions, {requests} requests x {rounds} rounds, "
        f"concurrency {CONCURRENCY}, medians:"
    )
    print(f"  agent on the mock provider:             {mock:6.1f} req/s")
    print(
        f"  agent on an OpenAI-compatible HTTP model: {remote:6.1f} req/s  "
        f"= {remote / mock:.0%} of the mock (target >= 60 %)"
    )
    if baseline is not None:
        base = statistics.median(figures["baseline"])
        print(f"  the same on the baseline checkout:        {base:6.1f} req/s  = {base / mock:.0%}")
    ratios = [o / m for o, m in zip(figures["openai"], figures["mock"], strict=True)]
    print(f"  (median of each round's own HTTP/mock ratio: {statistics.median(ratios):.0%})")
    own = {name: statistics.median(values) for name, values in cpu.items()}
    print("server CPU a request, all its threads (medians; what each costs on a core of its own):")
    for name, label in (("mock", "mock"), ("openai", "HTTP model"), ("baseline", "baseline")):
        if name in own:
            rate = own["mock"] / own[name]
            print(f"  {label:10} {own[name]:5.2f} ms  = {rate:.0%} of the mock's rate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fake-model", action="store_true")
    parser.add_argument("--serve", choices=KINDS)
    parser.add_argument("--load", metavar="URL")
    parser.add_argument("--model-url", default="")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--baseline", type=Path, help="also the HTTP model on this checkout")
    args = parser.parse_args()
    if args.fake_model:
        fake_model_main()
    elif args.load:
        print(json.dumps(asyncio.run(_hammer(args.load, args.requests, args.concurrency))))
    elif args.serve:
        result = asyncio.run(_serve(args.serve, args.model_url, args.requests, args.profile))
        print(json.dumps(result))
    else:
        compare_v1(args.requests, args.rounds, args.profile, args.baseline)


if __name__ == "__main__":
    main()
