"""A2A message/send round trip against POST /v1/chat/completions for the same turn.

One runtime on a temporary home (the mock provider answering at once, an agent in full
mode), its HTTP server on 127.0.0.1 with a token and `a2a.serve: true`. A client in a
second process sends, one at a time, a blocking A2A message (0.3 message/send and 1.0
SendMessage, each a fresh context) and a /v1 chat completion (a fresh session each), the
kinds interleaved so both see the same machine; each request runs a whole turn job. The
medians (and p90) are printed, and the ratio A2A / v1. Target (issue 35): within 20 %.

    python benchmarks/a2a_roundtrip.py [--requests 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import mock_config

from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.runtime import Runtime

TOKEN = "bench-token-0123456789"
CONFIG = mock_config(
    model="mock/scripted",
    mode="full",
    extra=(
        "http:\n  listen: 127.0.0.1:0\n  token_env: HABAKKUK_BENCH_TOKEN\na2a:\n  serve: true\n"
    ),
)


def _bodies(index: int) -> dict[str, tuple[str, dict[str, Any]]]:
    text = f"hello {index}"
    return {
        "a2a 0.3 message/send": (
            "/a2a",
            {
                "jsonrpc": "2.0",
                "id": index,
                "method": "message/send",
                "params": {
                    "message": {
                        "kind": "message",
                        "messageId": f"m03-{index}",
                        "role": "user",
                        "parts": [{"kind": "text", "text": text}],
                    }
                },
            },
        ),
        "a2a 1.0 SendMessage": (
            "/a2a",
            {
                "jsonrpc": "2.0",
                "id": index,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": f"m10-{index}",
                        "role": "ROLE_USER",
                        "parts": [{"text": text}],
                    }
                },
            },
        ),
        "POST /v1/chat/completions": (
            "/v1/chat/completions",
            {"model": "habakkuk/main", "messages": [{"role": "user", "content": text}]},
        ),
    }


async def _client(base: str, requests: int, warmup: int) -> dict[str, list[float]]:
    """The load: each kind once per round, one request at a time."""
    import aiohttp

    headers = {"Authorization": f"Bearer {TOKEN}"}
    timings: dict[str, list[float]] = {}
    async with aiohttp.ClientSession() as session:
        for index in range(warmup + requests):
            for kind, (path, body) in _bodies(index).items():
                started = time.perf_counter()
                async with session.post(base + path, json=body, headers=headers) as response:
                    answer = await response.json()
                elapsed = time.perf_counter() - started
                if response.status != 200 or "error" in answer:
                    raise SystemExit(f"{kind}: {response.status} {answer}")
                if index >= warmup:
                    timings.setdefault(kind, []).append(elapsed)
    return timings


async def _serve(requests: int, warmup: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HABAKKUK_BENCH_TOKEN"] = TOKEN
        home = Home(Path(tmp))
        runtime = await Runtime.open(home, parse_config(CONFIG, home.config_path, home))
        runtime.start_workers()
        server = await runtime.http.start("127.0.0.1:0")
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--client",
                server.url,
                "--requests",
                str(requests),
                "--warmup",
                str(warmup),
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
            out, _ = await process.communicate()
            if process.returncode != 0:
                raise SystemExit(f"the client failed ({process.returncode})")
            timings: dict[str, list[float]] = json.loads(out)
            return timings
        finally:
            await runtime.close()


def _report(timings: dict[str, list[float]]) -> None:
    medians = {}
    for kind, values in timings.items():
        values = sorted(values)
        medians[kind] = statistics.median(values) * 1000
        p90 = values[int(len(values) * 0.9) - 1] * 1000
        print(f"{kind:28} median {medians[kind]:7.2f} ms   p90 {p90:7.2f} ms   (n={len(values)})")
    v1 = medians["POST /v1/chat/completions"]
    for kind in ("a2a 0.3 message/send", "a2a 1.0 SendMessage"):
        ratio = medians[kind] / v1
        verdict = "within" if ratio <= 1.2 else "OVER"
        print(f"{kind} / v1: {ratio:.2f}x ({verdict} the 20 % target)")


def main() -> None:
    """Parse the arguments; run the server side (or, with --client, the load)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(_client(args.client, args.requests, args.warmup))))
        return
    _report(asyncio.run(_serve(args.requests, args.warmup)))


if __name__ == "__main__":
    main()
