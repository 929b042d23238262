"""Real `habakkuk --serve` processes for the crash tests: started on a home, killed with
SIGKILL or stopped with SIGTERM (cleanly), and their databases read as another process
would read them.

The `serve_process` fixture (tests/conftest.py) starts them and kills any a test leaves
running, so a test says only what it does to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

BOUND = 60.0  # seconds: the processes are real and cold-started

Process = asyncio.subprocess.Process
StartServe = Callable[..., Awaitable[Process]]


async def kill(process: Process) -> None:
    """SIGKILL, as a crash would, and wait until it is gone."""
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
    await asyncio.wait_for(process.wait(), BOUND)


async def stop(process: Process) -> str:
    """SIGTERM and wait; the shutdown must be clean (exit 0, no traceback). Its stderr."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), BOUND)
    text = (err or b"").decode(errors="replace")
    assert process.returncode == 0, text
    assert "Traceback" not in text, text
    return text


def free_port() -> int:
    """A loopback port free now (for a process's http.listen)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def until_said(process: Process, words: str) -> list[str]:
    """Read the process's stderr up to a line with `words`; the lines read."""
    assert process.stderr is not None
    lines: list[str] = []
    while not any(words in line for line in lines):
        line = await asyncio.wait_for(process.stderr.readline(), BOUND)
        assert line, "serve exited: " + "".join(lines)
        lines.append(line.decode())
    return lines


async def until_serving(process: Process) -> list[str]:
    """Wait until the process serves (its signal handlers are in place: a SIGTERM
    before that ends it uncleanly); the lines read."""
    return await until_said(process, "habakkuk: serving")


async def until_http(process: Process) -> list[str]:
    """Wait until the process says where it serves HTTP; the lines read (the last says
    "HTTP on <address>")."""
    return await until_said(process, "HTTP on")


def query(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[sqlite3.Row]:
    """Rows of another process's database; none while it is missing, not migrated yet
    or locked (that counts as "not yet" for a bounded wait)."""
    if not path.exists():
        return []
    with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:
            return []


@contextlib.asynccontextmanager
async def serve_processes() -> AsyncIterator[StartServe]:
    """`await start(home, **env)` starts `habakkuk --serve` on `home` (the environment's
    variables plus `env`; stderr piped for `stop`; `flags`: more of its options, such as
    `("--agents", "main")`); any left running at the end is killed."""
    started: list[Process] = []

    async def start(home: Path, *, flags: tuple[str, ...] = (), **env: str) -> Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "habakkuk.cli", "--serve", *flags,
            env={**os.environ, "HABAKKUK_HOME": str(home), **env},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.returncode is None:
                process.kill()
            await process.communicate()  # its pipe read and closed


def jobs(home: Path) -> dict[str, sqlite3.Row]:
    """The jobs of a home another process runs, by id (none while its database is not
    there or not readable yet)."""
    return {row["id"]: row for row in query(home / "control.db", "SELECT * FROM jobs")}
