"""What a backup archive of a home holds, and the names a restore accepts.

One place says it for both directions: `collect` walks a home and lists what goes into
an archive (each file's name in the archive, where it is, and whether it is a SQLite
database that must be snapshotted rather than copied), and `allowed` is the check a
restore runs on every name it reads, so an archive can only ever put back the kinds of
thing a backup writes.

In an archive: config.yaml; agents/ (memory notes, USER.md, IDENTITY.md, SOUL.md, the
agents' own skills and history.db, the notes' change history), skills/, personalities/,
plugins/ (an enabled plugin is part of the config) and hooks/; the home's databases
(control.db, transcripts.db, state.db, usage.db, web.db and any other `<name>.db` of the
home's top folder). Left out: each agent's memory.db (a search index rebuilt from the
notes), logs, blobs (unless `blobs`), the agents' default workspaces (unless
`workspaces`), and the credentials (.env, auth.json, channels/whatsapp-*.db) unless
`env`. Never in one: symbolic links (not followed), SQLite's -wal/-shm/-journal files
(the snapshot is whole without them), anything else that is not a regular file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MANIFEST = "manifest.json"
PG_DUMP = "postgres.dump"
# Folders of the home copied whole (less what `_skipped` leaves out).
FOLDERS = ("agents", "skills", "personalities", "plugins", "hooks")
BLOBS = "blobs"
CREDENTIALS = (".env", "auth.json")
# A database of the home's top folder, an agent's note history, a WhatsApp device.
_TOP_DB = re.compile(r"[a-z][a-z0-9_]{0,40}\.db")
_AGENT_DB = re.compile(r"agents/[^/]+/history\.db")
_WHATSAPP_DB = re.compile(r"channels/whatsapp-[A-Za-z0-9_.-]{1,80}\.db")
# The index a restore (or the next start) rebuilds from the notes.
_INDEX = re.compile(r"agents/[^/]+/memory\.db")
_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class Options:
    """What a backup adds to the default set."""

    env: bool = False  # .env, auth.json and the WhatsApp credential databases
    workspaces: bool = False  # agents/<name>/workspace/
    blobs: bool = False  # blobs/ (tool outputs and media)


@dataclass(frozen=True)
class Entry:
    """One file of the home that goes into an archive."""

    name: str  # its name in the archive (POSIX, relative to the home)
    path: Path
    database: bool  # a SQLite database: snapshotted, never copied as it is


def is_database(name: str) -> bool:
    """Whether archive name `name` is one of the SQLite databases a backup snapshots."""
    return bool(
        _TOP_DB.fullmatch(name) or _AGENT_DB.fullmatch(name) or _WHATSAPP_DB.fullmatch(name)
    )


def _side_file(name: str) -> bool:
    return name.endswith(_SIDE_FILES) and ".db" in name


def _skipped(name: str, options: Options) -> bool:
    """Whether a file under FOLDERS stays out of the archive."""
    parts = name.split("/")
    if _INDEX.fullmatch(name) or _side_file(name):
        return True
    return (
        len(parts) > 3
        and parts[0] == "agents"
        and parts[2] == "workspace"
        and (not options.workspaces)
    )


def collect(root: Path, options: Options, *, databases: bool = True) -> list[Entry]:
    """What of home `root` goes into an archive, sorted by name. `databases`: the top
    folder's SQLite files too (False on a PostgreSQL home: they are not its data)."""
    entries: list[Entry] = []
    config = root / "config.yaml"
    if _regular(config):
        entries.append(Entry("config.yaml", config, False))
    if options.env:
        entries.extend(Entry(n, root / n, False) for n in CREDENTIALS if _regular(root / n))
        channels = root / "channels"
        if channels.is_dir() and not channels.is_symlink():
            for path in sorted(channels.iterdir()):
                name = f"channels/{path.name}"
                if _WHATSAPP_DB.fullmatch(name) and _regular(path):
                    entries.append(Entry(name, path, True))
    if databases:
        for path in sorted(root.iterdir()):
            if _TOP_DB.fullmatch(path.name) and _regular(path):
                entries.append(Entry(path.name, path, True))
    for folder in (*FOLDERS, *((BLOBS,) if options.blobs else ())):
        for path in _files(root / folder):
            name = path.relative_to(root).as_posix()
            if not _skipped(name, options):
                entries.append(Entry(name, path, is_database(name)))
    return sorted(entries, key=lambda entry: entry.name)


def _regular(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _files(folder: Path) -> Iterator[Path]:
    """The regular files under `folder`, links neither followed nor listed."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs.sort()
        for file in sorted(files):
            path = Path(top) / file
            if _regular(path):
                yield path


def allowed(name: str) -> bool:
    """Whether a restore may write archive name `name` into a home: relative, no `..`,
    no empty or dot-only part, and one of the kinds of file a backup writes."""
    if not name or name.startswith("/") or "\\" in name or "\x00" in name:
        return False
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).as_posix() != name or any(p in ("", ".", "..") for p in parts):
        return False
    if name in ("config.yaml", PG_DUMP, *CREDENTIALS):
        return True
    if len(parts) == 1:
        return bool(_TOP_DB.fullmatch(name))
    if parts[0] == "channels":
        return bool(_WHATSAPP_DB.fullmatch(name))
    if parts[0] in (*FOLDERS, BLOBS):
        return not _side_file(name) and not _INDEX.fullmatch(name)
    return False
