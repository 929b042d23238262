"""Tests for habakkuk.tools.processes, with real subprocesses."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from habakkuk.tools.processes import (
    ProcessError,
    ProcessInfo,
    ProcessManager,
    format_duration,
    format_exit_notice,
)
from tests.helpers import eventually

BOUND = 20.0  # generous upper bound for anything we wait on


def pid_gone(pid: int) -> bool:
    """True when pid no longer exists or is a zombie (PID 1 here may not reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return True
    return data[data.rfind(b")") + 2 :].split()[0] == b"Z"


async def read_pid_file(path: Path) -> int:
    await eventually(lambda: path.exists() and path.read_text().strip() != "", what=f"{path}")
    return int((await asyncio.to_thread(path.read_text)).strip())


class Recorder:
    """An on_exit callback that records calls and lets a test wait for one."""

    def __init__(self) -> None:
        self.calls: list[ProcessInfo] = []
        self.called = asyncio.Event()

    async def __call__(self, info: ProcessInfo) -> None:
        self.calls.append(info)
        self.called.set()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def manager(tmp_path: Path, recorder: Recorder) -> AsyncIterator[ProcessManager]:
    mgr = ProcessManager(tmp_path / "procs", on_exit=recorder, kill_grace_seconds=1.0)
    yield mgr
    await mgr.shutdown()


async def run(
    mgr: ProcessManager,
    command: str,
    cwd: Path,
    agent: str = "a",
    *,
    env: dict[str, str] | None = None,
    timeout_seconds: float | None = None,
    notify: bool = False,
) -> ProcessInfo:
    """Start command for agent in session s1."""
    return await mgr.start(
        agent=agent,
        session="s1",
        command=command,
        cwd=cwd,
        env=env,
        timeout_seconds=timeout_seconds,
        notify=notify,
    )


async def test_start_runs_command_and_collects_stdout_and_stderr_with_exit_code(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "echo out; echo err >&2; exit 3", tmp_path)
    assert info.id.startswith("p_") and len(info.id) > 2
    assert info.agent == "a" and info.session == "s1" and info.cwd == str(tmp_path)
    done = await manager.wait("a", info.id, timeout_seconds=BOUND)
    assert done.exit_code == 3
    assert done.ended_at is not None and not done.killed and not done.timed_out
    chunk = await manager.output("a", info.id)
    assert chunk.text == "out\nerr\n"
    assert chunk.next_offset == 8 and chunk.discarded == 0
    assert not chunk.running and chunk.exit_code == 3


async def test_list_shows_running_then_finished_process(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "cat", tmp_path)
    [listed] = manager.list("a")
    assert listed.id == info.id and listed.exit_code is None and listed.running
    assert (await manager.output("a", info.id)).running
    await manager.write("a", info.id, "", eof=True)
    await manager.wait("a", info.id, timeout_seconds=BOUND)
    [listed] = manager.list("a")
    assert listed.exit_code == 0 and not listed.running


async def test_command_runs_in_cwd_with_given_environment(
    manager: ProcessManager, tmp_path: Path
) -> None:
    env = {"PATH": os.environ["PATH"], "HABAKKUK_TEST_VALUE": "xyz"}
    info = await run(manager, 'pwd; echo "$HABAKKUK_TEST_VALUE"', tmp_path, env=env)
    await manager.wait("a", info.id, timeout_seconds=BOUND)
    assert (await manager.output("a", info.id)).text == f"{tmp_path}\nxyz\n"


async def test_output_resumes_from_returned_offset(manager: ProcessManager, tmp_path: Path) -> None:
    info = await run(manager, "printf 0123456789", tmp_path)
    await manager.wait("a", info.id, timeout_seconds=BOUND)
    first = await manager.output("a", info.id, since=0, max_bytes=4)
    assert (first.text, first.next_offset) == ("0123", 4)
    second = await manager.output("a", info.id, since=first.next_offset, max_bytes=100)
    assert (second.text, second.next_offset) == ("456789", 10)
    third = await manager.output("a", info.id, since=second.next_offset)
    assert (third.text, third.next_offset) == ("", 10)


async def test_output_of_running_process_resumes_as_more_arrives(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "cat", tmp_path)
    await manager.write("a", info.id, "one\n")

    async def poll(since: int, expected: str) -> int:
        offsets: list[int] = []

        async def arrived() -> bool:
            chunk = await manager.output("a", info.id, since=since)
            offsets.append(chunk.next_offset)
            return chunk.text == expected

        await eventually(arrived, what=f"{expected!r} after offset {since}", timeout=BOUND)
        return offsets[-1]

    offset = await poll(0, "one\n")
    await manager.write("a", info.id, "two\n")
    offset = await poll(offset, "two\n")
    assert offset == 8


async def test_output_never_splits_a_utf8_character(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "printf 'a\\303\\251b'", tmp_path)  # "aéb"
    await manager.wait("a", info.id, timeout_seconds=BOUND)
    first = await manager.output("a", info.id, max_bytes=2)
    assert (first.text, first.next_offset) == ("a", 1)
    rest = await manager.output("a", info.id, since=first.next_offset)
    assert rest.text == "éb"


async def test_rotation_keeps_latest_output_and_reports_discarded_bytes(
    tmp_path: Path,
) -> None:
    mgr = ProcessManager(tmp_path / "procs", segment_bytes=1024)
    try:
        # 1000 lines of 6 bytes: 6000 bytes, several segments' worth.
        info = await run(mgr, "for i in $(seq 0 999); do printf '%05d\\n' $i; done", tmp_path)
        await mgr.wait("a", info.id, timeout_seconds=BOUND)
        expected = "".join(f"{i:05d}\n" for i in range(1000))
        chunk = await mgr.output("a", info.id, since=0, max_bytes=1_000_000)
        assert chunk.next_offset == 6000
        kept = len(chunk.text)
        assert 1024 <= kept <= 2048
        assert chunk.discarded == 6000 - kept
        assert chunk.text == expected[-kept:]
        assert (tmp_path / "procs" / f"{info.id}.log").exists()
        assert (tmp_path / "procs" / f"{info.id}.log.1").exists()
        # A reader that stopped inside the kept range loses nothing.
        later = await mgr.output("a", info.id, since=6000 - 100)
        assert later.discarded == 0 and later.text == expected[-100:]
    finally:
        await mgr.shutdown()


async def test_negative_since_reads_the_tail(tmp_path: Path) -> None:
    mgr = ProcessManager(tmp_path / "procs", segment_bytes=1024)
    try:
        info = await run(mgr, "for i in $(seq 0 999); do printf '%05d\\n' $i; done", tmp_path)
        await mgr.wait("a", info.id, timeout_seconds=BOUND)
        tail = await mgr.output("a", info.id, since=-12)
        assert (tail.text, tail.next_offset, tail.discarded) == ("00998\n00999\n", 6000, 0)
        whole = await mgr.output("a", info.id, since=-5000, max_bytes=1_000_000)
        assert whole.discarded == 5000 - len(whole.text) > 0
        assert whole.text.endswith("00999\n")
    finally:
        await mgr.shutdown()


async def test_tail_longer_than_output_returns_everything(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "printf hello", tmp_path)
    await manager.wait("a", info.id, timeout_seconds=BOUND)
    chunk = await manager.output("a", info.id, since=-1000)
    assert (chunk.text, chunk.next_offset, chunk.discarded) == ("hello", 5, 0)


async def test_processes_are_invisible_to_other_agents(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "cat", tmp_path, agent="alice")
    assert manager.list("bob") == []
    assert [p.id for p in manager.list("alice")] == [info.id]
    for call in (
        manager.output("bob", info.id),
        manager.wait("bob", info.id, timeout_seconds=0),
        manager.kill("bob", info.id),
        manager.write("bob", info.id, "x"),
    ):
        with pytest.raises(ProcessError, match=f"no such process: {info.id}"):
            await call
    assert manager.list("alice")[0].running


async def test_unknown_id_is_no_such_process(manager: ProcessManager) -> None:
    with pytest.raises(ProcessError, match="no such process: p_nope"):
        await manager.output("a", "p_nope")


async def test_kill_kills_grandchildren_and_marks_killed(
    manager: ProcessManager, tmp_path: Path, recorder: Recorder
) -> None:
    info = await run(manager, "sleep 1000 & echo $! > child.pid; wait", tmp_path, notify=True)
    child = await read_pid_file(tmp_path / "child.pid")
    assert not pid_gone(child)
    killed = await manager.kill("a", info.id)
    assert killed.killed and killed.exit_code is not None and not killed.running
    await eventually(lambda: pid_gone(child), what="the grandchild to die")
    # kill() returns after the exit was handled, so a notice would already be recorded.
    assert recorder.calls == []


async def test_kill_escalates_to_sigkill_when_sigterm_is_ignored(
    tmp_path: Path,
) -> None:
    mgr = ProcessManager(tmp_path / "procs", kill_grace_seconds=0.2)
    try:
        info = await run(
            mgr, "trap '' TERM; sleep 1000 & echo $! > child.pid; wait; wait", tmp_path
        )
        child = await read_pid_file(tmp_path / "child.pid")
        killed = await mgr.kill("a", info.id)
        assert killed.exit_code == -9
        await eventually(lambda: pid_gone(child), what="the grandchild to die")
    finally:
        await mgr.shutdown()


async def test_timeout_kills_the_tree_and_still_notifies(
    manager: ProcessManager, tmp_path: Path, recorder: Recorder
) -> None:
    info = await run(
        manager,
        "sleep 1000 & echo $! > child.pid; wait",
        tmp_path,
        timeout_seconds=0.3,
        notify=True,
    )
    child = await read_pid_file(tmp_path / "child.pid")
    done = await manager.wait("a", info.id, timeout_seconds=BOUND)
    assert done.timed_out and not done.killed and done.exit_code is not None
    await eventually(lambda: pid_gone(child), what="the grandchild to die")
    await asyncio.wait_for(recorder.called.wait(), BOUND)
    assert recorder.calls[0].timed_out
    assert "was killed by its timeout" in format_exit_notice(recorder.calls[0])


async def test_wait_with_timeout_returns_running_process(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "cat", tmp_path)
    still = await manager.wait("a", info.id, timeout_seconds=0.05)
    assert still.running and still.exit_code is None


async def test_write_and_eof_feed_stdin(manager: ProcessManager, tmp_path: Path) -> None:
    info = await run(manager, "cat", tmp_path)
    await manager.write("a", info.id, "hello\n")
    await manager.write("a", info.id, "world", eof=True)
    done = await manager.wait("a", info.id, timeout_seconds=BOUND)
    assert done.exit_code == 0
    assert (await manager.output("a", info.id)).text == "hello\nworld"
    with pytest.raises(ProcessError, match="has exited"):
        await manager.write("a", info.id, "more")


async def test_write_after_eof_is_refused(manager: ProcessManager, tmp_path: Path) -> None:
    info = await run(manager, "cat; sleep 1000", tmp_path)
    await manager.write("a", info.id, "", eof=True)
    with pytest.raises(ProcessError, match="already closed"):
        await manager.write("a", info.id, "late")


async def test_on_exit_is_called_for_notify_process_that_exits(
    manager: ProcessManager, tmp_path: Path, recorder: Recorder
) -> None:
    quiet = await run(manager, "exit 0", tmp_path)
    await manager.wait("a", quiet.id, timeout_seconds=BOUND)
    loud = await run(manager, "exit 7", tmp_path, notify=True)
    await asyncio.wait_for(recorder.called.wait(), BOUND)
    assert [(c.id, c.exit_code) for c in recorder.calls] == [(loud.id, 7)]
    notice = format_exit_notice(recorder.calls[0])
    assert notice.startswith(f"Background process {loud.id} (exit 7) exited with code 7 after ")


async def test_exit_is_recorded_even_when_a_grandchild_keeps_the_output_open(
    manager: ProcessManager, tmp_path: Path
) -> None:
    info = await run(manager, "sleep 1000 & echo $!; echo started", tmp_path)
    done = await manager.wait("a", info.id, timeout_seconds=BOUND)
    assert done.exit_code == 0
    text = (await manager.output("a", info.id)).text
    orphan = int(text.split()[0])
    assert text.endswith("started\n") and not pid_gone(orphan)
    await manager.shutdown()
    await eventually(lambda: pid_gone(orphan), what="the orphan to die")


async def test_running_limit_per_agent(tmp_path: Path) -> None:
    mgr = ProcessManager(tmp_path / "procs", max_running_per_agent=2)
    try:
        first = await run(mgr, "cat", tmp_path)
        await run(mgr, "cat", tmp_path)
        with pytest.raises(ProcessError, match="already has 2 background processes running"):
            await run(mgr, "cat", tmp_path)
        await run(mgr, "cat", tmp_path, agent="other")  # the limit is per agent
        await mgr.kill("a", first.id)
        await run(mgr, "cat", tmp_path)
    finally:
        await mgr.shutdown()


async def test_concurrent_starts_respect_the_limit(tmp_path: Path) -> None:
    mgr = ProcessManager(tmp_path / "procs", max_running_per_agent=3)
    try:
        results = await asyncio.gather(
            *(run(mgr, "cat", tmp_path) for _ in range(6)), return_exceptions=True
        )
        started = [r for r in results if isinstance(r, ProcessInfo)]
        refused = [r for r in results if isinstance(r, ProcessError)]
        assert len(started) == 3 and len(refused) == 3
    finally:
        await mgr.shutdown()


async def test_only_the_most_recent_finished_processes_are_remembered(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    mgr = ProcessManager(procs, keep_finished=2)
    try:
        ids = []
        for n in range(3):
            info = await run(mgr, f"echo {n}", tmp_path)
            await mgr.wait("a", info.id, timeout_seconds=BOUND)
            ids.append(info.id)
        assert [p.id for p in mgr.list("a")] == ids[1:]
        with pytest.raises(ProcessError, match="no such process"):
            await mgr.output("a", ids[0])
        assert not (procs / f"{ids[0]}.log").exists()
        assert (await mgr.output("a", ids[2])).text == "2\n"
    finally:
        await mgr.shutdown()


async def test_shutdown_kills_everything_removes_logs_and_sends_no_notices(
    tmp_path: Path, recorder: Recorder
) -> None:
    procs = tmp_path / "procs"
    mgr = ProcessManager(procs, on_exit=recorder, kill_grace_seconds=1.0)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    await run(mgr, "sleep 1000 & echo $! > child.pid; wait", tmp_path / "one", notify=True)
    await run(mgr, "sleep 1000 & echo $! > child.pid; wait", tmp_path / "two", agent="b")
    finished = await run(mgr, "echo done", tmp_path, notify=False)
    await mgr.wait("a", finished.id, timeout_seconds=BOUND)
    children = [await read_pid_file(tmp_path / d / "child.pid") for d in ("one", "two")]
    assert len(list(procs.iterdir())) == 3
    await mgr.shutdown()
    await eventually(lambda: all(pid_gone(c) for c in children), what="the grandchildren to die")
    assert list(procs.iterdir()) == []
    assert recorder.calls == []
    assert mgr.list("a") == [] and mgr.list("b") == []
    with pytest.raises(ProcessError, match="shut down"):
        await run(mgr, "true", tmp_path)


def test_cleanup_old_logs_removes_only_old_process_logs(tmp_path: Path) -> None:
    procs = tmp_path / "procs"
    mgr = ProcessManager(procs)
    old = time.time() - 2 * 86400
    for name in ("p_0a1b.log", "p_0a1b.log.1", "p_2c3d.log", "notes.txt"):
        (procs / name).write_text("x")
    for name in ("p_0a1b.log", "p_0a1b.log.1", "notes.txt"):
        os.utime(procs / name, (old, old))
    assert mgr.cleanup_old_logs() == 2
    assert sorted(p.name for p in procs.iterdir()) == ["notes.txt", "p_2c3d.log"]
    assert mgr.cleanup_old_logs(max_age_seconds=0) == 1


async def test_procs_dir_and_logs_are_private(manager: ProcessManager, tmp_path: Path) -> None:
    info = await run(manager, "echo hi", tmp_path)
    await manager.wait("a", info.id, timeout_seconds=BOUND)
    assert stat.S_IMODE((tmp_path / "procs").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "procs" / f"{info.id}.log").stat().st_mode) == 0o600


async def test_bad_start_requests_are_clear_errors(manager: ProcessManager, tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match="does not exist"):
        await run(manager, "true", tmp_path / "missing")
    with pytest.raises(ProcessError, match="command is empty"):
        await run(manager, "  ", tmp_path)
    with pytest.raises(ProcessError, match="timeout_seconds must be positive"):
        await run(manager, "true", tmp_path, timeout_seconds=0)
    assert manager.list("a") == []


def test_format_duration_matches_go_style() -> None:
    assert [format_duration(s) for s in (0, 45.4, 123, 3605)] == ["0s", "45s", "2m3s", "1h0m5s"]
