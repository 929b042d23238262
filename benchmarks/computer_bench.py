"""The computer toolset on a real Xvfb: how long the agent waits for what it sees.

Starts an agent's desktop (Xvfb, -noreset, a fresh cookie) at 1920x1080, then times:
the desktop's start; a screenshot as computer_screenshot takes it (import captures the
root window, Pillow scales it with a box filter to 1366x768 and encodes the PNG); a
click as computer_click sends it without its screenshot (one chained xdotool command);
and typing 37 characters. Each is the median of --runs runs; the desktop is stopped at
the end (its whole process group).
Run: python benchmarks/computer_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from habakkuk.engine.computer_config import ComputerConfig  # after the path
from habakkuk.tools.computer.desk import Desktops  # after the path


async def timed(work: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    """Milliseconds of each of `runs` awaits of `work`."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    return times


async def main(runs: int) -> None:
    settings = ComputerConfig(size="1920x1080")
    desktops = Desktops(lambda agent: settings)
    with tempfile.TemporaryDirectory(prefix="habakkuk-bench-") as home:
        start = time.perf_counter()
        desk = await desktops.desk(Path(home), "main")
        started = (time.perf_counter() - start) * 1000
        try:
            shots = await timed(desk.screenshot, runs)
            assert desk.geometry is not None
            shown = desk.geometry.shown
            clicks = await timed(lambda: desk.backend.click(10, 10, "left", 1), runs)
            text = "The quick brown fox jumps over a dog."
            typing = await timed(lambda: desk.backend.type_text(text), runs)
        finally:
            await desktops.close()
    print(f"desktop start (Xvfb 1920x1080 ready):  {started:7.1f} ms")
    print(f"screenshot, captured and scaled to {shown}: median {statistics.median(shots):7.1f} ms"
          f" (min {min(shots):.1f}, max {max(shots):.1f}; {runs} runs)")  # fmt: skip
    print(f"click (one xdotool command):           median {statistics.median(clicks):7.1f} ms")
    print(f"typing 37 characters:                  median {statistics.median(typing):7.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
