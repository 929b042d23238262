"""`habakkuk backup`: a home in one tar.gz, consistent while Habakkuk runs, verified.

Why tar.gz rather than zip: it is what the spec names, one stream written front to back
(a multi-gigabyte transcripts.db is never held whole), the standard library reads and
writes it, and its member types (link, device, fifo) are explicit, so a restore can
refuse everything that is not a regular file.

Each SQLite database is copied with SQLite's online backup API (`Connection.backup`)
from a read-only connection into a private temporary folder: the copy is the
database as one read transaction saw it, whatever the running workers write meanwhile,
and never the live file with a half-applied WAL beside it. Page by page, it is far
cheaper than `VACUUM INTO` on a big home (no index is rebuilt). The other files are
streamed into the archive as they are, each hashed on the way; the manifest
(manifest.json, the last member) lists every file with its size and SHA-256.

The archive is written at 0600 under a temporary name beside the target, read back
through (backup_archive.read_archive: each member hashed against the manifest, each
database extracted and `PRAGMA integrity_check`ed), and only then given its name; a
failed check leaves nothing behind.

On a PostgreSQL home the files are archived, and the database is added as a `pg_dump`
custom-format dump (postgres.dump) when pg_dump is installed; without it the report
says to run pg_dump. The password goes to pg_dump through its environment, never its
command line.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import io
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

from habakkuk.engine.db_url import redact

from .backup_archive import VERSION, BackupError, FileRecord, Manifest, read_archive
from .backup_layout import MANIFEST, PG_DUMP, Entry, Options, collect

# gzip level 1: on a home's databases it is about five times as fast as level 6 for an
# archive about a fifth larger (20,000 messages: 0.27 s and 4.8 MB against 1.9 s and
# 3.9 MB); compression is most of a backup's time (benchmarks/backup_bench.py).
LEVEL = 1


@dataclass(frozen=True)
class PgDump:
    """What became of a PostgreSQL home's database."""

    url: str  # redacted
    dumped: bool  # in the archive as postgres.dump
    reason: str = ""  # why not, when not


@dataclass(frozen=True)
class BackupReport:
    """A written, verified backup."""

    path: Path
    size: int
    manifest: Manifest
    postgres: PgDump | None
    # What config.yaml holds in the clear that looks like a secret (it is in the archive
    # whatever --env says), in words ("an OpenAI key"); "" for nothing.
    config_secret: str = ""


def default_name(now: datetime.datetime | None = None) -> str:
    """habakkuk-backup-YYYYMMDD-HHMMSS.tar.gz (local time)."""
    moment = now or datetime.datetime.now()
    return f"habakkuk-backup-{moment:%Y%m%d-%H%M%S}.tar.gz"


def snapshot(source: Path, target: Path) -> None:
    """Copy SQLite database `source` into the new file `target` with the online backup
    API: one consistent read, writers undisturbed; the copy in rollback-journal mode,
    one file with nothing beside it."""
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    finally:
        src.close()


class _Hashing:
    """A file read through: its SHA-256 and size as tarfile copies it."""

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data


def _add(tar: tarfile.TarFile, name: str, path: Path, database: bool) -> FileRecord:
    """Stream `path` into `tar` as `name`: owner-only permissions, no owner names."""
    with open(path, "rb") as handle:
        info = tar.gettarinfo(fileobj=handle, arcname=name)
        # Owner bits only (a hook script keeps its executable bit); no uid/gid names.
        info.mode = 0o700 if info.mode & 0o100 else 0o600
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        reader = _Hashing(handle)
        tar.addfile(info, reader)
    return FileRecord(name, reader.size, reader.digest.hexdigest(), database)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    """Add `data` to `tar` as the private file `name` (the manifest)."""
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def pg_dump(url: str, target: Path) -> str | None:
    """Dump PostgreSQL database `url` into `target` (custom format); None when done,
    else why not (pg_dump missing or failing), in one line without the password."""
    program = shutil.which("pg_dump")
    if program is None:
        return "pg_dump is not installed"
    parts = urlsplit(url)
    env = dict(os.environ)
    if parts.password:
        env["PGPASSWORD"] = parts.password
    netloc = parts.hostname or ""
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    bare = urlunsplit(parts._replace(netloc=netloc))
    done = subprocess.run(
        [program, "--format=custom", "--no-owner", "--no-privileges", f"--file={target}", bare],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = (done.stderr or "").strip().splitlines()
        return redact(lines[-1] if lines else f"pg_dump exited with {done.returncode}")
    return None


def take_backup(
    root: Path,
    output: Path,
    options: Options,
    *,
    postgres_url: str | None = None,
    on_file: Callable[[str], None] | None = None,
) -> BackupReport:
    """Write and verify the backup of home `root` at `output` (a new file; BackupError
    when it exists or anything fails, and then no file is left). `postgres_url`: the
    home's PostgreSQL database, dumped with pg_dump when it is installed."""
    from habakkuk import __version__

    output = output.expanduser().resolve()
    if output.exists():
        raise BackupError.said("backup.exists", path=output)
    entries = collect(root, options, databases=postgres_url is None)
    partial = output.with_name(f".{output.name}.{os.getpid()}.part")

    def manifest_of(records: list[FileRecord]) -> Manifest:
        return Manifest(
            VERSION,
            __version__,
            datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "postgres" if postgres_url else "sqlite",
            options.env,
            options.workspaces,
            options.blobs,
            tuple(records),
        )

    with tempfile.TemporaryDirectory(prefix="habakkuk-backup-") as scratch_name:
        scratch = Path(scratch_name)
        os.chmod(scratch, 0o700)
        postgres = _dump(postgres_url, scratch) if postgres_url else None
        try:
            manifest = _write(partial, entries, scratch, postgres, manifest_of, on_file)
            _fsync(partial)
            read_archive(partial, scratch)
            os.link(partial, output)  # never over a file that appeared meanwhile
        except FileExistsError:
            raise BackupError.said("backup.exists", path=output) from None
        except OSError as exc:  # no such folder, no permission, a full disk
            reason = exc.strerror or str(exc)
            raise BackupError.said("backup.cannot_write", path=output, reason=reason) from None
        finally:
            partial.unlink(missing_ok=True)
    found = config_secret(root)
    return BackupReport(output, output.stat().st_size, manifest, postgres, found or "")


def config_secret(root: Path) -> str | None:
    """What secret config.yaml holds in the clear (a key pasted into an MCP server's
    env:, a value of .env), in words, or None: the detector memory writes and the logs
    use (engine/secret_scan.py)."""
    from habakkuk.engine.errors import ConfigError
    from habakkuk.engine.home import read_env_file
    from habakkuk.engine.secret_scan import find_secret

    try:
        text = (root / "config.yaml").read_text(encoding="utf-8")
        values = read_env_file(root / ".env")
    except (OSError, UnicodeDecodeError, ConfigError):
        return None
    return find_secret(text, values)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _dump(url: str, scratch: Path) -> PgDump:
    why = pg_dump(url, scratch / PG_DUMP)
    return PgDump(redact(url), why is None, why or "")


def _write(
    partial: Path,
    entries: list[Entry],
    scratch: Path,
    postgres: PgDump | None,
    manifest_of: Callable[[list[FileRecord]], Manifest],
    on_file: Callable[[str], None] | None,
) -> Manifest:
    """Write the archive: every entry, the dump, then the manifest of them all."""
    records: list[FileRecord] = []
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with (
        os.fdopen(fd, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=LEVEL) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for entry in entries:
            if on_file is not None:
                on_file(entry.name)
            try:
                records.append(_member(tar, entry, scratch))
            except FileNotFoundError:
                continue  # removed since it was listed (a note forgotten meanwhile)
            except (OSError, sqlite3.Error) as exc:
                raise BackupError.said("backup.unreadable", name=entry.name, reason=exc) from None
        if postgres is not None and postgres.dumped:
            records.append(_add(tar, PG_DUMP, scratch / PG_DUMP, False))
        manifest = manifest_of(records)
        _add_bytes(tar, MANIFEST, manifest.to_json().encode("utf-8"))
    return manifest


def _member(tar: tarfile.TarFile, entry: Entry, scratch: Path) -> FileRecord:
    if not entry.database:
        return _add(tar, entry.name, entry.path, False)
    copy = scratch / "snapshot.db"
    snapshot(entry.path, copy)
    try:
        return _add(tar, entry.name, copy, True)
    finally:
        copy.unlink()
