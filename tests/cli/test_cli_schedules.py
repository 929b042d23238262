"""`habakkuk schedules ...`: every action through habakkuk.cli.main on a tmp home."""

from __future__ import annotations

import json
from typing import Any

import pytest

from habakkuk.cli import main
from tests.conftest import mock_config


@pytest.fixture
def schedules_home(home, write_config):
    ops = "  ops:\n    model: mock/scripted\ntimezone: Europe/Paris\n"
    write_config(mock_config("- text: hi", extra=ops))
    return home


def out_json(capsys, *args: str) -> Any:
    assert main(["schedules", *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys, argv: list[str], code: int = 2) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def add(capsys, *args: str) -> str:
    assert main(["schedules", "add", *args]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("sch_")
    return printed[0]


def test_add_prints_the_id_and_the_next_three_fire_times(schedules_home, capsys) -> None:
    argv = ["schedules", "add", "--name", "inbox", "--when", "0 8 * * 1-5"]
    assert main([*argv, "--prompt", "Summarise my inbox.", "--deliver", "telegram:42"]) == 0
    schedule_id, next_line = capsys.readouterr().out.splitlines()
    assert schedule_id.startswith("sch_")
    assert next_line.startswith("next: ") and next_line.count("08:00 CE") == 3  # Paris time

    listing = out_json(capsys, "list")["schedules"]
    (shown,) = listing
    assert shown["id"] == schedule_id and shown["agent"] == "main"
    assert (shown["kind"], shown["deliver_to"], shown["enabled"]) == ("prompt", "telegram:42", True)
    assert shown["next_run"].endswith(":00:00Z")  # 07:00 UTC in winter, 06:00 in summer

    assert main(["schedules", "list"]) == 0
    table = capsys.readouterr().out
    assert schedule_id in table and "inbox" in table and "enabled" in table


def test_run_adds_a_script_schedule_that_show_describes(schedules_home, capsys) -> None:
    schedule_id = add(
        capsys,
        "--agent", "ops", "--name", "ledger", "--when", "@every 2h", "--run", "./sync.sh",
        "--on-output", "silent", "--timeout", "2m", "--workdir", "ledger", "--missed", "once",
    )  # fmt: skip
    shown = out_json(capsys, "show", schedule_id)
    assert (shown["kind"], shown["command"], shown["agent"]) == ("script", "./sync.sh", "ops")
    assert (shown["on_output"], shown["timeout_seconds"], shown["workdir"]) == (
        "silent",
        120.0,
        "ledger",
    )
    assert shown["missed"] == "once" and len(shown["next_runs"]) == 3
    assert main(["schedules", "show", schedule_id]) == 0
    text = capsys.readouterr().out
    assert "run: ./sync.sh" in text and "on output: silent" in text and "next: " in text
    assert out_json(capsys, "list", "--agent", "main") == {"schedules": []}


def test_pause_resume_run_runs_and_rm(schedules_home, capsys) -> None:
    schedule_id = add(capsys, "--name", "n", "--when", "@hourly", "--prompt", "Check the news.")
    assert main(["schedules", "pause", schedule_id]) == 0
    assert capsys.readouterr().out.startswith(f"paused {schedule_id}")
    assert out_json(capsys, "show", schedule_id)["enabled"] is False
    assert main(["schedules", "resume", schedule_id]) == 0
    assert capsys.readouterr().out.startswith(f"resumed {schedule_id} 'n'; next 20")
    assert out_json(capsys, "show", schedule_id)["enabled"] is True

    queued = out_json(capsys, "run", schedule_id)
    assert queued["job"].startswith("sch_") and queued["schedule"]["id"] == schedule_id
    runs = out_json(capsys, "runs", schedule_id)["runs"]
    assert [r["job"] for r in runs if r["extra"]] == [queued["job"]]
    assert main(["schedules", "runs", schedule_id]) == 0
    assert "(extra run)" in capsys.readouterr().out

    assert main(["schedules", "rm", schedule_id]) == 0
    assert capsys.readouterr().out.startswith(f"deleted {schedule_id}")
    error = one_line_error(capsys, ["schedules", "show", schedule_id])
    assert error.startswith("habakkuk: schedules show: ") and schedule_id in error


def test_a_when_that_reads_two_ways_is_one_line_with_the_reading(schedules_home, capsys) -> None:
    argv = ["schedules", "add", "--name", "n", "--when", "30m", "--prompt", "p"]
    error = one_line_error(capsys, argv)
    assert error.startswith("habakkuk: schedules add: ") and "@every 30m" in error
    error = one_line_error(capsys, [*argv[:5], "nonsense", *argv[6:]])
    assert "nonsense" in error
    assert out_json(capsys, "list") == {"schedules": []}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "give --prompt TEXT or --run CMD"),
        (["--prompt", "p", "--timeout", "2m"], "--timeout only go with --run"),
        (["--prompt", "p", "--run", "true"], "not both"),
        (["--run", "true", "--timeout", "soon"], "--timeout"),
        (["--prompt", "p", "--deliver", "telegram"], "not CHANNEL:CHAT[:THREAD]"),
        (["--prompt", "p", "--agent", "nobody"], "nobody"),
    ],
)
def test_options_that_do_not_go_together_are_one_line_errors(
    schedules_home, capsys, extra: list[str], says: str
) -> None:
    argv = ["schedules", "add", "--name", "n", "--when", "@daily", *extra]
    assert says in one_line_error(capsys, argv)


def test_no_such_schedule_is_a_usage_error(schedules_home, capsys) -> None:
    for action in ("show", "runs", "run", "pause", "resume", "rm"):
        error = one_line_error(capsys, ["schedules", action, "sch_missing"])
        assert error.startswith(f"habakkuk: schedules {action}: ") and "sch_missing" in error
