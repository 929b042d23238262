"""What every sandbox gives the exec tool and the background processes: the local argument
list that runs a command where the agent's commands run, and a way to kill its whole tree
there (spec 000 "Sandboxes").

A remote command (docker exec, ssh) runs under `WRAPPER`: a small sh script that starts
bash as a new session leader (setsid, where the system has it), so the command and
everything it starts share one process group, and writes that group's id to a pid file
where it runs (one bash per command: each one more costs milliseconds a round trip).
Killing the local client alone would leave the command running; `KILLER` reads the pid
file and signals the group (bash's kill takes a negative group id).
"""

from __future__ import annotations

import secrets
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from habakkuk.engine.sandbox_config import SandboxKind

__all__ = [
    "KILLER",
    "WRAPPER",
    "Launch",
    "Sandbox",
    "SandboxError",
    "Sandboxes",
    "new_token",
    "remote_pid_file",
    "shell_argv",
]


class SandboxError(Exception):
    """A command cannot be run where the agent's commands run; the message says why."""


def shell_argv(command: str) -> list[str]:
    """bash -c COMMAND, or sh where bash is missing."""
    shell = shutil.which("bash") or "/bin/sh"
    return [shell, "-c", command]


def new_token() -> str:
    """A fresh name for one command's pid files (here and where it runs)."""
    return "c_" + secrets.token_hex(8)


def remote_pid_file(token: str) -> str:
    """Where the wrapper records the command's process group, on the side it runs on."""
    return f"/tmp/habakkuk-{token}.pid"


# (dash's kill takes no "--": a group is "-PGID" right after the signal.)
# $1 the pid file, $2 the directory, $3 the command, $4 "reap" (foreground: when the
# command ends, whatever it left in its group is ended too, or it would hold the client's
# output open) or "keep" (background: leftovers go on, as with local commands, and the
# pid file stays while they run, so process_kill still reaches them; the kill removes it).
# Builtins wherever they do (read, not $(cat)): every fork costs a round trip time.
# The outer sh stays to clean up; its child (never a group leader, so setsid needs no
# fork) becomes a session leader, writes its pid, which is its process group's id, and
# execs bash with the command. It writes the pid before it looks for the killer's mark,
# and the killer leaves its mark before it reads the pid file: so a kill that comes
# before the pid file is written still ends the command.
_LEADER = (
    'echo $$ > "$1"; '
    'if [ -e "$1.kill" ]; then rm -f -- "$1" "$1.kill"; exit 137; fi; '
    'cd -- "$2" 2>/dev/null || { echo "no folder $2 where the command runs" >&2; exit 1; }; '
    'exec bash -c "$3"'
)
WRAPPER = (
    "s=; command -v setsid >/dev/null 2>&1 && s=setsid; "
    f"$s sh -c '{_LEADER}' sh \"$@\"; rc=$?; "
    'p=; read -r p < "$1" 2>/dev/null; '
    'if [ "$4" = keep ] && [ -n "$p" ] && kill -0 "-$p" 2>/dev/null; then :; '
    'else rm -f -- "$1"; fi; '
    'if [ "$4" = reap ] && [ -n "$p" ]; then kill -TERM "-$p" 2>/dev/null; fi; '
    "exit $rc"
)
# $1 the pid file, $2 the signal name (TERM, KILL). bash: its kill takes -PGID.
KILLER = (
    ': > "$1.kill"; p=$(cat -- "$1" 2>/dev/null) || exit 0; '
    '[ -n "$p" ] || exit 0; '
    'kill -s "$2" -- "-$p" 2>/dev/null || kill -s "$2" -- "$p" 2>/dev/null; '
    'if [ "$2" = KILL ]; then rm -f -- "$1" "$1.kill"; fi; exit 0'
)


@dataclass(frozen=True)
class Launch:
    """What to start here for one command: the client's arguments and its directory."""

    argv: tuple[str, ...]
    cwd: Path
    token: str


class Sandbox(ABC):
    """Where one agent's commands run."""

    kind: ClassVar[SandboxKind]
    # Whether the command runs elsewhere than the local process started for it (its
    # client): then `kill` must end it there before the client is killed.
    remote: ClassVar[bool] = True
    # Whether the local workspace is the one its commands see (false for ssh, whose
    # commands run in a workdir of their own): else its file writes are refused.
    shares_workspace: ClassVar[bool] = True

    @abstractmethod
    async def launch(self, command: str, cwd: Path, *, token: str, foreground: bool) -> Launch:
        """The client to start for `command` in `cwd` (a path as the agent gave it);
        SandboxError when it cannot run there (a missing key, an unknown host key...)."""

    @abstractmethod
    async def kill(self, token: str, signal_name: str = "KILL") -> None:
        """Signal the process group of command `token` where it runs (TERM or KILL)."""


class Sandboxes(Protocol):
    """The sandbox of each agent (the one small interface exec and processes use)."""

    def for_agent(self, agent: str) -> Sandbox:
        """The sandbox `agent`'s commands run in."""
        ...
