"""Hooks: user commands run on events (config `hooks:`, spec 000 "Hooks").

Each hook is {event, command, timeout, match}. The command runs with
`/bin/sh -c` in $HABAKKUK_HOME (an enabled plugin's hooks in the plugin's folder),
gets the event as JSON on stdin and HABAKKUK_EVENT / HABAKKUK_HOME in its
environment, in its own process group, and is killed with its group at its timeout (default 10 s).

Only tool_before is waited for, and it fails closed: a non-zero exit, a
timeout or a command that cannot start blocks the call, and the model gets the
hook's stdout as the reason. Every other event runs its hooks in the
background; their failures are logged. Which events there are, who fires them
and what each one's `match` is searched in: habakkuk.engine.hook_events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.hook_events import BLOCKING_EVENTS, HOOK_EVENTS, HookEvent
from habakkuk.engine.timeouts import wait_within

__all__ = ["BLOCKING_EVENTS", "HOOK_EVENTS", "HookEvent", "HookResult", "Hooks", "run_hook"]

log = logging.getLogger(__name__)
OUTPUT_LIMIT = 64 * 1024
SHELL = "/bin/sh"


@dataclass(frozen=True)
class HookResult:
    """How one hook run ended. `ok` is False for a non-zero exit, a timeout or no start."""

    ok: bool
    exit_code: int | None
    stdout: str
    reason: str


class Hooks:
    """The configured hooks of one home, and the background runs in flight."""

    def __init__(self, hooks: list[Any], home: Path):
        """`hooks` are config entries with event, command, timeout and match."""
        self.home = home
        self._hooks: list[tuple[Any, re.Pattern[str] | None]] = [
            (h, re.compile(h.match) if h.match else None) for h in hooks
        ]
        self._background: set[asyncio.Task[HookResult]] = set()

    def replace(self, hooks: list[Any]) -> None:
        """Swap the configured hooks (a config reload); runs in flight finish."""
        self._hooks = [(h, re.compile(h.match) if h.match else None) for h in hooks]

    def matching(self, event: HookEvent, subject: str) -> list[Any]:
        """The hooks for `event` whose match (if any) finds `subject`."""
        return [
            h
            for h, pattern in self._hooks
            if h.event == event and (pattern is None or pattern.search(subject))
        ]

    async def guard(self, event: HookEvent, subject: str, data: dict[str, Any]) -> str | None:
        """Run the blocking hooks of `event` in order; the first block's reason, or None."""
        for hook in self.matching(event, subject):
            result = await run_hook(hook, event, data, self.home)
            if not result.ok:
                return result.reason
        return None

    def fire(self, event: HookEvent, subject: str, data: dict[str, Any]) -> None:
        """Start the hooks of a non-blocking event in the background."""
        for hook in self.matching(event, subject):
            task = asyncio.get_running_loop().create_task(
                run_hook(hook, event, data, self.home), name=f"hook-{event}"
            )
            self._background.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[HookResult]) -> None:
        self._background.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.warning("hook failed: %s", exc)
        elif not task.result().ok:
            log.warning("hook: %s", task.result().reason)

    async def drain(self, timeout: float = 15.0) -> None:
        """Wait for background runs (bounded), then cancel what is left (its group is killed)."""
        tasks = list(self._background)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_hook(hook: Any, event: str, data: dict[str, Any], home: Path) -> HookResult:
    """Run one hook to the end (or its timeout); never raises for the command's failure."""
    label = f"hook {event} `{hook.command[:80]}`"
    payload = json.dumps({"event": event, **data}, ensure_ascii=False, default=str).encode()
    env = dict(os.environ, HABAKKUK_EVENT=event, HABAKKUK_HOME=str(home))
    try:
        process = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            hook.command,
            # A plugin's hooks run in its folder (HookConfig.cwd), the rest in the home.
            cwd=str(getattr(hook, "cwd", None) or home),
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return HookResult(False, None, "", f"{label} could not start: {exc.strerror or exc}")

    async def talk() -> bytes:
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(payload)
            await process.stdin.drain()
        with contextlib.suppress(OSError):
            process.stdin.close()
        out = bytearray()
        # Keep reading past the limit (discarding), so a chatty hook never blocks on the pipe.
        while chunk := await process.stdout.read(65536):
            out.extend(chunk[: max(0, OUTPUT_LIMIT - len(out))])
        await process.wait()
        return bytes(out)

    try:
        out = await wait_within(talk(), hook.timeout)
    except TimeoutError:
        _kill_group(process.pid)
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
        return HookResult(False, None, "", f"{label} timed out after {hook.timeout:g}s")
    except BaseException:
        _kill_group(process.pid)
        raise
    # The shell is gone; what it left in its group must not outlive the hook.
    _kill_group(process.pid)
    stdout = out.decode("utf-8", errors="replace").strip()
    code = process.returncode
    if code == 0:
        return HookResult(True, code, stdout, "")
    reason = stdout or f"{label} exited with code {code}"
    return HookResult(False, code, stdout, reason)
