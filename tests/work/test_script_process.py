"""A script schedule's command as a process: its folder, environment, caps and timeout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from habakkuk.engine.errors import HabakkukError
from habakkuk.work.schedule_types import OUTPUT_CAP
from habakkuk.work.script_process import resolve_workdir, run_script, says_nothing, script_env
from tests.helpers import eventually


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie that nobody reaped yet is gone for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_the_environment_takes_the_env_file_read_now_and_the_process_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("FROM_FILE=first\nBOTH=file\n")
    monkeypatch.setenv("BOTH", "process")
    env = script_env(env_file, agent="main", schedule_id="sch_1", name="sync")
    result = await run_script(
        'echo "$FROM_FILE $BOTH $HABAKKUK_AGENT $HABAKKUK_SCHEDULE_ID $HABAKKUK_SCHEDULE_NAME"',
        tmp_path,
        env,
        10,
    )
    assert result.ok and result.stdout.strip() == "first process main sch_1 sync"
    env_file.write_text("FROM_FILE=second\n")  # re-read on every run
    env = script_env(env_file, agent="main", schedule_id="sch_1", name="sync")
    assert env["FROM_FILE"] == "second"


def test_a_relative_workdir_is_inside_the_workspace_and_one_escaping_it_is_refused(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "ledger").mkdir(parents=True)
    assert resolve_workdir(workspace, None) == workspace.resolve()
    assert resolve_workdir(workspace, "ledger") == (workspace / "ledger").resolve()
    with pytest.raises(HabakkukError, match="escapes the workspace"):
        resolve_workdir(workspace, "../elsewhere")


async def test_the_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    result = await run_script(
        f"sleep 300 & echo $! > {pid_file}; wait", tmp_path, dict(os.environ), 0.5
    )
    assert result.timed_out and not result.ok
    assert "timed out after 0.5s" in result.error(0.5)
    child = int(pid_file.read_text())
    await eventually(lambda: not _alive(child), what="the child sleep to be killed")


async def test_a_chatty_script_is_capped_at_64_kb_per_stream_and_does_not_hang(
    tmp_path: Path,
) -> None:
    # 4 MB on each stream: far past both the cap and a pipe's buffer.
    command = "head -c 4194304 /dev/zero | tr '\\0' a; head -c 4194304 /dev/zero | tr '\\0' b >&2"
    result = await run_script(command, tmp_path, dict(os.environ), 60)
    assert result.ok
    assert len(result.stdout) == OUTPUT_CAP and set(result.stdout) == {"a"}
    assert len(result.stderr) == OUTPUT_CAP and set(result.stderr) == {"b"}


async def test_a_failure_reports_the_exit_code_and_the_end_of_stderr(tmp_path: Path) -> None:
    result = await run_script("echo oops >&2; exit 3", tmp_path, dict(os.environ), 10)
    assert result.exit_code == 3
    assert result.error(10) == "error: exit code 3: oops"


def test_empty_output_or_a_silent_line_says_nothing() -> None:
    assert says_nothing("")
    assert says_nothing("  \n")
    assert says_nothing("checked 3 feeds\n[SILENT]\n")
    assert not says_nothing("2 new invoices")
    assert not says_nothing("[SILENT] but not quite")
