"""HTTP surface throughput: /healthz and POST /api/chat req/s, and SSE fan-out to 200 clients.

The server (a runtime on a temporary home with the mock provider) runs in this
process; the load comes from a second process on loopback (aiohttp, bounded
concurrency, a bounded number of requests). Turn workers are not started, so
POST /api/chat measures the path up to "turn queued" (web.db append, session
binding, jobs insert) without turns competing for the CPU.

Targets (issue 6): >= 3,000 req/s /healthz, >= 500 req/s chat enqueue on 2 cores.
/healthz before and after a change and beside a peer (nanobot): benchmarks/health_bench.py.

`--v1` measures POST /v1/chat/completions instead (a whole turn per request, the turn
workers running, an agent in `full` mode with its default tools): the agent on the mock
provider beside the same agent on an OpenAI-compatible provider over HTTP (the fake
model server, in a process of its own, answering "ok" at once), each round in a fresh
server process, the two alternating; medians and their ratio printed. Target (issue 27):
the HTTP model at >= 60 % of the mock's figure. `--profile DIR` writes a cProfile of each
server process there. The pieces live in benchmarks/v1_model.py.

    python benchmarks/http_bench.py [--requests 4000] [--concurrency 32] [--clients 200]
    python benchmarks/http_bench.py --v1 [--v1-requests 400] [--v1-rounds 4] [--profile DIR]
        [--baseline CHECKOUT]   (also the HTTP model on that checkout's code)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import mock_config
from v1_model import compare_v1

TOKEN = "bench-token-0123456789"
CONFIG = mock_config(
    model="mock/scripted",
    mode="full",
    extra="http:\n  listen: 127.0.0.1:0\n  token_env: HABAKKUK_BENCH_TOKEN\n",
)


# -- the load (second process) ------------------------------------------------------------


async def _hammer(url: str, count: int, concurrency: int, body: Any = None) -> dict[str, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    next_index = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            started = time.perf_counter()
            if body is None:
                response = await session.get(url, headers=headers)
            else:
                payload = dict(body, id=f"bench-{index}", conversation=f"bench-{index % 50}")
                response = await session.post(url, json=payload, headers=headers)
            await response.read()
            latencies.append(time.perf_counter() - started)
            statuses[response.status] = statuses.get(response.status, 0) + 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": count,
        "seconds": elapsed,
        "rps": count / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "statuses": statuses,
    }


async def _fan_out(base: str, clients: int, messages: int) -> dict[str, Any]:
    """`clients` streams on one conversation; time from POST to the last client's receipt."""
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    received: list[dict[str, float]] = [{} for _ in range(clients)]
    everyone: dict[str, asyncio.Event] = {f"fan-{n}": asyncio.Event() for n in range(messages)}
    counts: dict[str, int] = dict.fromkeys(everyone, 0)
    ready = asyncio.Event()
    connected = 0

    async def follow(session: aiohttp.ClientSession, index: int) -> None:
        nonlocal connected
        async with session.get(f"{base}/api/chat/fanout/events?after=0", headers=headers) as r:
            await r.content.readline()  # "retry:" line: the stream is open
            connected += 1
            if connected == clients:
                ready.set()
            async for raw in r.content:
                line = raw.decode()
                if line.startswith("data: ") and '"role":"user"' in line:
                    text = json.loads(line[6:])["text"]
                    received[index][text] = time.perf_counter()
                    counts[text] += 1
                    if counts[text] == clients:
                        everyone[text].set()
                    if len(received[index]) == messages:
                        return

    connector = aiohttp.TCPConnector(limit=clients + 8)
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = [asyncio.create_task(follow(session, i)) for i in range(clients)]
        await asyncio.wait_for(ready.wait(), 60)
        sent: dict[str, float] = {}
        for n in range(messages):
            text = f"fan-{n}"
            sent[text] = time.perf_counter()
            async with session.post(
                f"{base}/api/chat",
                json={"conversation": "fanout", "text": text, "id": text},
                headers=headers,
            ) as response:
                await response.read()
            # Wait for this message to reach everyone before the next one.
            await asyncio.wait_for(everyone[text].wait(), 60)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    spreads = [max(got[t] for got in received) - sent[t] for t in sent]
    return {
        "clients": clients,
        "messages": messages,
        "deliveries": sum(len(got) for got in received),
        "last_client_p50_ms": statistics.median(spreads) * 1000,
        "last_client_max_ms": max(spreads) * 1000,
    }


async def _baseline(requests: int, concurrency: int) -> dict[str, Any]:
    """The same load against a bare aiohttp handler in this process: the machine's ceiling."""
    from aiohttp import web

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/healthz", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = int(runner.addresses[0][1])
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--load-only",
            f"http://127.0.0.1:{port}/healthz",
            "--requests",
            str(requests),
            "--concurrency",
            str(concurrency),
            stdout=subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(process.communicate(), 600)
    finally:
        await runner.cleanup()
    return dict(json.loads(out))


def client_main(base: str, requests: int, concurrency: int, clients: int) -> None:
    async def run() -> dict[str, Any]:
        return {
            "healthz": await _hammer(f"{base}/healthz", requests, concurrency),
            "chat": await _hammer(
                f"{base}/api/chat", requests // 2, concurrency, {"text": "queued by the bench"}
            ),
            "fanout": await _fan_out(base, clients, 20),
        }

    print(json.dumps(asyncio.run(run())))


# -- the server (this process) ----------------------------------------------------------------


async def serve_and_measure(args: argparse.Namespace) -> dict[str, Any]:
    import os

    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import Home
    from habakkuk.runtime import Runtime

    os.environ["HABAKKUK_BENCH_TOKEN"] = TOKEN
    with tempfile.TemporaryDirectory(prefix="habakkuk-http-bench-") as tmp:
        home = Home(Path(tmp))
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        runtime = await Runtime.open(home, parse_config(CONFIG, home.config_path, home))
        try:
            server = await runtime.http.start()
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--client",
                server.url,
                "--requests",
                str(args.requests),
                "--concurrency",
                str(args.concurrency),
                "--clients",
                str(args.clients),
                stdout=subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(process.communicate(), 600)
            if process.returncode != 0:
                raise SystemExit(f"load process failed with exit code {process.returncode}")
            depth = await runtime.turns.queue_depth()
        finally:
            await runtime.close()
    result: dict[str, Any] = json.loads(out)
    result["queued_turns"] = sum(depth.values())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--load-only", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--v1", action="store_true", help="POST /v1: mock vs HTTP model")
    parser.add_argument("--v1-requests", type=int, default=400)
    parser.add_argument("--v1-rounds", type=int, default=4)
    parser.add_argument("--profile", type=Path, help="write each /v1 server's cProfile here")
    parser.add_argument("--baseline", type=Path, help="/v1: also the HTTP model on this checkout")
    args = parser.parse_args()
    if args.v1:
        compare_v1(args.v1_requests, args.v1_rounds, args.profile, args.baseline)
        return
    if args.client:
        client_main(args.client, args.requests, args.concurrency, args.clients)
        return
    if args.load_only:
        print(json.dumps(asyncio.run(_hammer(args.load_only, args.requests, args.concurrency))))
        return
    result = asyncio.run(serve_and_measure(args))
    baseline = asyncio.run(_baseline(args.requests, args.concurrency))
    health, chat, fan = result["healthz"], result["chat"], result["fanout"]
    print(
        f"GET /healthz: {health['rps']:.0f} req/s ({health['requests']} requests, "
        f"concurrency {args.concurrency}; p50 {health['p50_ms']:.1f} ms, "
        f"p99 {health['p99_ms']:.1f} ms; statuses {health['statuses']})"
    )
    print(f"  (bare aiohttp handler, same load, same machine now: {baseline['rps']:.0f} req/s)")
    print(
        f"POST /api/chat (turn queued): {chat['rps']:.0f} req/s ({chat['requests']} requests; "
        f"p50 {chat['p50_ms']:.1f} ms, p99 {chat['p99_ms']:.1f} ms; statuses {chat['statuses']}; "
        f"{result['queued_turns']} turns queued in all)"
    )
    print(
        f"SSE fan-out: {fan['clients']} clients x {fan['messages']} messages, "
        f"{fan['deliveries']} deliveries; POST to last client p50 "
        f"{fan['last_client_p50_ms']:.1f} ms, max {fan['last_client_max_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
