"""The code stays ruff-clean and typed: style is checked by the same command as behaviour."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN))
    assert found, f"{name} is part of the test extra"
    return found


def test_ruff_finds_nothing() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "habakkuk", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("tree", ["habakkuk", "tests"])
def test_mypy_strict_finds_nothing(tree: str) -> None:
    result = subprocess.run(
        [_tool("mypy"), tree],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# `# type: ignore[code]  # why`: the code keeps the ignore from hiding a second error on
# the line, the reason tells the next engineer whether it may go.
IGNORE = re.compile(r"#\s*type:\s*ignore")
IGNORE_WITH_REASON = re.compile(r"#\s*type:\s*ignore\[[a-z0-9, -]+\]\s+#\s*\S")


def test_every_type_ignore_names_its_code_and_a_reason() -> None:
    bare: list[str] = []
    for folder in ("habakkuk", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "skills_corpus" in path.parts:
                continue  # skill folders the scanner reads: data, not our code
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, start=1):
                if IGNORE.search(line) and not IGNORE_WITH_REASON.search(line):
                    bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bare, "a type: ignore without [code] and `# reason`:\n" + "\n".join(bare)
