"""A backup archive read back: every member checked, hashed against the manifest, and
every database opened and integrity-checked.

The same reader serves both ends. After writing, `habakkuk backup` reads its archive
back with `read_archive(path, scratch)` (databases extracted into `scratch` one at a
time, checked, removed); `habakkuk restore` reads it with `into=` a staging folder, so
every file is written there first and nothing of the home is touched until the whole
archive has passed.

A member is refused (BackupError, one line naming it) when it is not a regular file
(a symbolic or hard link, a device, a fifo, a folder), when its name is absolute, holds
`..` or is not one a backup writes (backup_layout.allowed), when it comes twice, or when
the manifest (the last member) does not list exactly the archive's files with their
sizes and SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from habakkuk.engine.errors import HabakkukError

from .backup_layout import MANIFEST, PG_DUMP, allowed, is_database

FORMAT = "habakkuk-backup"
VERSION = 1
CHUNK = 1 << 20


class BackupError(HabakkukError):
    """A backup cannot be written, or an archive cannot be trusted (exit 1)."""


@dataclass(frozen=True)
class FileRecord:
    """One file of an archive, as its manifest lists it."""

    name: str
    size: int
    sha256: str
    database: bool


@dataclass(frozen=True)
class Manifest:
    """What an archive says about itself."""

    version: int
    habakkuk: str
    created: str
    storage: str  # sqlite | postgres
    env: bool
    workspaces: bool
    blobs: bool
    files: tuple[FileRecord, ...]

    def to_json(self) -> str:
        """The manifest file's text."""
        body = {
            "format": FORMAT,
            "version": self.version,
            "habakkuk": self.habakkuk,
            "created": self.created,
            "storage": self.storage,
            "options": {"env": self.env, "workspaces": self.workspaces, "blobs": self.blobs},
            "files": [
                {"name": f.name, "size": f.size, "sha256": f.sha256, "database": f.database}
                for f in self.files
            ],
        }
        return json.dumps(body, indent=1, ensure_ascii=False) + "\n"

    @property
    def databases(self) -> list[FileRecord]:
        """The SQLite databases it holds."""
        return [f for f in self.files if f.database]


def parse_manifest(text: bytes, archive: Path) -> Manifest:
    """The manifest of `archive` from its bytes; BackupError when it is not one."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a Habakkuk manifest")
        version = int(data["version"])
        if version > VERSION:
            raise BackupError.said("backup.newer_format", path=archive, version=version)
        options = data.get("options") or {}
        files = tuple(
            FileRecord(str(f["name"]), int(f["size"]), str(f["sha256"]), bool(f["database"]))
            for f in data["files"]
        )
        return Manifest(
            version,
            str(data.get("habakkuk", "")),
            str(data.get("created", "")),
            str(data.get("storage", "sqlite")),
            bool(options.get("env")),
            bool(options.get("workspaces")),
            bool(options.get("blobs")),
            files,
        )
    except BackupError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise BackupError.said("backup.bad_manifest", path=archive, reason=str(exc)) from None


def integrity(path: Path) -> str:
    """`PRAGMA integrity_check` of the SQLite file `path`: "ok", or what it found."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return str(exc)
    # One line: the first problems found, each on one line (SQLite's may span several).
    lines = [line.strip() for row in rows for line in str(row[0]).splitlines() if line.strip()]
    if lines == ["ok"]:
        return "ok"
    found = "; ".join(line for line in lines[:3] if not line.startswith("***"))
    return found[:300] or "no answer"


def _copy(source: IO[bytes], target: IO[bytes] | None) -> tuple[int, str]:
    """Read `source` to its end (into `target` too, when given): its size and SHA-256."""
    digest = hashlib.sha256()
    size = 0
    while chunk := source.read(CHUNK):
        digest.update(chunk)
        size += len(chunk)
        if target is not None:
            target.write(chunk)
    return size, digest.hexdigest()


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why `member` may not be restored (the end of its catalog key), or None."""
    if member.issym() or member.islnk():
        return "link"
    if member.isdev() or member.isfifo():
        return "device"
    if not member.isreg():
        return "not_regular"
    if not allowed(member.name) and member.name != MANIFEST:
        return "unexpected"
    return None


def _refused(archive: Path, name: str, why: str) -> BackupError:
    """The one-line refusal of member `name` (`why`: backup.member.<why>)."""
    return BackupError.said(f"backup.member.{why}", path=archive, name=name)


def private_folders(folder: Path) -> None:
    """Make `folder` and whichever of its parents are missing, each 0700."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # whatever the umask


def _create(path: Path) -> IO[bytes]:
    """A new private file at `path` (its folders made 0700); never an existing one."""
    private_folders(path.parent)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


def read_archive(archive: Path, scratch: Path, *, into: Path | None = None) -> Manifest:
    """Read `archive` through, check each member, its manifest and each database.

    `into`: write every file there under its archive name (the restore's staging);
    without it only the databases are written, into `scratch`, each removed once
    checked. BackupError (one line) on the first thing that is wrong."""
    seen: dict[str, tuple[int, str]] = {}
    manifest_bytes: bytes | None = None
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                problem = _member_problem(member)
                if problem is not None:
                    raise _refused(archive, member.name, problem)
                if member.name in seen or (member.name == MANIFEST and manifest_bytes):
                    raise _refused(archive, member.name, "twice")
                source = tar.extractfile(member)
                assert source is not None  # a regular file always has content
                if member.name == MANIFEST:
                    manifest_bytes = source.read(16 << 20)
                    continue
                seen[member.name] = _take(member, source, archive, scratch, into)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        raise BackupError.said("backup.not_an_archive", path=archive, reason=str(exc)) from None
    if manifest_bytes is None:
        raise BackupError.said("backup.no_manifest", path=archive)
    manifest = parse_manifest(manifest_bytes, archive)
    _match(manifest, seen, archive)
    return manifest


def _take(
    member: tarfile.TarInfo, source: IO[bytes], archive: Path, scratch: Path, into: Path | None
) -> tuple[int, str]:
    """Hash one member (writing it where it goes); a database is integrity-checked."""
    name = member.name
    database = is_database(name)
    if into is not None:
        target: Path | None = into / name
    elif database:
        target = scratch / "check.db"
    else:
        target = None
    if target is None:
        return _copy(source, None)
    with _create(target) as out:
        found = _copy(source, out)
    if member.mode & 0o100 and into is not None:
        os.chmod(target, 0o700)  # a hook script stays runnable; nothing more than its owner's
    if database:
        verdict = integrity(target)
        if into is None:
            target.unlink()
        if verdict != "ok":
            raise BackupError.said("backup.bad_database", path=archive, name=name, why=verdict)
    return found


def _match(manifest: Manifest, seen: dict[str, tuple[int, str]], archive: Path) -> None:
    """BackupError unless the manifest lists exactly the files read, sizes and hashes."""
    listed = {f.name: f for f in manifest.files}
    for name in sorted(set(listed) ^ set(seen)):
        raise _refused(archive, name, "unlisted" if name in seen else "missing")
    for name, (size, digest) in seen.items():
        record = listed[name]
        if record.size != size or record.sha256 != digest:
            raise _refused(archive, name, "hash")
        if record.database != is_database(name) and name != PG_DUMP:
            raise _refused(archive, name, "not_database")
