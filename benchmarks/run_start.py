"""One-shot start: `habakkuk run "hi"` wall time against an instant OpenAI-compatible model,
this checkout beside a baseline checkout, in alternating runs (issue 27, item 5).

The model is the fake model server (tests/fakes/model_server.py, in a process of its
own) answering "ok" at once; the home is a fresh one whose agent is in `full` mode on
it. A second home has the same agent on the mock provider (no SDK, no HTTP): the
`run "hi" (mock)` line. Each run is a fresh `python -m habakkuk.cli run hi` with
PYTHONPATH set to the checkout, so both trees run in this venv; `habakkuk --help` is
timed the same way. Both compile their modules once, as an installed package has: the
runs write their bytecode under a temporary PYTHONPYCACHEPREFIX (never into the
checkouts), even where PYTHONDONTWRITEBYTECODE is set (it is on the project's machines:
every run would otherwise compile every module of the tree from source, a third of a
second).
Medians printed, with the ratio ours / baseline. Target: run <= 0.6 s on the machine
where it was 1.0 s; --help no slower.

    python benchmarks/run_start.py [--baseline CHECKOUT] [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OURS = HERE.parent
CONFIG = (
    "providers:\n  remote: {{type: openai, base_url: '{url}/v1', key_env: BENCH_MODEL_KEY}}\n"
    "agents:\n  main: {{model: remote/bench-model, mode: full}}\n"
)
MOCK_CONFIG = (
    "providers:\n  mock: {type: mock, script: [ok]}\nagents:\n  main: {model: mock/x, mode: full}\n"
)
# (label, home, command): the model over HTTP, the mock, and --help.
COMMANDS = (
    ('habakkuk run "hi"', "http", ("run", "hi")),
    ('run "hi" (mock)', "mock", ("run", "hi")),
    ("habakkuk --help", "http", ("--help",)),
)


def _timed(tree: Path, home: Path, pycache: Path, *args: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one command: CPU (user + system) still compares on a
    machine other work loads, where the wall time also counts waiting for a core."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HABAKKUK_HOME": str(home)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache / home.name)
    env["BENCH_MODEL_KEY"] = "bench-model-key"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", *args],
        cwd=home,  # `-m` puts the working folder first on sys.path: not a checkout
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: habakkuk {' '.join(args)} failed: {done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warm-up", type=int, default=2)
    args = parser.parse_args()
    trees = {"ours": OURS}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), "ours": OURS}
    fake = subprocess.Popen(
        [sys.executable, str(HERE / "v1_model.py"), "--fake-model"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(OURS)},
    )
    figures: dict[tuple[str, str, str], list[float]] = {}
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().strip()
        with tempfile.TemporaryDirectory(prefix="habakkuk-run-start-") as tmp:
            homes: dict[tuple[str, str], Path] = {}
            for name in trees:
                for kind, config in (("http", CONFIG.format(url=url)), ("mock", MOCK_CONFIG)):
                    home = Path(tmp) / f"{name}-{kind}"
                    home.mkdir()
                    (home / "config.yaml").write_text(config, encoding="utf-8")
                    homes[(name, kind)] = home
            for number in range(args.warm_up + args.runs):
                for label, kind, command in COMMANDS:
                    for name, tree in trees.items():
                        home = homes[(name, kind)]
                        took = _timed(tree, home, Path(tmp) / "pycache", *command)
                        if number >= args.warm_up:
                            for what, value in zip(("wall", "cpu"), took, strict=True):
                                figures.setdefault((name, label, what), []).append(value)
    finally:
        if fake.stdin is not None:
            fake.stdin.close()
        fake.wait(30)
    print(f"medians of {args.runs} runs each, alternating (after {args.warm_up} warm-up)")
    for label, _, _ in COMMANDS:
        for what in ("wall", "cpu"):
            line = f"  {label:18} {what:4}"
            medians = {name: statistics.median(figures[(name, label, what)]) for name in trees}
            for name, median in medians.items():
                line += f"  {name} {median * 1000:6.0f} ms"
            if len(trees) == 2:
                line += f"  ours/baseline {medians['ours'] / medians['baseline']:.2f}"
            print(line)


if __name__ == "__main__":
    main()
