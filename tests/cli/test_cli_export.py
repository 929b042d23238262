"""`habakkuk sessions export -o`: missing folders are created; a path that cannot be
written is one line and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from habakkuk.cli import main
from tests.conftest import mock_config

ENTRY = "import sys; from habakkuk.cli import main; sys.exit(main(sys.argv[1:]))"


def a_session(home: Any, write_config: Any, capsys: Any) -> str:
    write_config(mock_config('- text: "Hello."'))
    assert main(["run", "--json", "the export question"]) == 0
    return str(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["session"])


def export(home: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "sessions", "export", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HABAKKUK_HOME": str(home.root)},
        timeout=120,
    )


def test_export_creates_the_missing_folders_of_the_output_path(
    home: Any, write_config: Any, capsys: Any, tmp_path: Path
) -> None:
    session = a_session(home, write_config, capsys)
    target = tmp_path / "not" / "yet" / "there.md"
    result = export(home, session, "-o", str(target))
    assert result.returncode == 0, result.stderr
    assert "the export question" in target.read_text()
    assert result.stderr.strip() == f"wrote {target}"


def test_an_output_path_that_cannot_be_written_is_one_line_and_exit_2(
    home: Any, write_config: Any, capsys: Any, tmp_path: Path
) -> None:
    session = a_session(home, write_config, capsys)
    (tmp_path / "plain").write_text("a file, not a folder")
    for target in (tmp_path / "plain" / "x.md", tmp_path / "plain" / "deeper" / "x.md"):
        result = export(home, session, "-o", str(target))
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"habakkuk: sessions export: cannot write {target}: ")
