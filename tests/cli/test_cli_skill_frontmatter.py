"""A SKILL.md whose frontmatter is not valid YAML (issue 25, item 19).

Real skills write `description: Use when: the user asks for X`, which YAML refuses (an
unquoted ": "). Such a skill installs, lists and loads with the description read as the
text to the end of the line, and every surface that shows it says so (the YAML error and
its line); a frontmatter that not even the lenient reader can read is refused naming the
YAML error and its line, not "needs frontmatter with a name and a description".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config

LENIENT = """---
name: triage
description: Use when: the user asks to triage GitHub issues
license: MIT
---

1. List the open issues with `gh issue list`.
"""
BROKEN = """---
name: triage
description: Triage issues.
  - one: two: three
---

Steps.
"""


def skill(root: Path, text: str) -> Path:
    folder = root / "triage"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_an_unquoted_colon_installs_shows_and_doctors_with_a_warning(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_config(mock_config())
    source = skill(tmp_path / "src", LENIENT)
    code, out, err = run(capsys, "skills", "install", str(source))
    assert code == 0, err
    warning = "SKILL.md line 3: the frontmatter is not valid YAML (mapping values are not allowed"
    assert f"  warning: {warning}" in out and "description taken as the text" in out
    assert out.index("warning:") < out.index("installed into")

    code, out, err = run(capsys, "skills", "show", "triage")
    assert code == 0, err
    assert "Use when: the user asks to triage GitHub issues" in out
    assert f"warning: {warning}" in out and "gh issue list" in out

    code, out, _ = run(capsys, "doctor")
    lines = [line for line in out.splitlines() if " skills: " in line]
    assert lines[0] == "ok    skills: 1 shared, 0 agents' own"
    assert lines[1].startswith(f"WARN  skills: skill triage: {warning}")


def test_a_frontmatter_even_the_lenient_reader_cannot_read_names_the_yaml_error(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_config(mock_config())
    source = skill(tmp_path / "src", BROKEN)
    code, _, err = run(capsys, "skills", "install", str(source))
    assert code != 0
    assert "needs frontmatter" not in err and "Traceback" not in err
    assert "SKILL.md's frontmatter cannot be read: line 4:" in err
    assert len(err.strip().splitlines()) == 1
    assert not (home.root / "skills" / "triage").exists()

    skill(home.root / "skills", BROKEN)  # made by hand: skipped, doctor says why
    code, out, _ = run(capsys, "doctor")
    assert code == 0
    assert (
        f"WARN  skills: {home.root / 'skills' / 'triage'}: skipped: SKILL.md's frontmatter "
        "cannot be read: line 4: mapping values are not allowed"
    ) in out
