"""`habakkuk backup` of the big home (benchmarks/big_home.py: 100,000 sessions and
1,000,000 messages by default): the time and size of the archive, then its restore.

Printed: the home's databases and their size on disk; the backup's time (snapshots,
compression, the read-back check with each database's integrity check: all of what
the command does less its printing), split into its parts (the snapshots and the check
timed alone), and the archive's size and ratio; the restore's time into an empty folder.
--repeat runs the backup that many times (median printed).

    python benchmarks/backup_bench.py [--sessions 100000] [--messages 1000000]
                                      [--home BIG_HOME] [--repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from habakkuk.services.backup import snapshot, take_backup
from habakkuk.services.backup_archive import read_archive
from habakkuk.services.backup_layout import Options, collect
from habakkuk.services.restore import restore


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="a home built by benchmarks/big_home.py")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    from big_home import build

    with tempfile.TemporaryDirectory(prefix="habakkuk-backup-bench-") as tmp:
        work = Path(tmp)
        root = args.home
        if root is None:
            root = work / "big"
            started = time.perf_counter()
            totals = build(root, args.sessions, args.messages)
            print(
                f"big home built in {time.perf_counter() - started:.0f} s: "
                f"{totals['sessions']:,} sessions, {totals['messages']:,} messages"
            )
        entries = collect(root, Options())
        databases = [e for e in entries if e.database]
        on_disk = sum(e.path.stat().st_size for e in entries)
        print(
            f"home: {len(entries)} files, {len(databases)} databases, {_mb(on_disk)}: "
            + ", ".join(f"{e.name} {_mb(e.path.stat().st_size)}" for e in databases)
        )
        times: list[float] = []
        archive = work / "backup-0.tar.gz"
        for run in range(args.repeat):
            archive = work / f"backup-{run}.tar.gz"
            started = time.perf_counter()
            report = take_backup(root, archive, Options())
            times.append(time.perf_counter() - started)
            print(f"backup {run + 1}: {times[-1]:.1f} s")
            if run + 1 < args.repeat:
                archive.unlink()
        size = archive.stat().st_size
        print(
            f"backup (median of {len(times)}): {statistics.median(times):.1f} s,"
            f" archive {_mb(size)} ({size / on_disk:.0%} of the home's {_mb(on_disk)}),"
            f" {on_disk / 1e6 / statistics.median(times):,.0f} MB/s of home;"
            f" {len(report.manifest.files)} files verified"
        )
        # Its parts, each alone: the snapshots, and the read-back check of the archive.
        started = time.perf_counter()
        for number, entry in enumerate(databases):
            copy = work / f"snapshot-{number}.db"
            snapshot(entry.path, copy)
            copy.unlink()
        snapshots = time.perf_counter() - started
        scratch = work / "scratch"
        scratch.mkdir()
        started = time.perf_counter()
        read_archive(archive, scratch)
        check = time.perf_counter() - started
        print(
            f"of which: snapshots {snapshots:.1f} s, read-back check {check:.1f} s,"
            f" tar + gzip {statistics.median(times) - snapshots - check:.1f} s"
        )
        started = time.perf_counter()
        restored = restore(archive, work / "restored")
        print(
            f"restore into an empty home: {time.perf_counter() - started:.1f} s"
            f" ({restored.files} files, {restored.databases} databases, each checked)"
        )


if __name__ == "__main__":
    main()
