"""`habakkuk run --skill NAME [PROMPT]`: the same message as /skill, in one turn."""

from __future__ import annotations

import json

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig
from tests.knowledge.skills.conftest import install, write_skill

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


def test_run_skill_with_an_unknown_name_leaves_no_session_behind(
    echo_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--skill", "ghost", "x"]) == 2
    capsys.readouterr()
    assert main(["sessions", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_session_started_with_a_skill_is_titled_by_the_request(
    echo_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--json", "--skill", "weekly-report", "for", "March"]) == 0
    session = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["session"]
    assert main(["run", "--json", "--skill", "weekly-report"]) == 0
    bare = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["session"]
    assert main(["sessions", "list", "--json"]) == 0
    titles = {s["id"]: s["title"] for s in json.loads(capsys.readouterr().out)}
    assert titles == {session: "Skill weekly-report: for March", bare: "Skill weekly-report"}


def test_an_untrusted_skill_still_titles_its_session_by_the_request(
    echo_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(echo_home.root / "skills", "fetcher", "Fetch.", body="Fetch it.")
    install(echo_home, "fetcher")
    assert main(["run", "--json", "--skill", "fetcher", "the news"]) == 0
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "Caution: this skill was installed from" in body["reply"]
    assert main(["sessions", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["title"] == "Skill fetcher: the news"
