"""The ten ordinary skills tried from outside install without --yes (issue 25, item 17).

pdf, docx, xlsx, a changelog, web app testing, an MCP server template, brand guidelines,
a skill creator, jq work and GitHub issues: the corpus holds one of each, and
`habakkuk skills install PATH` must place every one with the real scan (the skill
creator's template once crashed the scan, so its install failed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config

ORDINARY = Path(__file__).resolve().parents[1] / "skills_corpus" / "ordinary"
TRIED = [
    "pdf-merge",
    "docx",
    "xlsx",
    "changelog-update",
    "webapp-testing",
    "mcp-server-builder",
    "brand-guidelines",
    "skill-creator",
    "jq-json",
    "github-issues",
]


@pytest.mark.parametrize("name", TRIED)
def test_an_ordinary_skill_installs_without_yes(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    write_config(mock_config())
    code = main(["skills", "install", str(ORDINARY / name)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "scan: dangerous" not in out and "installed into" in out
    assert (home.root / "skills" / name / "SKILL.md").is_file()
