"""WAL frames the queue writes per operation of the one-at-a-time cycle (enqueue; claim;
complete), by b-tree, beside a baseline checkout's.

Each page a commit writes is a WAL frame: two writes, a checksum of the page and its
writeback at the next checkpoint. Before each operation a second connection checkpoints
and truncates the WAL, so the WAL after it holds that operation's frames alone; each
frame's page number (its header) is looked up in `dbstat` to name its b-tree. The queue
first runs `--warm` cycles (a history of finished jobs), and `--failed` failed jobs lie
in the history (they sort between the done and the running jobs in the status order).

Usage: python benchmarks/queue_frames.py [CYCLES] [--warm W] [--failed F] [--baseline DIR]
DIR is another checkout (e.g. `git archive main | tar -x -C /tmp/main`): its habakkuk is
measured in a child process the same way, and the two are printed side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OPS = ("enqueue", "claim", "complete")
KIND = "bench"
WAL_HEADER, FRAME_HEADER = 32, 24


def _frame_pages(wal: Path, page_size: int) -> list[int]:
    """The page number of each frame in the WAL at `wal`."""
    data = wal.read_bytes() if wal.exists() else b""
    pages, offset = [], WAL_HEADER
    while offset + FRAME_HEADER <= len(data):
        pages.append(struct.unpack(">I", data[offset : offset + 4])[0])
        offset += FRAME_HEADER + page_size
    return pages


async def _measure(cycles: int, warm: int, failed: int) -> dict[str, dict[str, float]]:
    """Mean frames per operation, by b-tree (and "all"), over `cycles` cycles."""
    from habakkuk.engine.jobs import MIGRATIONS, JobQueue
    from habakkuk.engine.store import SqliteDatabase

    path = Path(tempfile.mkdtemp()) / "control.db"
    queue = JobQueue(await SqliteDatabase.open(path, MIGRATIONS, inline=True))
    now = time.time()
    rows = [(f"failed-{n}", KIND, "failed", now, now) for n in range(failed)]
    await queue.db.write(
        lambda conn: conn.executemany(
            "INSERT INTO jobs(id, kind, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            rows,
        )
    )
    for number in range(warm):
        await queue.enqueue(f"warm-{number}", KIND, {"i": number})
        lease = await queue.claim([KIND])
        assert lease is not None
        await queue.complete(lease, {"ok": True})
    side = sqlite3.connect(path)
    page_size = int(side.execute("PRAGMA page_size").fetchone()[0])
    wal = Path(f"{path}-wal")
    counts = {op: collections.Counter[str]() for op in OPS}
    lease = None
    for number in range(cycles):
        for op in OPS:
            side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if op == "enqueue":
                await queue.enqueue(f"job-{number}", KIND, {"i": number})
            elif op == "claim":
                lease = await queue.claim([KIND])
            else:
                assert lease is not None
                await queue.complete(lease, {"ok": True})
            pages = _frame_pages(wal, page_size)
            owner = dict((p, name) for name, p in side.execute("SELECT name, pageno FROM dbstat"))
            counts[op].update(owner.get(page, "other") for page in pages)
            counts[op]["all"] += len(pages)
    side.close()
    await queue.db.close()
    return {op: {name: n / cycles for name, n in c.items()} for op, c in counts.items()}


def _child(root: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """`_measure` in a child process importing habakkuk from the checkout at `root`."""
    command = [sys.executable, __file__, str(args.cycles), "--warm", str(args.warm)]
    command += ["--failed", str(args.failed), "--json"]
    env = os.environ | {"PYTHONPATH": str(root)}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, dict[str, float]] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cycles", type=int, nargs="?", default=300)
    parser.add_argument("--warm", type=int, default=5000, help="cycles run before measuring")
    parser.add_argument("--failed", type=int, default=0, help="failed jobs in the history")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout to compare")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(_measure(args.cycles, args.warm, args.failed))))
        return
    here = Path(__file__).resolve().parent.parent
    sides = {"this": _child(here, args)}
    if args.baseline is not None:
        if not (args.baseline / "habakkuk").is_dir():
            sys.exit(f"--baseline {args.baseline}: no habakkuk package there")
        sides = {"baseline": _child(args.baseline.resolve(), args)} | sides
    print(
        f"WAL frames per operation, mean of {args.cycles} cycles after {args.warm}"
        f" (and {args.failed} failed jobs in the history):"
    )
    for op in (*OPS, "cycle"):
        cells = []
        for name, got in sides.items():
            if op == "cycle":
                cells.append(f"{name} {sum(got[o]['all'] for o in OPS):5.2f}")
                continue
            trees = ", ".join(
                f"{t} {n:.2f}" for t, n in sorted(got[op].items()) if t != "all" and n >= 0.005
            )
            cells.append(f"{name} {got[op]['all']:5.2f} ({trees})")
        print(f"  {op:<9}" + " | ".join(cells))


if __name__ == "__main__":
    main()
