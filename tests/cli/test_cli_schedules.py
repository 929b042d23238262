"""`habakkuk schedules ...`: every action through habakkuk.cli.main on a tmp home."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config


@pytest.fixture
def schedules_home(home: Home, write_config: WriteConfig) -> Home:
    ops = "  ops:\n    model: mock/scripted\ntimezone: Europe/Paris\n"
    write_config(mock_config("- text: hi", extra=ops))
    return home


def out_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["schedules", *args, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    assert main(argv) == code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def add(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["schedules", "add", *args]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("sch_")
    return printed[0]


def test_add_prints_the_id_and_the_next_three_fire_times(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["schedules", "add", "--name", "inbox", "--when", "0 8 * * 1-5"]
    assert main([*argv, "--prompt", "Summarise my inbox.", "--deliver", "telegram:42"]) == 0
    schedule_id, next_line = capsys.readouterr().out.splitlines()
    assert schedule_id.startswith("sch_")
    assert next_line.startswith("every weekday (Monday to Friday) at 08:00, next at ")
    assert next_line.count("08:00 CE") == 3  # the next three fire times, Paris time

    listing = out_json(capsys, "list")["schedules"]
    (shown,) = listing
    assert shown["id"] == schedule_id and shown["agent"] == "main"
    assert (shown["kind"], shown["deliver_to"], shown["enabled"]) == ("prompt", "telegram:42", True)
    assert shown["next_run"].endswith(":00:00Z")  # 07:00 UTC in winter, 06:00 in summer

    assert main(["schedules", "list"]) == 0
    table = capsys.readouterr().out
    assert schedule_id in table and "inbox" in table and "enabled" in table


def test_run_adds_a_script_schedule_that_show_describes(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_pause_resume_run_runs_and_rm(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_a_when_that_reads_two_ways_is_one_line_with_the_reading(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
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
    schedules_home: Home, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    argv = ["schedules", "add", "--name", "n", "--when", "@daily", *extra]
    assert says in one_line_error(capsys, argv)


def test_no_such_schedule_is_a_usage_error(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    for action in ("show", "runs", "run", "pause", "resume", "rm"):
        error = one_line_error(capsys, ["schedules", action, "sch_missing"])
        assert error.startswith(f"habakkuk: schedules {action}: ") and "sch_missing" in error


def test_add_reads_every_5m_and_echoes_the_reading(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["schedules", "add", "--name", "poll", "--when", "every 5m", "--prompt", "p"]
    assert main(argv) == 0
    schedule_id, reading = capsys.readouterr().out.splitlines()
    assert reading.startswith("every 5 minutes, next at ")
    assert out_json(capsys, "show", schedule_id)["spec"] == "@every 5m"


def test_every_action_takes_the_name_as_well_as_the_id(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule_id = add(capsys, "--name", "Morning news", "--when", "@daily", "--prompt", "p")
    assert out_json(capsys, "show", "morning news")["id"] == schedule_id
    assert main(["schedules", "pause", "Morning news"]) == 0
    assert capsys.readouterr().out.startswith(f"paused {schedule_id}")
    assert main(["schedules", "resume", "Morning news"]) == 0
    assert capsys.readouterr().out.startswith(f"resumed {schedule_id}")
    job = out_json(capsys, "run", "Morning news")["job"]
    assert [r["job"] for r in out_json(capsys, "runs", "Morning news")["runs"]] == [job]
    assert main(["schedules", "rm", "Morning news"]) == 0
    assert capsys.readouterr().out.startswith(f"deleted {schedule_id}")
    error = one_line_error(capsys, ["schedules", "show", "Morning news"])
    assert error == "habakkuk: schedules show: no schedule has the id or name 'Morning news'"


def test_a_name_the_agent_already_uses_is_refused(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    first = add(capsys, "--name", "digest", "--when", "@daily", "--prompt", "p")
    argv = ["schedules", "add", "--name", "Digest", "--when", "@hourly", "--prompt", "q"]
    error = one_line_error(capsys, argv)
    assert error == (
        f"habakkuk: schedules add: agent main already has a schedule named 'Digest' ({first}); "
        "pick another name, or remove that one first"
    )
    assert [s["id"] for s in out_json(capsys, "list")["schedules"]] == [first]


def test_a_name_two_schedules_share_is_refused_naming_both(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = add(capsys, "--name", "digest", "--when", "@daily", "--prompt", "p")
    theirs = add(capsys, "--agent", "ops", "--name", "digest", "--when", "@daily", "--prompt", "p")
    for action in ("show", "run", "rm"):
        error = one_line_error(capsys, ["schedules", action, "digest"])
        assert error.startswith(f"habakkuk: schedules {action}: 'digest' names 2 schedules: ")
        assert f"{mine} (agent main" in error and f"{theirs} (agent ops" in error
    assert len(out_json(capsys, "list")["schedules"]) == 2  # nothing was run or removed


def test_run_with_nothing_serving_says_when_it_will_run(
    schedules_home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    add(capsys, "--name", "digest", "--when", "@daily", "--prompt", "p")
    assert main(["schedules", "run", "digest"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("sch_")
    assert "nothing is serving this home, so it runs when `habakkuk --serve`" in captured.err
    assert "or the terminal app is up" in captured.err

    asyncio.run(hold_the_tick_lease(schedules_home))  # a live `--serve` (this process)
    assert main(["schedules", "run", "digest"]) == 0
    assert capsys.readouterr().err == ""


async def hold_the_tick_lease(home: Any) -> None:
    from habakkuk.engine.jobs import MIGRATIONS
    from habakkuk.engine.leases import NamedLeases
    from habakkuk.engine.store import SqliteDatabase
    from habakkuk.work.schedule_types import TICK_LEASE

    db = await SqliteDatabase.open(home.db_path("control"), MIGRATIONS)
    try:
        leases = NamedLeases(db)
        await leases.ensure()
        assert await leases.acquire(TICK_LEASE, "serve", 600, pid=os.getpid()) is None
    finally:
        await db.close()
