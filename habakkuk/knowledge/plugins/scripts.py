"""A plugin's script command: `/bin/sh -c SCRIPT` in the plugin's folder, its output the reply.

The script gets the user's words after the command in HABAKKUK_ARGS and on stdin, and
only PATH, HOME, LANG, LC_ALL, TZ, HABAKKUK_HOME, HABAKKUK_PLUGIN and HABAKKUK_ARGS in its
environment (never Habakkuk's own, which may hold provider keys). It runs in its own
process group, which is killed at the command's timeout and when it ends, so helpers it
started do not linger. Standard output is the reply, cut at OUTPUT_LIMIT; a non-zero exit,
a timeout or a script that cannot start is a failure whose reason is stderr's last line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.config import PluginCommand
from habakkuk.engine.timeouts import wait_within

SHELL = "/bin/sh"
OUTPUT_LIMIT = 16 * 1024
STDERR_LIMIT = 16 * 1024
PASSED_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class ScriptResult:
    """How a script command ended: its (cut) output, or why it failed."""

    ok: bool
    output: str
    reason: str = ""  # for a failure: stderr's last line, or what went wrong
    cut: bool = False  # the output was longer than OUTPUT_LIMIT


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def script_environment(command: PluginCommand, args: str, home: Path) -> dict[str, str]:
    """The script's whole environment (see the module docstring)."""
    env = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    env.update(HABAKKUK_HOME=str(home), HABAKKUK_PLUGIN=command.plugin, HABAKKUK_ARGS=args)
    return env


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """Read to the end, keeping `limit` bytes (so a chatty script never blocks on the pipe)."""
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        if len(chunk) > room:
            cut = True
        kept.extend(chunk[: max(0, room)])
    return bytes(kept), cut


async def run_script(command: PluginCommand, args: str, home: Path) -> ScriptResult:
    """Run `command`'s script to its end or its timeout; never raises for its failure."""
    assert command.script is not None
    label = f"/{command.name} (plugin {command.plugin})"
    try:
        process = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            command.script,
            cwd=str(command.folder),
            env=script_environment(command, args, home),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ScriptResult(False, "", f"{label} could not start: {exc.strerror or exc}")

    async def talk() -> tuple[bytes, bool, bytes]:
        assert process.stdin and process.stdout and process.stderr
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(args.encode("utf-8"))
            await process.stdin.drain()
        with contextlib.suppress(OSError):
            process.stdin.close()
        (out, cut), (err, _) = await asyncio.gather(
            _read_capped(process.stdout, OUTPUT_LIMIT), _read_capped(process.stderr, STDERR_LIMIT)
        )
        await process.wait()
        return out, cut, err

    try:
        out, cut, err = await wait_within(talk(), command.timeout)
    except TimeoutError:
        _kill_group(process.pid)
        with contextlib.suppress(ProcessLookupError):
            await process.wait()
        return ScriptResult(False, "", f"{label} timed out after {command.timeout:g}s")
    except BaseException:
        _kill_group(process.pid)
        raise
    _kill_group(process.pid)  # what it left running in its group goes with it
    output = out.decode("utf-8", errors="replace").rstrip()
    if process.returncode == 0:
        return ScriptResult(True, output, cut=cut)
    lines = [line.strip() for line in err.decode("utf-8", errors="replace").splitlines()]
    last = next((line for line in reversed(lines) if line), "")
    reason = last[:300] or f"{label} exited with code {process.returncode}"
    return ScriptResult(False, output, reason, cut)
