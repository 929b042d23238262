"""Background processes started by agents (exec with background: true).

Each command runs with ``bash -c`` (``sh`` where there is no bash) as the leader of a new
session, so the whole tree it spawns shares one process group and can be killed together.
Its stdout and stderr go, interleaved, into ``<procs_dir>/<id>.log`` in two rotating segments
(``<id>.log`` is the current one, ``<id>.log.1`` the previous one), so a chatty server keeps
only its latest one to two segments. Offsets count every byte the process ever wrote, which
lets a reader resume where it stopped and learn how much it missed.

Processes belong to the agent that started them: another agent's id is "no such process".
They live as long as the manager: :meth:`ProcessManager.shutdown` kills every group and
removes the logs, and nothing is resumed after a restart.

Each runs where its agent's commands run (habakkuk.tools.sandbox): here, or through a
docker or ssh client, and then a timeout, a kill or the shutdown signals the tree where it
runs before the local client. Running groups are recorded (sandbox.groups) so the next
start kills those a killed Habakkuk left behind (:meth:`ProcessManager.kill_orphans`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import errno
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.timeouts import wait_within
from habakkuk.tools.sandbox.base import Sandbox, SandboxError, Sandboxes, new_token
from habakkuk.tools.sandbox.groups import CommandGroups
from habakkuk.tools.sandbox.sandboxes import LocalOnly

__all__ = [
    "OutputChunk",
    "ProcessError",
    "ProcessInfo",
    "ProcessManager",
    "format_duration",
    "format_exit_notice",
]

log = logging.getLogger(__name__)

# How long a process group gets between SIGTERM and SIGKILL.
KILL_GRACE_SECONDS = 2.0
# After the shell exits, how long to wait for the output pipe to close. Normally it closes at
# once; it stays open only when a grandchild still holds it, and then the exit is recorded
# anyway and the output keeps being pumped.
_DRAIN_GRACE_SECONDS = 1.0
# How long process_write waits for a child that is not reading its input.
_WRITE_TIMEOUT_SECONDS = 10.0
# Output buffered in memory before the pipe is paused, so a fast writer cannot outrun the disk.
_PAUSE_AT_BYTES = 1024 * 1024
_RESUME_AT_BYTES = 256 * 1024
_POLL_SECONDS = 0.05

_LOG_NAME = re.compile(r"^p_[0-9a-f]+\.log(\.1)?$")


class ProcessError(Exception):
    """A background-process request that cannot be carried out; the message says why."""


@dataclass
class ProcessInfo:
    """What is known about one background process.

    ``exit_code`` is None while it runs; a negative code -N means it was ended by signal N.
    ``killed`` is set when :meth:`ProcessManager.kill` stopped it, ``timed_out`` when its
    ``timeout_seconds`` ran out.
    """

    id: str
    agent: str
    session: str
    command: str
    cwd: str
    started_at: float
    exit_code: int | None
    ended_at: float | None
    notify: bool
    killed: bool
    timed_out: bool = False

    @property
    def running(self) -> bool:
        """Whether the process has not exited yet."""
        return self.ended_at is None


@dataclass
class OutputChunk:
    """A slice of a process's output.

    ``next_offset`` is the ``since`` to pass next time; ``discarded`` counts the requested
    bytes that had already been rotated out of the log.
    """

    text: str
    next_offset: int
    discarded: int
    running: bool
    exit_code: int | None


def format_duration(seconds: float) -> str:
    """Format a duration like Go does at second precision: ``45s``, ``2m3s``, ``1h0m5s``."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def format_exit_notice(info: ProcessInfo) -> str:
    """The text of the turn that tells an agent its ``notify`` process has ended."""
    command = info.command if len(info.command) <= 80 else info.command[:79] + "…"
    command = " ".join(command.split())
    after = format_duration((info.ended_at or time.time()) - info.started_at)
    if info.timed_out:
        return f"Background process {info.id} ({command}) was killed by its timeout after {after}"
    return (
        f"Background process {info.id} ({command}) exited with code {info.exit_code} after {after}"
    )


class _SegmentLog:
    """Append-only output in two rotating segment files, addressed by absolute offsets.

    Its methods block on file I/O, so async code calls them through ``asyncio.to_thread``;
    the lock keeps a read from straddling a rotation.
    """

    def __init__(self, path: Path, segment_bytes: int) -> None:
        self.path = path
        self.prev_path = path.with_name(path.name + ".1")
        self.segment_bytes = segment_bytes
        self.total = 0  # every byte ever appended
        self.cur_base = 0  # offset of the first byte in the current segment
        self.prev_base: int | None = None  # offset of the first byte in the previous one
        self._lock = threading.Lock()
        self._removed = False
        self._fd: int | None = self._open_segment()

    def _open_segment(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)  # in case the file existed with wider permissions
        return fd

    def append(self, data: bytes) -> None:
        """Append data, rotating whenever the current segment is full."""
        with self._lock:
            if self._removed or self._fd is None:
                return
            view = memoryview(data)
            while view:
                room = self.segment_bytes - (self.total - self.cur_base)
                if room <= 0:
                    self._rotate()
                    continue
                part = view[:room]
                while part:
                    written = os.write(self._fd, part)
                    part = part[written:]
                    self.total += written
                view = view[room:]

    def _rotate(self) -> None:
        assert self._fd is not None
        os.close(self._fd)
        self._fd = None
        os.replace(self.path, self.prev_path)
        self.prev_base = self.cur_base
        self.cur_base = self.total
        self._fd = self._open_segment()

    def read(self, since: int, max_bytes: int) -> tuple[bytes, int, int]:
        """Read up to max_bytes from offset since (negative: that many bytes from the end).

        Returns the data, the offset just after it and how many requested bytes were lost to
        rotation.
        """
        with self._lock:
            total = self.total
            start = max(total + since, 0) if since < 0 else min(since, total)
            first_kept = self.prev_base if self.prev_base is not None else self.cur_base
            discarded = 0
            if start < first_kept:
                discarded = first_kept - start
                start = first_kept
            end = min(start + max_bytes, total)
            parts: list[bytes] = []
            if self._removed:
                return b"", start, discarded
            if start < self.cur_base and self.prev_base is not None:
                parts.append(
                    self._read_file(
                        self.prev_path, start - self.prev_base, min(end, self.cur_base) - start
                    )
                )
            if end > self.cur_base:
                lo = max(start, self.cur_base)
                parts.append(self._read_file(self.path, lo - self.cur_base, end - lo))
            data = b"".join(parts)
            return data, start + len(data), discarded

    @staticmethod
    def _read_file(path: Path, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def close(self) -> None:
        """Stop writing; the segments stay readable."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def remove(self) -> None:
        """Close and delete both segments; later appends and reads see nothing."""
        with self._lock:
            self._removed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            for p in (self.path, self.prev_path):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()


class _ChildProtocol(asyncio.SubprocessProtocol):
    """Collects a child's output and exit without asyncio's stream helpers.

    asyncio's Process.wait() only returns once every pipe has closed, which never happens
    while a grandchild holds stdout; here the exit and the end of output are separate.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.transport: asyncio.SubprocessTransport | None = None
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.buffered = 0
        self.paused = False
        self.stdin_lost = False
        self._write_ready = asyncio.Event()
        self._write_ready.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.chunks.put_nowait(data)
        self.buffered += len(data)
        if not self.paused and self.buffered >= _PAUSE_AT_BYTES:
            pipe = self._stdout_pipe()
            if pipe is not None:
                pipe.pause_reading()
                self.paused = True

    def consumed(self, nbytes: int) -> None:
        """The pump wrote nbytes to disk; resume reading when the backlog is small again."""
        self.buffered -= nbytes
        if self.paused and self.buffered <= _RESUME_AT_BYTES:
            pipe = self._stdout_pipe()
            if pipe is not None:
                pipe.resume_reading()
            self.paused = False

    def _stdout_pipe(self) -> asyncio.ReadTransport | None:
        if self.transport is None:
            return None
        pipe = self.transport.get_pipe_transport(1)
        return pipe if isinstance(pipe, asyncio.ReadTransport) else None

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.chunks.put_nowait(None)
        elif fd == 0:
            self.stdin_lost = True
            self._write_ready.set()

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def pause_writing(self) -> None:
        self._write_ready.clear()

    def resume_writing(self) -> None:
        self._write_ready.set()

    async def drain(self) -> None:
        """Wait until the stdin buffer is below its high-water mark again."""
        await self._write_ready.wait()


@dataclass(eq=False)
class _Entry:
    info: ProcessInfo
    transport: asyncio.SubprocessTransport
    protocol: _ChildProtocol
    log: _SegmentLog
    done: asyncio.Event
    sandbox: Sandbox
    token: str
    pump: asyncio.Task[None] | None = None
    supervisor: asyncio.Task[None] | None = None
    stdin_closed: bool = False

    @property
    def pgid(self) -> int:
        pid = self.transport.get_pid()
        assert pid is not None
        return pid


async def _signal_remote(entries: list[_Entry], signal_name: str) -> None:
    """Signal the groups of these entries where they run (sandboxed ones), together."""
    remote = [e for e in entries if e.sandbox.remote]
    if remote:
        await asyncio.gather(*(e.sandbox.kill(e.token, signal_name) for e in remote))


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _live_groups(pgids: set[int]) -> set[int]:
    """Which of these process groups still have a member that is not a zombie.

    Orphaned zombies can linger where PID 1 does not reap them (some containers), and
    ``killpg(pgid, 0)`` counts those, so on Linux /proc decides.
    """
    candidates: set[int] = set()
    for pgid in pgids:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        candidates.add(pgid)
    if not candidates:
        return candidates
    try:
        names = os.listdir("/proc")
    except OSError:
        return candidates
    live: set[int] = set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != b"Z" and int(fields[2]) in candidates:
            live.add(int(fields[2]))
    return live


class ProcessManager:
    """Starts, tracks, reads and stops agents' background processes."""

    def __init__(
        self,
        procs_dir: Path,
        *,
        max_running_per_agent: int = 16,
        keep_finished: int = 50,
        segment_bytes: int = 4 * 1024 * 1024,
        on_exit: Callable[[ProcessInfo], Awaitable[None]] | None = None,
        kill_grace_seconds: float = KILL_GRACE_SECONDS,
        sandboxes: Sandboxes | None = None,
        groups: CommandGroups | None = None,
    ) -> None:
        """Create the manager; procs_dir is created with mode 0700 if needed.

        on_exit is awaited when a process started with notify=True ends by itself (or by
        its timeout), never when kill() or shutdown() ended it. sandboxes says where each
        agent's commands run (default: here); groups records the running process groups
        (foreground exec's too) for the next start.
        """
        if max_running_per_agent < 1:
            raise ValueError(
                f"max_running_per_agent must be at least 1, got {max_running_per_agent}"
            )
        if keep_finished < 0:
            raise ValueError(f"keep_finished must not be negative, got {keep_finished}")
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be at least 1, got {segment_bytes}")
        self.procs_dir = Path(procs_dir)
        self.procs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.procs_dir, 0o700)
        self.max_running_per_agent = max_running_per_agent
        self.keep_finished = keep_finished
        self.segment_bytes = segment_bytes
        self.on_exit = on_exit
        self.kill_grace_seconds = kill_grace_seconds
        self.sandboxes: Sandboxes = sandboxes or LocalOnly()
        self.groups = groups
        self._entries: dict[str, _Entry] = {}
        self._finished: dict[str, deque[str]] = {}
        self._starting: dict[str, int] = {}
        self._closing = False
        self._shell: list[str] | None = None

    # -- starting ---------------------------------------------------------------------------

    def _shell_argv(self) -> list[str]:
        if self._shell is None:
            bash = shutil.which("bash")
            self._shell = [bash] if bash else [shutil.which("sh") or "/bin/sh"]
        return self._shell

    def _running_count(self, agent: str) -> int:
        running = sum(1 for e in self._entries.values() if e.info.agent == agent and e.info.running)
        return running + self._starting.get(agent, 0)

    def _new_id(self) -> str:
        while True:
            pid = "p_" + secrets.token_hex(6)
            if pid not in self._entries:
                return pid

    async def start(
        self,
        *,
        agent: str,
        session: str,
        command: str,
        cwd: Path,
        env: dict[str, str] | None = None,
        timeout_seconds: float | None = None,
        notify: bool = False,
    ) -> ProcessInfo:
        """Start command in the background and return at once.

        env is the child's whole environment (None inherits this process's). timeout_seconds
        kills the process tree after that long. Raises ProcessError for a bad request or when
        the agent already runs max_running_per_agent processes.
        """
        if self._closing:
            raise ProcessError("background processes are shut down")
        if not command.strip():
            raise ProcessError("command is empty")
        if timeout_seconds is not None and timeout_seconds <= 0:
            raise ProcessError(f"timeout_seconds must be positive, got {timeout_seconds}")
        cwd = Path(cwd)
        sandbox = self.sandboxes.for_agent(agent)
        if sandbox.shares_workspace and not await asyncio.to_thread(cwd.is_dir):
            raise ProcessError(f"working directory {cwd} does not exist or is not a directory")
        if self._running_count(agent) >= self.max_running_per_agent:
            raise ProcessError(
                f"agent {agent} already has {self.max_running_per_agent} background processes "
                "running (the limit); wait for one or kill it first"
            )
        pid = self._new_id()
        # Hold the slot across the awaits below so concurrent starts respect the limit.
        self._starting[agent] = self._starting.get(agent, 0) + 1
        try:
            entry = await self._spawn(pid, sandbox, agent, session, command, cwd, env, notify)
        finally:
            self._starting[agent] -= 1
            if not self._starting[agent]:
                del self._starting[agent]
        if self._closing:
            # shutdown() ran while this one was being spawned and cannot have seen it.
            if sandbox.remote:
                await sandbox.kill(entry.token, "KILL")
            _signal_group(entry.pgid, signal.SIGKILL)
            self._ended(entry)
            entry.transport.close()
            await asyncio.to_thread(entry.log.remove)
            raise ProcessError("background processes are shut down")
        self._entries[pid] = entry
        entry.pump = asyncio.create_task(self._pump(entry), name=f"process-pump-{pid}")
        entry.supervisor = asyncio.create_task(
            self._supervise(entry, timeout_seconds), name=f"process-supervisor-{pid}"
        )
        return dataclasses.replace(entry.info)

    async def _spawn(
        self,
        pid: str,
        sandbox: Sandbox,
        agent: str,
        session: str,
        command: str,
        cwd: Path,
        env: dict[str, str] | None,
        notify: bool,
    ) -> _Entry:
        try:
            seglog = await asyncio.to_thread(
                _SegmentLog, self.procs_dir / f"{pid}.log", self.segment_bytes
            )
        except OSError as exc:
            raise ProcessError(f"cannot create the output log in {self.procs_dir}: {exc}") from exc
        loop = asyncio.get_running_loop()
        try:
            launch = await sandbox.launch(command, cwd, token=new_token(), foreground=False)
        except SandboxError as exc:
            await asyncio.to_thread(seglog.remove)
            raise ProcessError(str(exc)) from None
        argv = launch.argv if sandbox.remote else (*self._shell_argv(), "-c", command)
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _ChildProtocol(loop),
                *argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=str(launch.cwd),
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            await asyncio.to_thread(seglog.remove)
            raise ProcessError(f"cannot start {command!r} in {cwd}: {exc.strerror or exc}") from exc
        if self.groups is not None:
            leader = transport.get_pid()
            if leader is not None:
                await asyncio.to_thread(
                    self.groups.started, launch.token, leader, agent=agent, kind=sandbox.kind
                )
        info = ProcessInfo(
            id=pid,
            agent=agent,
            session=session,
            command=command,
            cwd=str(cwd),
            started_at=time.time(),
            exit_code=None,
            ended_at=None,
            notify=notify,
            killed=False,
        )
        return _Entry(info, transport, protocol, seglog, asyncio.Event(), sandbox, launch.token)

    # -- running ----------------------------------------------------------------------------

    async def _pump(self, entry: _Entry) -> None:
        """Copy the child's output to its log until the pipe closes."""
        queue = entry.protocol.chunks
        eof = False
        try:
            while not eof:
                chunk = await queue.get()
                parts: list[bytes] = []
                # Batch whatever else is queued so one thread hop writes it all.
                while chunk is not None:
                    parts.append(chunk)
                    if queue.empty():
                        break
                    chunk = queue.get_nowait()
                eof = chunk is None
                if parts:
                    data = b"".join(parts)
                    try:
                        await asyncio.to_thread(entry.log.append, data)
                    except OSError as exc:
                        log.warning("cannot write output of %s: %s", entry.info.id, exc)
                    entry.protocol.consumed(len(data))
        finally:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(entry.log.close)
            # The pipe is closed: nothing of the group holds it any more.
            self._ended(entry)
            if entry.info.ended_at is not None:
                entry.transport.close()

    async def _supervise(self, entry: _Entry, timeout_seconds: float | None) -> None:
        """Wait for the exit (enforcing the timeout), record it and send the notice."""
        exited = entry.protocol.exited
        if timeout_seconds is not None:
            try:
                await wait_within(asyncio.shield(exited), timeout_seconds)
            except TimeoutError:
                if not entry.info.killed and not self._closing:
                    entry.info.timed_out = True
                    await self._terminate_group(entry)
        await exited
        assert entry.pump is not None
        # Let the last output reach the log before anyone is told the process ended.
        with contextlib.suppress(TimeoutError):
            await wait_within(asyncio.shield(entry.pump), _DRAIN_GRACE_SECONDS)
        code = entry.transport.get_returncode()
        entry.info.exit_code = code if code is not None else -1
        entry.info.ended_at = time.time()
        self._close_stdin(entry)
        if entry.pump.done():
            entry.transport.close()
        # Forget the oldest finished one before waiters wake, so they see the final state.
        await self._remember_finished(entry)
        entry.done.set()
        if entry.info.notify and not entry.info.killed and not self._closing and self.on_exit:
            try:
                await self.on_exit(dataclasses.replace(entry.info))
            except Exception:
                log.exception("exit notice for background process %s failed", entry.info.id)

    async def _remember_finished(self, entry: _Entry) -> None:
        if self._closing:
            return
        order = self._finished.setdefault(entry.info.agent, deque())
        order.append(entry.info.id)
        while len(order) > self.keep_finished:
            old = self._entries.pop(order.popleft(), None)
            if old is not None:
                await self._forget(old)

    async def _forget(self, entry: _Entry) -> None:
        """Drop a finished process: stop pumping any leftover grandchildren, delete its log."""
        if entry.pump is not None and not entry.pump.done():
            _signal_group(entry.pgid, signal.SIGKILL)
            entry.pump.cancel()
        entry.transport.close()
        with contextlib.suppress(OSError):
            await asyncio.to_thread(entry.log.remove)

    def _ended(self, entry: _Entry) -> None:
        if self.groups is not None:
            self.groups.ended(entry.token)

    def _close_stdin(self, entry: _Entry) -> None:
        if entry.stdin_closed:
            return
        entry.stdin_closed = True
        pipe = entry.transport.get_pipe_transport(0)
        if pipe is not None:
            pipe.close()

    async def _terminate_group(self, entry: _Entry) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after the grace (where
        it runs first, then the local client)."""
        pgid = entry.pgid
        await _signal_remote([entry], "TERM")
        _signal_group(pgid, signal.SIGTERM)
        await self._wait_group_gone([entry])
        await _signal_remote([entry], "KILL")
        _signal_group(pgid, signal.SIGKILL)

    async def _wait_group_gone(self, entries: list[_Entry]) -> None:
        """Wait up to the kill grace for the leaders to exit and their groups to empty."""
        deadline = time.monotonic() + self.kill_grace_seconds
        pending = list(entries)
        while pending and time.monotonic() < deadline:
            exited = [e for e in pending if e.protocol.exited.done()]
            live = await asyncio.to_thread(_live_groups, {e.pgid for e in exited})
            pending = [e for e in pending if e not in exited or e.pgid in live]
            if pending:
                await asyncio.sleep(_POLL_SECONDS)

    # -- the agent's view -------------------------------------------------------------------

    def _get(self, agent: str, pid: str) -> _Entry:
        entry = self._entries.get(pid)
        if entry is None or entry.info.agent != agent:
            raise ProcessError(f"no such process: {pid}")
        return entry

    def list(self, agent: str) -> list[ProcessInfo]:
        """The agent's running and remembered finished processes, oldest first."""
        mine = [e.info for e in self._entries.values() if e.info.agent == agent]
        return [dataclasses.replace(i) for i in sorted(mine, key=lambda i: i.started_at)]

    async def output(
        self, agent: str, pid: str, since: int = 0, max_bytes: int = 64_000
    ) -> OutputChunk:
        """Read up to max_bytes of output starting at offset since.

        A negative since starts that many bytes before the end (the tail). Offsets count
        every byte ever written; pass the returned next_offset to continue.
        """
        entry = self._get(agent, pid)
        if max_bytes < 1:
            raise ProcessError(f"max_bytes must be at least 1, got {max_bytes}")
        running = entry.info.running
        data, next_offset, discarded = await asyncio.to_thread(entry.log.read, since, max_bytes)
        # Do not split a UTF-8 character across reads: leave its first bytes for next time.
        cut = _incomplete_utf8_tail(data)
        if cut and cut < len(data):
            data = data[:-cut]
            next_offset -= cut
        return OutputChunk(
            text=data.decode("utf-8", errors="replace"),
            next_offset=next_offset,
            discarded=discarded,
            running=running,
            exit_code=entry.info.exit_code,
        )

    async def wait(self, agent: str, pid: str, timeout_seconds: float | None = None) -> ProcessInfo:
        """Wait for the process to exit; after timeout_seconds return it still running."""
        entry = self._get(agent, pid)
        if timeout_seconds is not None and timeout_seconds < 0:
            raise ProcessError(f"timeout_seconds must not be negative, got {timeout_seconds}")
        with contextlib.suppress(TimeoutError):
            await wait_within(entry.done.wait(), timeout_seconds)
        return dataclasses.replace(entry.info)

    async def kill(self, agent: str, pid: str) -> ProcessInfo:
        """Kill the process's whole group (SIGTERM, then SIGKILL after a grace).

        The process is marked killed and sends no exit notice. Killing a finished process
        only stops grandchildren it left behind.
        """
        entry = self._get(agent, pid)
        if entry.info.running:
            entry.info.killed = True
            await self._terminate_group(entry)
            assert entry.supervisor is not None
            # Bounded: the group was SIGKILLed, so only the drain grace remains.
            with contextlib.suppress(TimeoutError):
                await wait_within(asyncio.shield(entry.supervisor), _DRAIN_GRACE_SECONDS + 5.0)
        elif entry.pump is not None and not entry.pump.done():
            await self._terminate_group(entry)
        return dataclasses.replace(entry.info)

    async def write(self, agent: str, pid: str, data: str, eof: bool = False) -> None:
        """Write data to the process's stdin; eof closes stdin afterwards."""
        entry = self._get(agent, pid)
        if not entry.info.running:
            raise ProcessError(f"process {pid} has exited")
        if entry.stdin_closed or entry.protocol.stdin_lost:
            raise ProcessError(f"the input of process {pid} is already closed")
        pipe = entry.transport.get_pipe_transport(0)
        if not isinstance(pipe, asyncio.WriteTransport) or pipe.is_closing():
            raise ProcessError(f"the input of process {pid} is already closed")
        if data:
            pipe.write(data.encode("utf-8"))
            try:
                await wait_within(entry.protocol.drain(), _WRITE_TIMEOUT_SECONDS)
            except TimeoutError:
                raise ProcessError(
                    f"process {pid} is not reading its input; the rest stays buffered"
                ) from None
            if entry.protocol.stdin_lost:
                raise ProcessError(f"process {pid} closed its input")
        if eof:
            self._close_stdin(entry)

    # -- lifecycle --------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Kill every process group, remove every log and forget everything; no notices."""
        self._closing = True
        entries = list(self._entries.values())
        self._entries.clear()
        self._finished.clear()
        live = [e for e in entries if e.info.running or (e.pump and not e.pump.done())]
        await _signal_remote(live, "TERM")
        for e in live:
            _signal_group(e.pgid, signal.SIGTERM)
        await self._wait_group_gone(live)
        await _signal_remote(live, "KILL")
        for e in live:
            _signal_group(e.pgid, signal.SIGKILL)
        tasks = [t for e in entries for t in (e.supervisor, e.pump) if t is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_DRAIN_GRACE_SECONDS + 5.0)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for e in entries:
            e.transport.close()
            with contextlib.suppress(OSError):
                await asyncio.to_thread(e.log.remove)

    async def kill_orphans(self) -> builtins.list[str]:
        """At start: kill the commands (foreground or background, here or in a sandbox) a
        Habakkuk process that is gone left running; the tokens of those ended."""
        if self.groups is None:
            return []
        return await self.groups.kill_orphans(self.sandboxes)

    def cleanup_old_logs(self, max_age_seconds: float = 86400) -> int:
        """Delete process logs older than max_age_seconds, e.g. left by an earlier run.

        Blocks on the file system; call it at startup or through asyncio.to_thread. Returns
        how many files were removed. Logs of processes this manager knows are kept.
        """
        cutoff = time.time() - max_age_seconds
        known = set(self._entries)
        removed = 0
        try:
            names = os.listdir(self.procs_dir)
        except FileNotFoundError:
            return 0
        for name in names:
            if not _LOG_NAME.match(name) or name.split(".", 1)[0] in known:
                continue
            path = self.procs_dir / name
            try:
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    log.warning("cannot remove old process log %s: %s", path, exc)
        return removed


def _incomplete_utf8_tail(data: bytes) -> int:
    """How many bytes at the end of data start a UTF-8 character that is not complete."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        if byte & 0xE0 == 0xC0:
            need = 2
        elif byte & 0xF0 == 0xE0:
            need = 3
        elif byte & 0xF8 == 0xF0:
            need = 4
        else:
            return 0
        return back if back < need else 0
    return 0
