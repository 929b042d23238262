"""One script schedule's command as a process (spec 000 "Schedules": script schedules).

`/bin/sh -c COMMAND` runs in the workdir (default the agent's workspace; a relative
workdir is inside it, one that escapes it is refused) with the process environment over
$HABAKKUK_HOME/.env (re-read on every run; the process wins) plus HABAKKUK_AGENT,
HABAKKUK_SCHEDULE_ID and HABAKKUK_SCHEDULE_NAME. The command leads its own process group,
so a timeout kills everything it started. Stdout and stderr are each kept up to
OUTPUT_CAP bytes; reading goes on past the cap (discarding), so a chatty child never
blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.home import read_env_file
from habakkuk.engine.silent import SILENT
from habakkuk.engine.timeouts import wait_within
from habakkuk.work.schedule_types import OUTPUT_CAP

SHELL = "/bin/sh"
_READ_CHUNK = 65536


@dataclass(frozen=True)
class ScriptResult:
    """How one run ended: `exit_code` None when it timed out or could not start."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    start_error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def error(self, timeout: float) -> str:
        """The `error: ...` status of a failed run, with the end of stderr."""
        if self.start_error:
            what = f"could not start: {self.start_error}"
        elif self.timed_out:
            what = f"timed out after {timeout:g}s"
        else:
            what = f"exit code {self.exit_code}"
        tail = self.stderr.strip()[-300:]
        return f"error: {what}" + (f": {tail}" if tail else "")


def resolve_workdir(workspace: Path, workdir: str | None) -> Path:
    """The folder a script runs in; HabakkukError for one that escapes the workspace."""
    root = workspace.resolve()
    if not workdir:
        return root
    path = Path(workdir).expanduser()
    if path.is_absolute():
        return path.resolve()  # the owner named it outright
    resolved = (root / path).resolve()
    if resolved != root and root not in resolved.parents:
        raise HabakkukError(f"workdir {workdir!r} escapes the workspace {root}")
    return resolved


def script_env(env_file: Path, *, agent: str, schedule_id: str, name: str) -> dict[str, str]:
    """The environment of one run: .env (read now), the process over it, the schedule's."""
    env = {**read_env_file(env_file), **os.environ}
    env.update(HABAKKUK_AGENT=agent, HABAKKUK_SCHEDULE_ID=schedule_id, HABAKKUK_SCHEDULE_NAME=name)
    return env


def says_nothing(stdout: str) -> bool:
    """Empty output, or a line that is exactly [SILENT]: nothing to say."""
    if not stdout.strip():
        return True
    return any(line.strip() == SILENT for line in stdout.splitlines())


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (gone already is fine)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> bytes:
    kept = bytearray()
    while chunk := await stream.read(_READ_CHUNK):
        if len(kept) < cap:
            kept.extend(chunk[: cap - len(kept)])
    return bytes(kept)


async def run_script(
    command: str,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    *,
    cap: int = OUTPUT_CAP,
    on_start: Callable[[int], None] | None = None,
) -> ScriptResult:
    """Run `command` to its end or its timeout; never raises for the command's failure.

    `on_start(pgid)` runs as soon as the command's process group exists (to record it);
    when this returns or raises, the group is gone (killed if anything was left)."""
    try:
        process = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            command,
            cwd=str(cwd),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ScriptResult(None, "", "", start_error=f"{exc.strerror or exc} (in {cwd})")
    if on_start is not None:
        try:
            on_start(process.pid)  # it leads its group: the group's id is its pid
        except BaseException:
            kill_group(process.pid)
            raise
    assert process.stdout is not None and process.stderr is not None
    out_task = asyncio.ensure_future(_read_capped(process.stdout, cap))
    err_task = asyncio.ensure_future(_read_capped(process.stderr, cap))

    async def finish() -> None:
        await process.wait()
        # A child left in the group may still hold the pipes open: end it, then drain.
        kill_group(process.pid)
        await asyncio.gather(out_task, err_task)

    timed_out = False
    try:
        await wait_within(finish(), timeout)
    except TimeoutError:
        timed_out = True
        kill_group(process.pid)
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
        await asyncio.gather(out_task, err_task, return_exceptions=True)
    except BaseException:
        kill_group(process.pid)
        out_task.cancel()
        err_task.cancel()
        raise

    def text(task: asyncio.Future[bytes]) -> str:
        if task.cancelled() or task.exception() is not None:
            return ""
        return task.result().decode("utf-8", errors="replace")

    return ScriptResult(
        None if timed_out else process.returncode,
        text(out_task),
        text(err_task),
        timed_out=timed_out,
    )
