"""view_image on a 20 MB PNG (issue 28, target: at most 1 s): time and peak memory.

The PNG is a 2,600 x 2,600 photo-like picture (smooth gradients under noise, so PNG
cannot shrink it below 20 MB), written once into --dir. Each measured run is the whole
tool call as a turn makes it: read the workspace file, tell its type by its bytes,
check the header, decode, scale to 1,568 px JPEG, store the blob. Runs go in a fresh
interpreter each, so the peak resident memory (ru_maxrss) is this call's own: the
figure printed is the peak minus the interpreter's resident size just before the call,
with Pillow and the tool already imported.

Prints the file's size, the time of each run, their median, and the peak memory.
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

SIDE = 2_600
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
    import resource
    import time

    import PIL.Image  # noqa: F401  # imported before the baseline: not the call's memory

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
    before = _resident_mb()
    started = time.perf_counter()
    done = asyncio.run(registry.call_with_media(use, ctx, {"view_image"}))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    if done.result.is_error or not done.media:
        raise SystemExit(f"view_image failed: {done.result.text}")
    print(json.dumps({"seconds": seconds, "peak_mb": peak - before, "result": done.result.text}))


def _resident_mb() -> float:
    """This process's resident size now (Linux: /proc/self/statm)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


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
    print(f"peak memory of the call: {max(r['peak_mb'] for r in runs):.0f} MB")


if __name__ == "__main__":
    main()
