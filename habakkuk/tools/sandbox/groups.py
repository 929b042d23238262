"""The process groups of running commands, on disk, so a Habakkuk killed mid-command ends
them at its next start: no command outlives the turn that ran it.

Each command (exec, foreground or background) leads a process group of its own here: the
command itself (sandbox none) or its docker or ssh client. As soon as it is spawned,
`CommandGroups.started` writes run/commands/<token>.json (0600, in a 0700 folder): the
group's id and when its leader started, the Habakkuk process running it (pid and start
time), and the agent and sandbox it ran in, with the token that names its pid file
there. `ended` removes it. `kill_orphans` ends the groups whose Habakkuk process is gone,
the remote tree first (through the agent's sandbox), then the local one.

A process is known by its pid and its start time together, so a pid given since to
another process is never signalled, and the files of a live Habakkuk (a terminal app
beside `--serve`) are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

from habakkuk.engine.hostname import this_host
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
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
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
        self._me: tuple[int, str | None] | None = None  # (our pid, when we started)

    def _my_start(self) -> str | None:
        pid = os.getpid()
        if self._me is None or self._me[0] != pid:
            self._me = (pid, process_start(pid))
        return self._me[1]

    def _path(self, token: str) -> Path:
        return self.folder / f"{token}.json"

    def started(self, token: str, pgid: int, *, agent: str, kind: str) -> None:
        """Record the process group `pgid` just spawned for command `token`.

        Never raises: a file that cannot be written is logged (the command goes on; only a
        crash during it would leave its group behind)."""
        start = process_start(pgid)
        owner_start = self._my_start()
        if start is None or owner_start is None:
            return  # the command is gone already, or no way to tell
        record = CommandRecord(
            token, pgid, start, os.getpid(), owner_start, this_host(), agent, kind
        )
        path = self._path(token)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(record), handle)
            os.replace(partial, path)  # whole or absent: never a half-written record
        except OSError as exc:
            log.warning("command %s: cannot record its process group: %s", token, exc)
            with contextlib.suppress(OSError):
                partial.unlink()

    def ended(self, token: str) -> None:
        """Command `token` and its group are gone: forget the record."""
        with contextlib.suppress(OSError):
            self._path(token).unlink()

    def orphans(self) -> list[tuple[Path, CommandRecord]]:
        """The records a Habakkuk process that is gone left on this machine (blocking)."""
        try:
            paths = sorted(self.folder.glob("c_*.json"))
        except OSError:
            return []
        host = this_host()
        found = []
        for path in paths:
            try:
                record = CommandRecord.read(path)
            except FileNotFoundError:
                continue  # its command ended while we looked
            except (OSError, ValueError) as exc:
                log.warning("%s: unreadable command group record (%s); removed", path, exc)
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if record.host != host:
                continue  # another machine's (a home on a shared disk): not ours to judge
            if process_start(record.owner_pid) == record.owner_start:
                continue  # the Habakkuk running it is alive: its command goes on
            found.append((path, record))
        return found

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
