"""`habakkuk run --skill NAME [PROMPT]`: the same message as /skill, in one turn."""

from __future__ import annotations

import json

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig
from tests.knowledge.skills.conftest import write_skill

ECHO = """
providers:
  mock:
    type: mock
    script:
      - 'echo: {input}'
agents:
  main:
    model: mock/x
"""


@pytest.fixture
def echo_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(ECHO)
    write_skill(
        home.root / "skills", "weekly-report", "Write the weekly report.", body="1. Read the board."
    )
    return home


def test_run_skill_sends_the_skill_and_the_prompt(
    echo_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--json", "--skill", "weekly-report", "for", "March"])
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and body["status"] == "done"
    assert 'use the skill "weekly-report"' in body["reply"]
    assert "1. Read the board." in body["reply"]
    assert body["reply"].rstrip().endswith("Request: for March")


def test_run_skill_without_a_prompt_follows_the_skill(
    echo_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--json", "--skill", "weekly-report"]) == 0
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "Request: do what the skill describes." in body["reply"]


def test_run_skill_with_an_unknown_name_exits_2_naming_close_ones(
    echo_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--skill", "weekly-reprot", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "habakkuk: run --skill: no skill named 'weekly-reprot'; did you mean: weekly-report"
    )
