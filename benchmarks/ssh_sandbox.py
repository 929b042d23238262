"""An exec round trip through the ssh sandbox on loopback, the control socket warm
(issue 36: at most 50 ms).

It starts its own sshd on 127.0.0.1 (tests/tools/sandbox/sshd.py: a throwaway host key
and client key, Debian's openssh-server), opens the shared connection once, then times
`run_command("true")` through the sandbox: the ssh client over the control socket, the
wrapper that records the process group there, and our own spawning and reading. Beside
it, a bare `ssh ... true` over the same socket: the floor any ssh-driven exec pays.

    PYTHONPATH=. python benchmarks/ssh_sandbox.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from habakkuk.tools.shell import run_command  # noqa: E402  # after the path is set
from tests.tools.sandbox.conftest import SshWorld  # noqa: E402
from tests.tools.sandbox.sshd import Sshd  # noqa: E402

TARGET_MS = 50.0


def summary(name: str, seconds: list[float]) -> float:
    """Print the median and the 90th percentile in ms; return the median."""
    ms = sorted(s * 1000 for s in seconds)
    median = statistics.median(ms)
    p90 = ms[int(len(ms) * 0.9) - 1]
    print(f"{name:<44} median {median:6.1f} ms   p90 {p90:6.1f} ms   ({len(ms)} rounds)")
    return median


async def main(rounds: int) -> int:
    root = Path(tempfile.mkdtemp(prefix="hk-bench-", dir="/tmp"))
    (root / "sshd").mkdir()
    server = Sshd(root / "sshd")
    server.start()
    world = SshWorld(root / "world", server)
    sandbox = world.sandbox()
    try:
        argv = await sandbox.connect()  # the control socket, warm from here on
        for _ in range(3):
            await run_command("true", world.workspace, timeout=30, sandbox=sandbox)
        bare = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run([*argv, "true"], check=True)
            bare.append(time.perf_counter() - started)
        ours = []
        for _ in range(rounds):
            started = time.perf_counter()
            result = await run_command("true", world.workspace, timeout=30, sandbox=sandbox)
            ours.append(time.perf_counter() - started)
            assert result.exit_code == 0, result.output
        floor = summary("bare ssh over the control socket", bare)
        median = summary("exec round trip through the ssh sandbox", ours)
        print(f"{'our part (wrapper, spawn, read)':<44} median {median - floor:6.1f} ms")
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"load average while measured: {load} (bare ssh is the floor on this machine)")
        verdict = "ok" if median <= TARGET_MS else "OVER"
        print(f"target <= {TARGET_MS:g} ms with the control socket warm: {verdict}")
        return 0 if median <= TARGET_MS else 1
    finally:
        await sandbox.close()
        server.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)))
