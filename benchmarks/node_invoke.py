"""Device node invoke round trip on loopback: the server's node_invoke path (hub.invoke:
an invoke frame over the websocket, the device runs the command, its result frame back)
against a real `habakkuk node run` process.

The server (a runtime with http: and nodes: on a temporary home) runs in this process;
the device is a second process paired with a fresh code and sharing a folder, so
`files.get` of a small file measures the protocol and both event loops rather than a
program the device would start (notify-send, screencapture). Target (issue 35): <= 20 ms.
`--durable` names each call by a turn and a tool call, as node_invoke does: each is a
node_invoke job (enqueued, claimed by this process's pool, completed) and the figure
includes that.

    python benchmarks/node_invoke.py [--calls 500] [--size 1024] [--durable]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _harness import fresh_home, mock_config


async def bench(calls: int, size: int, durable: bool) -> None:
    from habakkuk.engine.config import load_config
    from habakkuk.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = fresh_home(root / "home", mock_config(extra="http: {}\nnodes: {}\n"))
        runtime = await Runtime.open(home, load_config(home))
        if durable:
            runtime.start_workers(channels=False)  # the node_invoke pool
        server = await runtime.http.start("127.0.0.1:0")
        hub = runtime.devices
        assert hub is not None
        shared = root / "shared"
        shared.mkdir()
        (shared / "small.bin").write_bytes(os.urandom(size))
        code = (await hub.new_code()).code
        device = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "habakkuk.cli", "node", "run", "--server", server.url,
            "--code", code, "--name", "bench", "--dir", str(shared),
            env={**os.environ, "HABAKKUK_HOME": str(root / "device")},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            while "bench" not in hub.live:  # paired and connected
                await asyncio.sleep(0.05)
                assert device.returncode is None, "node run exited"
            for _ in range(20):  # warm both sides
                await hub.invoke("bench", "files.get", {"path": "small.bin"})
            times = []
            for n in range(calls):
                call = ("turn_bench", f"toolu_{n}") if durable else None
                began = time.perf_counter()
                result = await hub.invoke("bench", "files.get", {"path": "small.bin"}, 30, call)
                times.append((time.perf_counter() - began) * 1000)
                assert not result.error and len(result.files[0].data) == size
            times.sort()
            p95 = times[int(len(times) * 0.95) - 1]
            how = "as node_invoke jobs" if durable else "direct"
            print(
                f"node invoke round trip (files.get of {size} B, loopback, {calls} calls, {how}):"
            )
            print(
                f"  median {statistics.median(times):.2f} ms, p95 {p95:.2f} ms, "
                f"mean {statistics.mean(times):.2f} ms, max {times[-1]:.2f} ms (target <= 20 ms)"
            )
        finally:
            device.kill()
            await device.wait()
            await runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--durable", action="store_true", help="each call a node_invoke job")
    args = parser.parse_args()
    asyncio.run(bench(args.calls, args.size, args.durable))


if __name__ == "__main__":
    main()
