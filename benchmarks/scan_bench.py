"""Scan time of a 1 MB skill folder (issue 15 "Benchmarks").

Builds a skill of mixed Markdown, Python and shell (some large files) in a temp dir and
times scan_folder: median of several runs. Prints figures only.
Run: .venv/bin/python benchmarks/scan_bench.py [RUNS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from habakkuk.knowledge.scan import scan_folder

MD = """## Step {i}

Run `git log --oneline -n {i}` and summarise it. See https://docs.python.org/3/ for details.

```bash
pip install requests
curl -o data-{i}.csv https://example.com/data-{i}.csv
python scripts/tool_{i}.py data-{i}.csv
```
"""
PY = """import subprocess
import sys

import requests


def step_{i}(path: str) -> int:
    r = requests.get("https://api.example.com/items/{i}", timeout=10)
    subprocess.run(["git", "status"], check=True)
    with open(path) as f:
        return len(f.read()) + len(r.text)
"""
SH = """for f in data/*.csv; do
  wc -l "$f" > "counts/$(basename "$f").txt"
done
git diff --stat HEAD~{i} | tail -1
"""


def build(root: Path, target: int = 1_000_000) -> int:
    """Write a skill of about `target` bytes; returns its size."""
    (root / "scripts").mkdir(parents=True)
    (root / "docs").mkdir()
    parts = {"SKILL.md": ["---\nname: bench\ndescription: A large skill.\n---\n"]}
    i = 0
    size = 0
    while size < target:
        kind = i % 3
        name = (
            ("docs/guide.md", "scripts/big.py", "scripts/big.sh")[kind]
            if i % 10
            else (f"scripts/small_{i}.py")
        )
        text = (MD, PY, SH)[kind if i % 10 else 1].format(i=i)
        parts.setdefault(name, []).append(text)
        size += len(text)
        i += 1
    for name, chunks in parts.items():
        (root / name).write_text("".join(chunks))
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        size = build(root)
        files = sum(1 for p in root.rglob("*") if p.is_file())
        times = []
        cpu = []  # the process's CPU time: what a busy shared machine does not inflate
        for _ in range(runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            report = scan_folder(root)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        print(f"folder: {size / 1e6:.2f} MB in {files} files; verdict {report.verdict}")
        print(
            f"scan_folder: median {statistics.median(times) * 1000:.0f} ms, "
            f"min {min(times) * 1000:.0f} ms over {runs} runs "
            f"({size / 1e6 / statistics.median(times):.2f} MB/s); "
            f"CPU median {statistics.median(cpu) * 1000:.0f} ms"
        )
        hostile = Path(tmp) / "hostile"
        hostile.mkdir()
        for ch, ext in (("(", "sh"), ("'", "py"), ("`", "md")):
            (hostile / f"line.{ext}").write_text(ch * 1_000_000)
        start, start_cpu = time.perf_counter(), time.process_time()
        scan_folder(hostile)
        print(
            f"three 1 MB single-character lines: {(time.perf_counter() - start) * 1000:.0f} ms"
            f" (CPU {(time.process_time() - start_cpu) * 1000:.0f} ms)"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
