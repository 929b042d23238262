"""view_image on a 20 MB PNG (issue 28, target: at most 1 s): time and peak memory.

The PNG is a 2,700 x 2,700 photo-like picture (smooth gradients under noise, so PNG
cannot shrink it below 20 MB), written once into --dir. Each measured run is the whole
tool call as a turn makes it: read the workspace file, tell its type by its bytes,
check the header, decode, scale to 1,568 px JPEG, store the blob. Runs go in a fresh
interpreter each, so the peak resident memory (VmHWM, which a new program starts afresh,
unlike ru_maxrss that execve keeps from the parent) is this call's own: the figure
printed is the peak minus the interpreter's resident size just before the call, with
Pillow, jsonschema and the tool already imported, as in a running runtime.

Prints the file's size, the time of each run, their median, the median CPU time of the
process during the call (on a shared machine the wall time also counts the waits for a
core), and the peak memory.
Run: python benchmarks/media_bench.py [--dir DIR] [--runs N]
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
from pathlib import Path

SIDE = 2_700
TARGET_BYTES = 20 * 1024 * 1024


def make_png(path: Path) -> int:
    """Write the test PNG (once) and return its size in bytes."""
    if path.exists():
        return path.stat().st_size
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(28)
    x = np.linspace(0, 255, SIDE, dtype=np.float32)
    base = (x[None, :, None] + x[:, None, None] * 0.5 + np.array([0, 60, 120])) % 256
    noise = rng.integers(0, 256, size=(SIDE, SIDE, 3), dtype=np.uint8)
    pixels = ((base.astype(np.uint16) + noise) // 2).astype(np.uint8)
    Image.fromarray(pixels, "RGB").save(path, "PNG", compress_level=1)
    size = path.stat().st_size
    if size < TARGET_BYTES * 0.95:
        raise SystemExit(f"the test PNG came out at {size:,} bytes, not about 20 MB")
    return size


def child(path: Path) -> None:
    """One measured call in this interpreter; prints {"seconds", "peak_mb", "result"}."""
    import time

    # Loaded in a running runtime before any call (the registry validates every call's
    # input with jsonschema): imported before the baseline, not counted as the call's.
    import jsonschema  # noqa: F401
    import PIL.Image  # noqa: F401

    from habakkuk.engine.events import EventBus
    from habakkuk.engine.llm.types import ToolUseBlock
    from habakkuk.engine.store import BlobStore
    from habakkuk.engine.toolkit.registry import ToolContext, ToolRegistry
    from habakkuk.tools.view_image import ViewImage

    root = path.parent
    ctx = ToolContext(
        agent="main",
        session="ses_bench",
        turn="turn_bench",
        workspace=root,
        mode="full",
        home=root / "home",
        blobs=BlobStore(root / "blobs"),
        bus=EventBus(),
    )
    registry = ToolRegistry()
    registry.register(ViewImage(), "media")
    use = ToolUseBlock("call_1", "view_image", {"path": path.name})
    before = _status_mb("VmRSS")
    started, cpu = time.perf_counter(), time.process_time()
    done = asyncio.run(registry.call_with_media(use, ctx, {"view_image"}))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _status_mb("VmHWM")
    if done.result.is_error or not done.media:
        raise SystemExit(f"view_image failed: {done.result.text}")
    figures = {"seconds": seconds, "cpu": cpu, "peak_mb": peak - before}
    print(json.dumps({**figures, "result": done.result.text}))


def _status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (Linux), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024  # kB
    raise SystemExit(f"no {field} in /proc/self/status (Linux only)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where the test PNG is kept (default: a temp dir)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return
    folder = args.dir or Path(tempfile.mkdtemp(prefix="media_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    png = folder / "big.png"
    size = make_png(png)
    print(f"test image: {png} ({size / (1024 * 1024):.1f} MB, {SIDE:,} x {SIDE:,} px)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(png)],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout
        runs.append(json.loads(out))
    times = [r["seconds"] for r in runs]
    print(f"result: {runs[0]['result']}")
    print("view_image times (s): " + ", ".join(f"{t:.3f}" for t in times))
    print(f"view_image median: {statistics.median(times):.3f} s (target <= 1 s)")
    cpu = statistics.median(r["cpu"] for r in runs)
    print(f"view_image CPU time, median: {cpu:.3f} s (what a loaded machine cannot inflate)")
    print(f"peak memory of the call: {max(r['peak_mb'] for r in runs):.0f} MB")


if __name__ == "__main__":
    main()
