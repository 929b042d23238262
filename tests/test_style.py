"""The code stays ruff-clean and typed: style is checked by the same command as behaviour."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def test_mypy_finds_nothing_in_the_package() -> None:
    result = subprocess.run(
        [_tool("mypy"), "habakkuk"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
