"""Background processes as tools, and exec leaving no process behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import select
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.toolkit.registry import ToolContext, ToolError
from habakkuk.tools.process_tools import (
    BackgroundExec,
    ProcessKill,
    ProcessList,
    ProcessOutput,
    ProcessWait,
    ProcessWrite,
)
from habakkuk.tools.processes import ProcessManager
from habakkuk.tools.shell import run_command
from tests.helpers import eventually, tool_context

BOUND = 20.0


def pid_gone(pid: int) -> bool:
    """No such process, or only a zombie left (PID 1 here may not reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return data[data.rfind(b")") + 2 :].split()[0] == b"Z"


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ProcessManager]:
    made = ProcessManager(tmp_path / "procs", segment_bytes=1000, kill_grace_seconds=0.5)
    yield made
    await made.shutdown()


def ctx_for(tmp_path: Path, agent: str = "main") -> ToolContext:
    return tool_context(tmp_path, agent=agent, exec_timeout=30)


async def start(
    manager: ProcessManager | None, ctx: ToolContext, command: str, **extra: Any
) -> str:
    tool = BackgroundExec(manager, None)
    out = await tool.run({"command": command, "background": True, **extra}, ctx)
    found = re.search(r"\bp_[0-9a-f]+\b", out.text)
    assert found, out.text
    return found.group(0)


async def test_background_exec_returns_an_id_and_output_resumes_from_offsets(
    tmp_path: Path, manager: ProcessManager
) -> None:
    ctx = ctx_for(tmp_path)
    pid = await start(manager, ctx, "printf 'one\\n'; read line; printf 'two %s\\n' \"$line\"")
    await ProcessWrite(manager).run({"id": pid, "stdin": "x\n", "eof": True}, ctx)
    waited = await ProcessWait(manager).run({"id": pid, "timeout_seconds": BOUND}, ctx)
    assert "exited with code 0" in waited.text
    first = await ProcessOutput(manager).run({"id": pid, "max_bytes": 4}, ctx)
    assert first.text.startswith("one\n") and "next_offset=4" in first.text
    rest = await ProcessOutput(manager).run({"id": pid, "since": 4}, ctx)
    assert rest.text.startswith("two x\n") and "next_offset=10" in rest.text
    listed = await ProcessList(manager).run({}, ctx)
    assert pid in listed.text and "exited with code 0" in listed.text


async def test_rotated_output_reports_what_was_discarded(
    tmp_path: Path, manager: ProcessManager
) -> None:
    ctx = ctx_for(tmp_path)
    # 5000 bytes through 1000-byte segments: only the last one or two segments are kept.
    pid = await start(manager, ctx, "for i in $(seq 1 50); do printf '%099d\\n' $i; done")
    await ProcessWait(manager).run({"id": pid, "timeout_seconds": BOUND}, ctx)
    out = await ProcessOutput(manager).run({"id": pid, "since": 0, "max_bytes": 100_000}, ctx)
    found = re.search(r"([\d,]+) bytes before this were discarded", out.text)
    assert found is not None
    discarded = int(found[1].replace(",", ""))
    assert 3000 <= discarded <= 4000
    assert "next_offset=5000" in out.text
    assert out.text.splitlines()[-2] == "0" * 97 + "50"
    tail = await ProcessOutput(manager).run({"id": pid, "since": -100}, ctx)
    assert tail.text.startswith("0" * 97 + "50\n")


async def test_kill_stops_the_whole_tree(tmp_path: Path, manager: ProcessManager) -> None:
    ctx = ctx_for(tmp_path)
    pidfile = tmp_path / "child.pid"
    pid = await start(manager, ctx, f"sleep 300 & echo $! > {pidfile}; wait")
    await eventually(
        lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="pid file"
    )
    child = int(pidfile.read_text())
    killed = await ProcessKill(manager).run({"id": pid}, ctx)
    assert "killed" in killed.text
    await eventually(lambda: pid_gone(child), what="the background child to die")


async def test_another_agent_cannot_see_the_process(
    tmp_path: Path, manager: ProcessManager
) -> None:
    pid = await start(manager, ctx_for(tmp_path), "sleep 30")
    other = ctx_for(tmp_path, agent="other")
    with pytest.raises(ToolError, match="no such process"):
        await ProcessOutput(manager).run({"id": pid}, other)
    with pytest.raises(ToolError, match="no such process"):
        await ProcessKill(manager).run({"id": pid}, other)
    assert "no background processes" in (await ProcessList(manager).run({}, other)).text


async def test_notify_only_applies_to_background(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="notify"):
        await BackgroundExec(None, None).run({"command": "true", "notify": True}, ctx_for(tmp_path))


async def test_background_without_a_manager_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="not available"):
        await start(None, ctx_for(tmp_path), "true")


async def test_foreground_exec_still_runs_and_reports_the_exit_code(tmp_path: Path) -> None:
    out = await BackgroundExec(None, None).run({"command": "echo hi; exit 3"}, ctx_for(tmp_path))
    assert out.is_error and out.text.startswith("exit code 3") and "hi" in out.text


async def test_timed_out_exec_leaves_no_process_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    ctx = ctx_for(tmp_path)
    out = await BackgroundExec(None, None).run(
        {"command": f"(sleep 300 & echo $! > {pidfile}; wait) ; sleep 300", "timeout_seconds": 0.5},
        ctx,
    )
    assert out.is_error and "timed out" in out.text
    grandchild = int(pidfile.read_text())
    await eventually(lambda: pid_gone(grandchild), what="the timed-out tree to die")


def children() -> set[int]:
    """The pids of this process's children."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            found.update(int(p) for p in (task / "children").read_text().split())
    return found


def reaped(pid: int) -> bool:
    """The process is gone and its exit collected (not even a zombie is left)."""
    return not Path(f"/proc/{pid}").exists()


async def test_cancelled_exec_leaves_no_process_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    task = asyncio.create_task(
        run_command(f"sleep 300 & echo $$ $! > {pidfile}; wait", tmp_path, timeout=BOUND)
    )
    await eventually(
        lambda: pidfile.exists() and pidfile.read_text().endswith("\n"), what="pid file"
    )
    shell, child = map(int, pidfile.read_text().split())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The cancel finishes only once the shell is reaped, so its pipes and transport close
    # on this loop rather than in a garbage collection after the loop has closed.
    assert reaped(shell)
    await eventually(lambda: pid_gone(child), what="the cancelled tree to die")


async def test_timed_out_exec_returns_only_once_its_shell_is_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result = await run_command(f"echo $$ > {pidfile}; sleep 300", tmp_path, timeout=0.5)
    assert result.timed_out
    # Reaped before the call returns: the kill's exit status is known, and no transport is
    # left to a garbage collection with its child still running ("subprocess is still
    # running" at an unrelated test).
    assert result.exit_code == -signal.SIGKILL
    assert reaped(int(pidfile.read_text()))


async def test_exec_cancelled_while_it_starts_leaves_no_process_behind(tmp_path: Path) -> None:
    """The shell runs from its fork on, while asyncio still connects its pipes: a cancel in
    that window must kill the shell's whole group too."""
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        before = children()
        task = asyncio.create_task(
            run_command(f"sleep 300 & echo $! > {fifo}; wait", tmp_path, timeout=BOUND)
        )
        # Step the loop until the shell is forked: asyncio then still has to connect its
        # pipes, in later steps of the loop.
        while children() == before:
            assert not task.done(), task
            await asyncio.sleep(0)
        # Block the loop (so the pipes cannot connect) until the shell has started its child.
        ready, _, _ = select.select([reader], [], [], BOUND)
        assert ready, "the shell never wrote its child's pid"
        child = int(os.read(reader, 100))
        task.cancel()
    finally:
        os.close(reader)
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: pid_gone(child), what="the tree cancelled at start-up to die")
