"""read_document on a 300-page PDF and a 50,000-row XLSX: time and peak memory (issue 28).

Targets: each within 2 s and 200 MB peak on this machine. The files are written by code
(tests/tools/document_files.py: a minimal PDF writer; the XLSX as zipfile + the XML
Excel writes, shared strings included). Each read runs in a fresh child process, so
its peak resident memory (getrusage's ru_maxrss) is the read's own plus the
interpreter's, and is printed beside a child that only imports the reader.

Two reads of each file: "tool" is read_document as the tool calls it (the output cut
at 400 KB, the parse stopping there), "whole" reads the entire text (no cut), so the
parse of every page and every row is measured too. Wall time and CPU time are both
printed and judged: on a shared machine the wall time includes waiting for a core,
and the CPU time is the steadier figure.

Run: python benchmarks/documents_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAGES = 300
ROWS = 50_000
TARGET_SECONDS = 2.0
TARGET_MB = 200.0


def build(folder: Path) -> dict[str, Path]:
    """The two documents, written into `folder`."""
    from tests.tools.document_files import pdf_bytes, xlsx_bytes

    lines = 40
    pages = [
        [f"Page {p} line {n}: the quick brown fox jumps over the lazy dog" for n in range(lines)]
        for p in range(1, PAGES + 1)
    ]
    rows: list[list[str | int | float]] = [["name", "count", "price", "category", "note"]]
    rows += [
        [f"item {n}", n, n * 1.25, f"category {n % 50}", "in stock" if n % 3 else "sold out"]
        for n in range(1, ROWS)
    ]
    pdf = folder / "report.pdf"
    pdf.write_bytes(pdf_bytes(pages))
    xlsx = folder / "inventory.xlsx"
    xlsx.write_bytes(xlsx_bytes({"Inventory": rows}))
    return {"pdf": pdf, "xlsx": xlsx}


def child(path: str, mode: str) -> None:
    """Read `path` once (mode tool, whole or none) and print the figures as JSON."""
    from habakkuk.tools.documents.reader import read_document

    if mode == "none":
        chars, wall, cpu = 0, 0.0, 0.0
    else:
        limit = 400_000 if mode == "tool" else 1 << 40
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        with open(path, "rb") as handle:
            document = read_document(handle, Path(path).name, limit=limit)
        wall, cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
        chars = len(document.text)
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": peak_mb(), "chars": chars}))


def peak_mb() -> float:
    """This process's peak resident memory in MB: VmHWM, the high-water mark of its own
    address space (ru_maxrss would also count the parent's peak, inherited at fork)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(path: Path, mode: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", str(path), mode],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    figures: dict[str, float] = json.loads(result.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("PATH", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory() as folder:
        files = build(Path(folder))
        baseline = measure(files["pdf"], "none")["peak_mb"]
        print(f"files: {PAGES}-page PDF {files['pdf'].stat().st_size / 1e6:.1f} MB, "
              f"{ROWS:,}-row XLSX {files['xlsx'].stat().st_size / 1e6:.1f} MB; "
              f"median of {args.rounds} rounds, each read in a fresh process")  # fmt: skip
        print(f"a process that only imports the reader peaks at {baseline:.0f} MB")
        print(f"{'read':<12} {'wall s':>7} {'cpu s':>7} {'peak MB':>8} {'chars':>10}  "
              f"targets: {TARGET_SECONDS:.0f} s, {TARGET_MB:.0f} MB")  # fmt: skip
        for kind, path in files.items():
            for mode in ("tool", "whole"):
                runs = [measure(path, mode) for _ in range(args.rounds)]
                wall = statistics.median(r["wall"] for r in runs)
                cpu = statistics.median(r["cpu"] for r in runs)
                peak = max(r["peak_mb"] for r in runs)
                verdict = ", ".join(
                    f"{what} {'ok' if good else 'MISSED'}"
                    for what, good in (
                        ("wall", wall <= TARGET_SECONDS),
                        ("cpu", cpu <= TARGET_SECONDS),
                        ("memory", peak <= TARGET_MB),
                    )
                )
                print(
                    f"{kind + ' ' + mode:<12} {wall:7.2f} {cpu:7.2f} {peak:8.0f} "
                    f"{int(runs[0]['chars']):>10,}  {verdict}"
                )


if __name__ == "__main__":
    main()
