"""The exec tool: a shell command in its own process group, with a timeout and an output cap.

Where it runs is the agent's sandbox (habakkuk.tools.sandbox): here, in its container or
on its remote host. A timeout or a cancellation kills the whole tree where it runs (the
sandbox's kill), then the local process group (the command, or its docker or ssh client).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.permissions import Risk
from habakkuk.engine.toolkit.registry import Tool, ToolContext, ToolError, ToolOutput
from habakkuk.tools.sandbox.base import (
    Launch,
    Sandbox,
    SandboxError,
    Sandboxes,
    new_token,
    shell_argv,
)
from habakkuk.tools.sandbox.groups import CommandGroups
from habakkuk.tools.sandbox.local import LocalSandbox

OUTPUT_CAP = 1_000_000  # bytes kept in memory: the first and last halves


@dataclass
class CommandResult:
    exit_code: int | None
    output: str
    timed_out: bool
    seconds: float
    dropped: int


__all__ = ["CommandResult", "Exec", "kill_group", "run_command", "shell_argv"]

_LOCAL = LocalSandbox()


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (the command and everything it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_command(
    command: str,
    cwd: Path,
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cap: int = OUTPUT_CAP,
    sandbox: Sandbox | None = None,
    groups: CommandGroups | None = None,
    agent: str = "",
) -> CommandResult:
    """Run `command` in `sandbox` (default: here); on timeout or cancellation the whole
    process tree is killed. `groups` records the group while it runs, for the next start
    to kill should this process die. SandboxError when it cannot run there."""
    started = time.monotonic()
    sandbox = sandbox or _LOCAL
    launch = await sandbox.launch(command, cwd, token=new_token(), foreground=True)
    try:
        process = await _spawn(launch, env)
    except BaseException:
        # Cancelled while the client started: it may have started the command there.
        await _kill_remote(sandbox, launch)
        raise
    try:
        if groups is not None:
            recording = asyncio.ensure_future(
                asyncio.to_thread(
                    groups.started, launch.token, process.pid, agent=agent, kind=sandbox.kind
                )
            )
            try:
                await asyncio.shield(recording)
            except BaseException:
                # Cancelled while the group was being recorded: the command runs on and
                # nothing else would stop it. The record is let finish, so the `ended`
                # below removes it rather than racing its write.
                await _kill_tree(sandbox, launch, process.pid)
                await _reap(process)
                with contextlib.suppress(BaseException):
                    await wait_within(recording, 5)
                raise
        return await _collect(process, sandbox, launch, timeout, cap, started)
    finally:
        if groups is not None:
            groups.ended(launch.token)


async def _kill_remote(sandbox: Sandbox, launch: Launch) -> None:
    """Kill the tree where it runs (bounded, and carried out even when cancelled)."""
    if sandbox.remote:
        with contextlib.suppress(BaseException):
            await wait_within(asyncio.shield(sandbox.kill(launch.token, "KILL")), 20)


async def _kill_tree(sandbox: Sandbox, launch: Launch, pid: int) -> None:
    """The tree where it runs first, then the local group (the command or its client)."""
    await _kill_remote(sandbox, launch)
    kill_group(pid)


async def _collect(
    process: asyncio.subprocess.Process,
    sandbox: Sandbox,
    launch: Launch,
    timeout: float,
    cap: int,
    started: float,
) -> CommandResult:
    head = bytearray()
    tail = bytearray()
    dropped = 0
    half = cap // 2

    async def pump() -> None:
        nonlocal dropped, tail
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            room = half - len(head)
            if room > 0:
                head.extend(chunk[:room])
                chunk = chunk[room:]
            if chunk:
                tail.extend(chunk)
                if len(tail) > half:
                    dropped += len(tail) - half
                    tail = tail[-half:]

    timed_out = False
    reader = asyncio.create_task(pump())
    try:
        timed_out = not await _exited(process, timeout)
    except BaseException:
        await _kill_tree(sandbox, launch, process.pid)
        reader.cancel()
        await _reap(process)
        raise
    # The shell is gone; kill what it left in its group (a background job holding the
    # pipe open would otherwise keep the call waiting), then drain the pipe.
    if timed_out:
        await _kill_tree(sandbox, launch, process.pid)
    else:
        kill_group(process.pid)
    with contextlib.suppress(asyncio.TimeoutError):
        await wait_within(reader, 5)
    if timed_out:
        # The kill is sent but the shell may not be reaped yet: wait for it here, or its
        # transport outlives the call and is collected with the child still running.
        await _reap(process)
    text = head.decode("utf-8", errors="replace")
    if dropped:
        text += f"\n…[{dropped:,} bytes of output dropped]…\n"
    text += tail.decode("utf-8", errors="replace")
    return CommandResult(process.returncode, text, timed_out, time.monotonic() - started, dropped)


async def _spawn(launch: Launch, env: dict[str, str] | None) -> asyncio.subprocess.Process:
    """Start the shell in its own process group; a cancelled start leaves nothing running.

    The shell runs as soon as it is forked, while asyncio is still connecting its
    pipes; a cancel in that window would otherwise leave it and its children behind.
    """
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=str(launch.cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    )
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # The cancel stands (re-raised below); a second one may cut this cleanup short.
        with contextlib.suppress(BaseException):
            process = await wait_within(spawn, 5)
            kill_group(process.pid)
            await _reap(process)
        raise


async def _reap(process: asyncio.subprocess.Process) -> None:
    """After kill_group: wait (bounded) for the shell and its pipes to close on this loop,
    so its transport is not left for a garbage collection after the loop has closed."""
    with contextlib.suppress(BaseException):
        await wait_within(asyncio.shield(process.wait()), 5)


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """Wait until the shell exits; False on timeout.

    `Process.wait()` also waits for the pipes to close, which a background
    grandchild can hold open forever; the return code is set as soon as the
    shell itself is reaped, so check it between short waits.
    """
    deadline = time.monotonic() + timeout
    waiter = asyncio.ensure_future(process.wait())
    try:
        while process.returncode is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_within(asyncio.shield(waiter), min(0.1, remaining))
        return True
    finally:
        waiter.cancel()


class Exec(Tool):
    name = "exec"
    description = (
        "Run a shell command (bash) and return its exit code and combined output. "
        "cwd defaults to the workspace; the command is killed after timeout_seconds."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "cwd": {"type": "string"},
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    risk = Risk.EXEC

    def hardline_input(self, args: dict[str, Any]) -> str | None:
        return str(args["command"])

    def paths(self, args: dict[str, Any], ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.get("cwd", "."))]

    # Where the agent's commands run, and the record of running groups (set by
    # process_tools from the runtime's ProcessManager; None: here, unrecorded).
    sandboxes: Sandboxes | None = None
    groups: CommandGroups | None = None

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        cwd = ctx.resolve(args.get("cwd", "."))
        timeout = float(args.get("timeout_seconds", ctx.exec_timeout))
        sandbox = self.sandboxes.for_agent(ctx.agent) if self.sandboxes is not None else None
        try:
            result = await run_command(
                args["command"],
                cwd,
                timeout=timeout,
                sandbox=sandbox,
                groups=self.groups,
                agent=ctx.agent,
            )
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        if result.timed_out:
            header = f"timed out after {timeout:g}s; the process tree was killed"
            return ToolOutput(f"{header}\n{result.output}".rstrip(), is_error=True)
        header = f"exit code {result.exit_code}"
        return ToolOutput(f"{header}\n{result.output}".rstrip(), is_error=result.exit_code != 0)
