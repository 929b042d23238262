"""Files of the process groups a Habakkuk process leads, so a Habakkuk killed with -9 ends
them at its next start (the commands of tools/sandbox/groups.py, the scripts of
work/script_groups.py).

A group is written to FOLDER/<name>.json (0600, in a 0700 folder) as soon as it is spawned:
its id and when its leader started, the Habakkuk process running it (pid and start time)
and the host, beside what its user adds; `ended` removes the file. `orphans` reads back
the files whose Habakkuk process is gone. A process is known by its pid and its start time
together, so a pid the system has since given to another process is never taken for it,
and the files of a live Habakkuk (a terminal app beside `--serve`) are left alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from habakkuk.engine.hostname import this_host
from habakkuk.engine.process_start import process_start

log = logging.getLogger(__name__)


class OwnedGroup(Protocol):
    """What every record says of the group's owner."""

    @property
    def owner_pid(self) -> int: ...
    @property
    def owner_start(self) -> str: ...
    @property
    def host(self) -> str: ...


R = TypeVar("R", bound=OwnedGroup)


def read_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; ValueError when it is not one, OSError when unreadable."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not an object")
    return data


class GroupFiles:
    """The group files in `folder`; `what` names a group in the log ("command")."""

    def __init__(self, folder: Path, what: str) -> None:
        self.folder = folder
        self.what = what
        self._me: tuple[int, str | None] | None = None  # (our pid, when we started)

    def _my_start(self) -> str | None:
        pid = os.getpid()
        if self._me is None or self._me[0] != pid:
            self._me = (pid, process_start(pid))
        return self._me[1]

    def write(self, name: str, pgid: int, fields: dict[str, str]) -> None:
        """Record the group `pgid` just spawned, as FOLDER/`name`.json with `fields`.

        Never raises: a file that cannot be written is logged (the group runs on; only a
        crash during it would leave it behind)."""
        start = process_start(pgid)
        owner_start = self._my_start()
        if start is None or owner_start is None:
            return  # the group is gone already (nothing to kill), or no way to tell
        record = {
            **fields,
            "pgid": pgid,
            "start": start,
            "owner_pid": os.getpid(),
            "owner_start": owner_start,
            "host": this_host(),
        }
        path = self.folder / f"{name}.json"
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
            os.replace(partial, path)  # whole or absent: never a half-written record
        except OSError as exc:
            log.warning("%s %s: cannot record its process group: %s", self.what, name, exc)
            with contextlib.suppress(OSError):
                partial.unlink()

    def ended(self, name: str) -> None:
        """The group of `name` is gone: forget its file."""
        with contextlib.suppress(OSError):
            (self.folder / f"{name}.json").unlink()

    def orphans(self, pattern: str, read: Callable[[Path], R]) -> list[tuple[Path, R]]:
        """The records (files matching `pattern`, read by `read`) that a Habakkuk process
        now gone left on this machine (blocking). An unreadable file is logged and removed;
        another machine's (a home on a shared disk) is not ours to judge."""
        try:
            paths = sorted(self.folder.glob(pattern))
        except OSError:
            return []
        host = this_host()
        found = []
        for path in paths:
            try:
                record = read(path)
            except FileNotFoundError:
                continue  # its group ended while we looked
            except (OSError, ValueError) as exc:
                log.warning("%s: unreadable %s group record (%s); removed", path, self.what, exc)
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if record.host != host:
                continue
            if process_start(record.owner_pid) == record.owner_start:
                continue  # the Habakkuk running it is alive: its group goes on
            found.append((path, record))
        return found
