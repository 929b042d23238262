"""Helpers shared by the tests of every directory: one bounded wait for state with no
event, and the context a tool is called with directly.

Prefer awaiting an event, a message or a worker. Where the state being watched has
none (a widget's reactive, a file another process writes, a row another process
commits), `eventually` polls it, yielding to the loop between checks, and fails the
test naming what it waited for once the deadline passes. It never stands in for a
condition: it returns as soon as the condition holds.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from habakkuk.engine.events import EventBus
from habakkuk.engine.sql import Conn, Database
from habakkuk.engine.store import BlobStore, SqliteDatabase
from habakkuk.engine.toolkit.registry import ToolContext

BOUND = 20.0  # seconds: generous for anything a test waits on in-process
PROCESS_BOUND = 120.0  # seconds: a cold-started interpreter on a loaded machine
POLL = 0.01  # seconds between checks: the loop runs other tasks meanwhile

Condition = Callable[[], object | Awaitable[object]]


async def eventually(
    condition: Condition,
    *,
    what: str,
    timeout: float = BOUND,
    ignore: tuple[type[BaseException], ...] = (),
) -> None:
    """Return once `condition()` is true (awaited if it returns an awaitable).

    Fails the test with "timed out after <timeout>s waiting for <what>".
    Exceptions of the types in `ignore` count as "not yet" (a database another
    process has locked or not created yet).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            result = condition()
            if inspect.isawaitable(result):
                result = await result
        except ignore:
            result = False
        if result:
            return
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(POLL)


def eventually_sync(condition: Callable[[], object], *, what: str, timeout: float = BOUND) -> None:
    """`eventually` for tests with no event loop, watching real processes from outside."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


def tool_context(
    root: Path,
    *,
    agent: str = "main",
    mode: str = "full",
    workspace: Path | None = None,
    **extra: Any,
) -> ToolContext:
    """The context of a tool called directly, as in a turn of `agent`: its workspace
    `root`/ws (made) unless one is given, its home `root`, blobs in `root`/blobs and a bus
    of its own; `extra` sets the other fields (approver, exec_timeout, ...)."""
    if workspace is None:
        workspace = root / "ws"
        workspace.mkdir(exist_ok=True)
    return ToolContext(
        agent=agent,
        session="ses_1",
        turn="turn_1",
        workspace=workspace,
        mode=mode,
        home=root,
        blobs=BlobStore(root / "blobs"),
        bus=EventBus(),
        **extra,
    )


async def python_in(code: str, home: Path, **env: str) -> tuple[int, str, str]:
    """Run `code` in a fresh interpreter with HABAKKUK_HOME=`home` (and `env`): its exit
    status, stdout and stderr. One that outlives PROCESS_BOUND is killed, and the test
    fails saying so (no process is left running behind it)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HABAKKUK_HOME": str(home), **env},
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), PROCESS_BOUND)
    except TimeoutError:
        process.kill()
        await process.communicate()
        pytest.fail(f"a fresh interpreter ran past {PROCESS_BOUND:g}s")
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


class Attending:
    """Someone attending `runtime` (a Runtime) who answers every approval its attended
    turns ask with `answer` (an answer, or a function of the ApprovalRequest giving
    one), keeping each request in `asked`:

        async with Attending(runtime, "deny") as person:
            ...  # submit a turn with attended=True
        assert [r.tool for r in person.asked] == ["memory_save"]
    """

    def __init__(self, runtime: Any, answer: str | Callable[[Any], str] = "allow_once") -> None:
        self.runtime = runtime
        self.answer = answer
        self.asked: list[Any] = []  # the ApprovalRequests, in the order they were asked
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Attending:
        self._attendance = self.runtime.approvals.attach()
        self._pending = self.runtime.bus.subscribe(lambda e: e.kind == "approval.pending")
        self._task = asyncio.create_task(self._answer_each())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self.runtime.bus.unsubscribe(self._pending)
        self._attendance.release()

    async def _answer_each(self) -> None:
        while True:
            event = await self._pending.get()
            request = event.data["request"]
            self.asked.append(request)
            answer = self.answer(request) if callable(self.answer) else self.answer
            self.runtime.approvals.answer(event.data["id"], answer)


def sqlite_db(db: Database) -> SqliteDatabase:
    """`db` as the SQLite database it is, for a test of SQLite's own paths."""
    assert isinstance(db, SqliteDatabase), db
    return db


def sqlite_conn(conn: Conn) -> sqlite3.Connection:
    """`conn` as the sqlite3 connection it is, for a test reading SQLite's own state
    (its statement trace, its query plans)."""
    assert isinstance(conn, sqlite3.Connection), conn
    return conn
