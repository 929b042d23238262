"""The process groups of running scripts, on disk, so a Habakkuk killed mid-script ends
them at its next start (spec 000 "Schedules": script schedules).

A script leads a process group of its own (script_process.py), which outlives a
Habakkuk killed with -9. As soon as one is spawned, `ScriptGroups.started` writes
run/scripts/<job>.json through engine/group_files.py (the group, when its leader started,
the Habakkuk process running it); `ended` removes it once the group is gone.
`kill_orphans` ends the groups whose Habakkuk process is gone and removes their files.

A group whose leader has exited is left
alone too: nothing can tell it from a stranger's group that took the same id (the
script's own end kills what its leader leaves behind). A crash in the instant between
the spawn and the file's write leaves a group nobody knows of.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.group_files import GroupFiles, read_object
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
        data = read_object(path)
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
        self._files = GroupFiles(folder, "script run")

    @staticmethod
    def _name(job: str) -> str:
        return job if _SAFE_NAME.fullmatch(job) else hashlib.sha256(job.encode()).hexdigest()

    def started(self, job: str, pgid: int) -> None:
        """Record the process group `pgid` that `job`'s script leads (just spawned); never
        raises."""
        self._files.write(self._name(job), pgid, {"job": job})

    def ended(self, job: str) -> None:
        """`job`'s script and its group are gone: forget the record."""
        self._files.ended(self._name(job))

    def kill_orphans(self) -> list[str]:
        """Kill the process groups a Habakkuk process that is gone left running, and
        forget their records; the jobs whose group was killed."""
        killed = []
        for path, record in self._files.orphans("*.json", GroupRecord.read):
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
