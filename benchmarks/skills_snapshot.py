"""The # Skills snapshot at 500 skills: time to list them and build the prompt section
(cold: a fresh service that parses every SKILL.md; warm: the same service again, which
only stats them), and what the section costs (bytes, and tokens as bytes / 4).

Target (issue 15): the section within 8 KB of listing however many skills there are.
Prints figures only. Run: .venv/bin/python benchmarks/skills_snapshot.py [SKILLS]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from habakkuk.engine.agent.prompt import skills_section
from habakkuk.engine.config import parse_config
from habakkuk.engine.home import Home
from habakkuk.knowledge.skills.service import Skills, prompt_skill
from habakkuk.knowledge.skills.types import ScanReport

CONFIG = "providers:\n  mock:\n    type: mock\nagents:\n  main:\n    model: mock/scripted\n"
VERBS = ["write", "check", "deploy", "review", "plan", "clean", "sync", "draft", "file", "tidy"]
THINGS = ["report", "invoices", "site", "backups", "notes", "garden", "budget", "mail", "trip"]


def no_scan(files: Mapping[str, bytes]) -> ScanReport:
    return ScanReport("clean")


def make_skills(root: Path, count: int) -> None:
    for n in range(count):
        verb, thing = VERBS[n % len(VERBS)], THINGS[(n // len(VERBS)) % len(THINGS)]
        name = f"{verb}-{thing}-{n:04d}"
        folder = root / name
        folder.mkdir(parents=True)
        description = f"How to {verb} the {thing}: the steps, the checks and who to tell when done."
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n"
            "1. Start.\n2. Finish.\n",
            encoding="utf-8",
        )


async def build(skills: Skills) -> str:
    snap = await skills.snapshot("main")
    return skills_section(tuple(prompt_skill(s) for s in snap.skills), snap.missing)


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home")
        home.prepare()
        home.config_path.write_text(CONFIG, encoding="utf-8")
        config = parse_config(CONFIG, home.config_path, home)
        make_skills(home.root / "skills", count)

        colds = []
        for _ in range(5):
            fresh = Skills(home.root, config, scan=no_scan)
            start = time.perf_counter()
            section = await build(fresh)
            colds.append(time.perf_counter() - start)
        warm_service = Skills(home.root, config, scan=no_scan)
        await build(warm_service)
        warms = []
        for _ in range(20):
            start = time.perf_counter()
            section = await build(warm_service)
            warms.append(time.perf_counter() - start)
        last = max(p.name for p in (home.root / "skills").iterdir() if not p.name.startswith("."))
        start = time.perf_counter()
        named = await warm_service.invocation("main", last, "go")
        invoke = time.perf_counter() - start

    size = len(section.encode("utf-8"))
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    listing = sum(len(line.encode("utf-8")) + 1 for line in lines)
    print(f"skills: {count}")
    print(f"cold list + section: median {statistics.median(colds) * 1000:.1f} ms")
    print(f"warm list + section: median {statistics.median(warms) * 1000:.1f} ms")
    print(f"explicit invocation of the last skill: {invoke * 1000:.1f} ms ({len(named)} chars)")
    print(f"section: {size} bytes, ~{size // 4} tokens ({len(lines)} skills listed)")
    print(f"listing: {listing} bytes (target <= 8192: {'met' if listing <= 8192 else 'MISSED'})")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
