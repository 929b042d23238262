"""`habakkuk sessions compact ID`, and the compaction in every export format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig

SCRIPT = """
providers:
  mock:
    type: mock
    script:
      - match: "messages_to_fold"
        steps: ["SUMMARY: a long question about x"]
      - steps: ["Hello from the script."]
agents:
  main:
    model: mock/x
    compact_at: -1
"""


@pytest.fixture
def scripted_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(SCRIPT)
    return home


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["run", "--json", *args]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return result


def test_sessions_compact_prints_tokens_before_and_after(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    # About 32,000 tokens: more than a fifth of the default compact_at (150,000).
    first = run_json(capsys, "question " + "x" * 130_000)
    session = first["session"]
    run_json(capsys, "--session", session, "a short one")
    assert main(["sessions", "compact", session]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Compacted the context: about ")
    before, after = (
        int(n.replace(",", "")) for n in out.split("about ")[1].split(" tokens")[0].split(" → ")
    )
    assert before > 32_000 > after
    assert main(["sessions", "compact", session, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["status"] == "done" and body["compacted"] is False
    assert body["reply"].startswith("Nothing was compacted")
    # Export shows where the summary applies; the transcript itself is whole.
    assert main(["sessions", "export", session, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["messages"]) == 4
    assert data["compaction"] == {"keep_from": 2, "summary": "SUMMARY: a long question about x"}
    assert main(["sessions", "export", session]) == 0
    markdown = capsys.readouterr().out
    assert markdown.index("Context compacted here") < markdown.index("a short one")
    assert markdown.index("question xxx") < markdown.index("Context compacted here")
    assert main(["sessions", "export", session, "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert "Context compacted here" in page and "SUMMARY: a long question about x" in page


def test_export_has_no_compaction_key_before_one(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    session = run_json(capsys, "hi")["session"]
    assert main(["sessions", "export", session, "--format", "json"]) == 0
    assert "compaction" not in json.loads(capsys.readouterr().out)


def test_sessions_compact_of_an_unknown_session_is_one_line(
    scripted_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "compact", "ses_nope"]) == 2  # not found: EXIT_NOT_FOUND
    err = capsys.readouterr().err
    assert err.strip() == "habakkuk: session 'ses_nope' not found"
