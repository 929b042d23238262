"""skills/.backups/ and plugins/.backups/: every version an update, a removal, the curator
or a restore replaced, kept so that `habakkuk skills restore NAME` can put it back.

A backup is a folder `<name>/<stamp>-<reason>/` holding a copy of the skill's (or
plugin's) folder under `files/` and `backup.json`: where it came from (relative to the
home, so an agent's own skill goes back to that agent), why, when, and the lock entry it
had. Nothing here deletes a backup; copying refuses symlinks rather than follow them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.knowledge.notes import write_atomic

BACKUPS_DIR = ".backups"
BACKUP_FILE = "backup.json"
FILES_DIR = "files"


@dataclass(frozen=True)
class Backup:
    """One kept version."""

    name: str
    folder: Path  # the backup folder
    origin: str  # where the skill lived, relative to the home ("skills/x", "agents/a/skills/x")
    reason: str  # replaced, removed, merged, archived, restored, updated
    at: str  # RFC 3339 UTC
    lock: dict[str, Any] | None  # the lock entry it had (installed skills and plugins)

    @property
    def files(self) -> Path:
        return self.folder / FILES_DIR


def _stamp() -> str:
    # Sortable to the microsecond (newest() relies on the order); a clash gets a suffix.
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")


def _copy_tree(source: Path, target: Path) -> None:
    """Copy a folder without following symlinks (a link is refused, not copied)."""
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.is_symlink():
                raise HabakkukError(f"{entry.path}: is a symbolic link; not backed up")
            if entry.is_dir(follow_symlinks=False):
                _copy_tree(Path(entry.path), target / entry.name)
            elif entry.is_file(follow_symlinks=False):
                shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)


def back_up(
    root: Path, home: Path, folder: Path, reason: str, lock: dict[str, Any] | None = None
) -> Backup:
    """Copy `folder` (a skill or plugin) into `root`/.backups before it changes."""
    from habakkuk.knowledge.frontmatter import now

    name = folder.name
    base = root / BACKUPS_DIR / name
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = f"{_stamp()}-{reason}"
    target = base / stamp
    n = 1
    while target.exists():
        n += 1
        target = base / f"{stamp}-{n}"
    target.mkdir(mode=0o700)
    _copy_tree(folder, target / FILES_DIR)
    origin = str(folder.resolve().relative_to(home.resolve()))
    backup = Backup(name, target, origin, reason, now(), lock)
    write_atomic(
        target / BACKUP_FILE,
        json.dumps(
            {"name": name, "origin": origin, "reason": reason, "at": backup.at, "lock": lock},
            indent=2,
        ),
    )
    return backup


def backups(root: Path, name: str) -> list[Backup]:
    """The backups of `name` under `root`/.backups, newest first (unreadable ones skipped)."""
    base = root / BACKUPS_DIR / name
    found: list[Backup] = []
    if not base.is_dir():
        return found
    for folder in sorted(base.iterdir(), reverse=True):
        try:
            data = json.loads((folder / BACKUP_FILE).read_text(encoding="utf-8"))
            found.append(
                Backup(
                    name,
                    folder,
                    str(data["origin"]),
                    str(data["reason"]),
                    str(data["at"]),
                    data.get("lock"),
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def newest(root: Path, name: str) -> Backup:
    """The newest backup of `name`; NotFound when there is none."""
    found = backups(root, name)
    if not found:
        raise NotFound(f"no backup of {name!r} in {root / BACKUPS_DIR}")
    return found[0]


def put_back(backup: Backup, home: Path) -> Path:
    """Copy a backup's files to where they came from (which must be empty or absent);
    the folder it restored."""
    target = (home / backup.origin).resolve()
    if not target.is_relative_to(home.resolve()):
        raise HabakkukError(f"{backup.folder}: its origin {backup.origin!r} is outside the home")
    if target.exists():
        raise HabakkukError(f"{target}: exists; back it up or remove it first")
    staging = target.with_name(f".{target.name}.restoring")
    shutil.rmtree(staging, ignore_errors=True)
    _copy_tree(backup.files, staging)
    os.replace(staging, target)
    return target
