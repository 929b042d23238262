"""The layers stay apart: the engine never imports the UI or anything above it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is part of the test extra"
    result = subprocess.run([lint_imports], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_importing_the_engine_and_runtime_loads_no_textual() -> None:
    code = (
        "import sys, habakkuk.engine.agent.turn, habakkuk.runtime\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'anthropic', 'openai', 'litellm')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
