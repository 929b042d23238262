"""`habakkuk --help` wall time (target <= 0.25 s): median of N runs of the installed command."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main(runs: int = 15) -> None:
    command = shutil.which("habakkuk", path=str(Path(sys.executable).parent)) or "habakkuk"
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([command, "--help"], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    print(
        f"habakkuk --help: median {statistics.median(times) * 1000:.0f} ms, "
        f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms over {runs} runs"
    )


if __name__ == "__main__":
    main()
