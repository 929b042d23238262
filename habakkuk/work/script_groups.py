"""The process groups of running scripts, on disk, so a Habakkuk killed mid-script ends
them at its next start (spec 000 "Schedules": script schedules).

A script leads a process group of its own (script_process.py), which outlives a
Habakkuk killed with -9. As soon as one is spawned, `ScriptGroups.started` writes
run/scripts/<job>.json (0600, in a 0700 folder): the group's id, when its leader
started, and the Habakkuk process running it (pid and start time); `ended` removes it
once the group is gone. `kill_orphans` ends the groups whose Habakkuk process is gone
and removes their files.

A process is known by its pid and its start time together, so a pid the system has
since given to another process is never signalled, and the file of a live Habakkuk (a
terminal app beside `--serve`) is left alone. A group whose leader has exited is left
alone too: nothing can tell it from a stranger's group that took the same id (the
script's own end kills what its leader leaves behind). A crash in the instant between
the spawn and the file's write leaves a group nobody knows of.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.hostname import this_host
from habakkuk.engine.process_start import process_start

__all__ = ["GroupRecord", "ScriptGroups", "process_start"]

log = logging.getLogger(__name__)

_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,120}")


@dataclass(frozen=True)
class GroupRecord:
    """One running script's process group, as its file holds it."""

    job: str
    pgid: int
    start: str  # when the group's leader started (`process_start`)
    owner_pid: int  # the Habakkuk process running it
    owner_start: str
    host: str

    @classmethod
    def read(cls, path: Path) -> GroupRecord:
        """The record in `path`; ValueError when it is not one, OSError when unreadable."""
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
        try:
            return cls(
                job=str(data["job"]),
                pgid=int(data["pgid"]),
                start=str(data["start"]),
                owner_pid=int(data["owner_pid"]),
                owner_start=str(data["owner_start"]),
                host=str(data["host"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"missing or bad field: {exc}") from None


class ScriptGroups:
    """The files of running scripts' process groups in `folder` (run/scripts)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._me: tuple[int, str | None] | None = None  # (our pid, when we started)

    def _my_start(self) -> str | None:
        pid = os.getpid()
        if self._me is None or self._me[0] != pid:
            self._me = (pid, process_start(pid))
        return self._me[1]

    def _path(self, job: str) -> Path:
        name = job if _SAFE_NAME.fullmatch(job) else hashlib.sha256(job.encode()).hexdigest()
        return self.folder / f"{name}.json"

    def started(self, job: str, pgid: int) -> None:
        """Record the process group `pgid` that `job`'s script leads (just spawned).

        Never raises: a file that cannot be written is logged (the run goes on; only a
        crash during it would leave its group behind)."""
        start = process_start(pgid)
        owner_start = self._my_start()
        if start is None or owner_start is None:
            return  # the script is gone already (nothing to kill), or no way to tell
        record = {
            "job": job,
            "pgid": pgid,
            "start": start,
            "owner_pid": os.getpid(),
            "owner_start": owner_start,
            "host": this_host(),
        }
        path = self._path(job)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
            os.replace(partial, path)  # whole or absent: never a half-written record
        except OSError as exc:
            log.warning("script run %s: cannot record its process group: %s", job, exc)
            with contextlib.suppress(OSError):
                partial.unlink()

    def ended(self, job: str) -> None:
        """`job`'s script and its group are gone: forget the record."""
        with contextlib.suppress(OSError):
            self._path(job).unlink()

    def kill_orphans(self) -> list[str]:
        """Kill the process groups a Habakkuk process that is gone left running, and
        forget their records; the jobs whose group was killed."""
        try:
            paths = sorted(self.folder.glob("*.json"))
        except OSError:
            return []
        host = this_host()
        killed = []
        for path in paths:
            try:
                record = GroupRecord.read(path)
            except FileNotFoundError:
                continue  # its run ended while we looked
            except (OSError, ValueError) as exc:
                log.warning("%s: unreadable script group record (%s); removed", path, exc)
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if record.host != host:
                continue  # another machine's (a home on a shared disk): not ours to judge
            if process_start(record.owner_pid) == record.owner_start:
                continue  # the Habakkuk running it is alive: its run goes on
            if process_start(record.pgid) == record.start:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(record.pgid, signal.SIGKILL)
                    killed.append(record.job)
                    log.warning(
                        "script run %s: killed its process group %d, left running by a"
                        " Habakkuk that stopped",
                        record.job,
                        record.pgid,
                    )
            with contextlib.suppress(OSError):
                path.unlink()
        return killed
