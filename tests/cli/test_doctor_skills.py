"""`habakkuk doctor` counts the skills and warns about every folder that is not one."""

from __future__ import annotations

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config
from tests.knowledge.skills.conftest import write_skill


def test_doctor_warns_about_skipped_skill_folders_with_path_and_reason(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config())
    shared = home.root / "skills"
    write_skill(shared, "weekly-report")
    write_skill(home.root / "agents" / "main" / "skills", "mine")
    (shared / "Not_A_Name").mkdir(parents=True)
    (shared / "empty").mkdir()
    (shared / ".backups").mkdir()
    assert main(["doctor"]) == 0  # a warning, not a failure
    lines = [line for line in capsys.readouterr().out.splitlines() if " skills: " in line]
    assert lines == [
        "ok    skills: 1 shared, 1 agents' own",
        f"WARN  skills: {shared / 'Not_A_Name'}: skipped: the name does not match "
        "^[a-z0-9][a-z0-9-]{0,63}$",
        f"WARN  skills: {shared / 'empty'}: skipped: no SKILL.md",
    ]
