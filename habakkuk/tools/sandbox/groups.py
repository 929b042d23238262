"""The process groups of running commands, on disk, so a Habakkuk killed mid-command ends
them at its next start: no command outlives the turn that ran it.

Each command (exec, foreground or background) leads a process group of its own here: the
command itself (sandbox none) or its docker or ssh client. As soon as it is spawned,
`CommandGroups.started` writes run/commands/<token>.json through engine/group_files.py
(the group, when its leader started, the Habakkuk process running it) with the agent and
sandbox it ran in and the token that names its pid file there. `ended` removes it.
`kill_orphans` ends the groups whose Habakkuk process is gone, the remote tree first
(through the agent's sandbox), then the local one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.group_files import GroupFiles, read_object
from habakkuk.engine.process_start import process_start

from .base import Sandboxes

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"^c_[0-9a-f]{16}$")


@dataclass(frozen=True)
class CommandRecord:
    """One running command's process group, as its file holds it."""

    token: str
    pgid: int
    start: str  # when the group's leader started (process_start)
    owner_pid: int  # the Habakkuk process running it
    owner_start: str
    host: str
    agent: str
    kind: str  # the sandbox: none, docker or ssh

    @classmethod
    def read(cls, path: Path) -> CommandRecord:
        """The record in `path`; ValueError when it is not one, OSError when unreadable."""
        data = read_object(path)
        try:
            record = cls(
                token=str(data["token"]),
                pgid=int(data["pgid"]),
                start=str(data["start"]),
                owner_pid=int(data["owner_pid"]),
                owner_start=str(data["owner_start"]),
                host=str(data["host"]),
                agent=str(data["agent"]),
                kind=str(data["kind"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"missing or bad field: {exc}") from None
        if not _TOKEN.match(record.token):
            raise ValueError(f"bad token {record.token!r}")
        return record


class CommandGroups:
    """The files of running commands' process groups in `folder` (run/commands)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._files = GroupFiles(folder, "command")

    def started(self, token: str, pgid: int, *, agent: str, kind: str) -> None:
        """Record the process group `pgid` just spawned for command `token`; never raises."""
        self._files.write(token, pgid, {"token": token, "agent": agent, "kind": kind})

    def ended(self, token: str) -> None:
        """Command `token` and its group are gone: forget the record."""
        self._files.ended(token)

    def orphans(self) -> list[tuple[Path, CommandRecord]]:
        """The records a Habakkuk process that is gone left on this machine (blocking)."""
        return self._files.orphans("c_*.json", CommandRecord.read)

    async def kill_orphans(self, sandboxes: Sandboxes) -> list[str]:
        """Kill the commands a Habakkuk process that is gone left running (the remote
        tree through the agent's sandbox, then the local group) and forget their records;
        the tokens of the commands ended."""
        killed = []
        for path, record in await asyncio.to_thread(self.orphans):
            if record.kind != "none":
                try:
                    sandbox = sandboxes.for_agent(record.agent)
                    if sandbox.kind == record.kind:
                        await sandbox.kill(record.token, "KILL")
                except Exception as exc:  # one agent's broken sandbox stops no other cleanup
                    log.warning("command %s: cannot end it in its sandbox: %s", record.token, exc)
            if process_start(record.pgid) == record.start:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(record.pgid, signal.SIGKILL)
            killed.append(record.token)
            log.warning(
                "command %s of agent %s (sandbox %s): ended, left running by a Habakkuk that"
                " stopped",
                record.token,
                record.agent,
                record.kind,
            )
            with contextlib.suppress(OSError):
                path.unlink()
        return killed
