"""`habakkuk restore`: a backup archive put back into an empty or missing home.

Nothing of the home changes until the whole archive has passed: it is unpacked into a
private staging folder inside the home (backup_archive.read_archive: only regular files
with the names a backup writes, each hashed against the manifest, each database
integrity-checked), then each file is renamed into place. A database replaces the one
there together with its -wal and -shm, which are removed first: left beside the new
file, SQLite would replay the old database's pages over it.

Refused, in one line, before anything is unpacked: a home that holds a config.yaml
(unless `force`), and a home some process is using. A process serving the home (a
`habakkuk --serve`, the terminal app) has a row in control.db's `nodes` it heartbeats
every few seconds, and a lease holder has a live row in `leases`/`channel_leases`; a row
whose beat is fresh, or whose lease runs, and whose process is alive (on this host; on
another, its time alone says) holds the home.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.hostname import this_host
from habakkuk.engine.leases import process_alive
from habakkuk.engine.nodes import LEASE_TABLES, STALE_SECONDS

from .backup_archive import BackupError, Manifest, private_folders, read_archive
from .backup_layout import PG_DUMP

_SIDE_FILES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class RestoreReport:
    """What a restore put back."""

    home: Path
    manifest: Manifest
    files: int
    databases: int
    pg_dump: Path | None  # the PostgreSQL dump written into the home, to load by hand


def holders(root: Path, *, now: float | None = None) -> list[str]:
    """The processes using home `root` now ("pid 123 on host"), from its control.db;
    [] when there is none (or no control.db)."""
    path = root / "control.db"
    if not path.is_file():
        return []
    at = time.time() if now is None else now
    host = this_host()
    found: list[str] = []
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error:
        return []
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows: list[tuple[str, int]] = []
        if "nodes" in tables:
            rows += conn.execute(
                "SELECT host, pid FROM nodes WHERE server_at >= ?", (at - STALE_SECONDS,)
            ).fetchall()
        for table in LEASE_TABLES:
            if table in tables:
                rows += conn.execute(
                    f"SELECT host, pid FROM {table} WHERE until >= ?", (at,)
                ).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    for row_host, pid in rows:
        if row_host != host or process_alive(int(pid)):
            label = f"pid {pid} on {row_host}"
            if label not in found:
                found.append(label)
    return found


def check_target(root: Path, *, force: bool) -> None:
    """BackupError (one line) when a restore into `root` must not start."""
    if root.exists() and not root.is_dir():
        raise BackupError.said("backup.home_not_folder", home=root)
    held = holders(root)
    if held:
        raise BackupError.said("backup.home_in_use", home=root, holders=", ".join(held))
    if (root / "config.yaml").exists() and not force:
        raise BackupError.said("backup.config_exists", path=root / "config.yaml")


def restore(archive: Path, root: Path, *, force: bool = False) -> RestoreReport:
    """Restore `archive` into home `root` (BackupError, one line, on any refusal)."""
    archive = archive.expanduser()
    if not archive.is_file():
        raise BackupError.said("backup.no_such_archive", path=archive)
    check_target(root, force=force)
    try:
        private_folders(root)
        staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=root))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BackupError.said("backup.cannot_write", path=root, reason=reason) from None
    try:
        with tempfile.TemporaryDirectory(prefix="habakkuk-restore-") as scratch:
            manifest = read_archive(archive, Path(scratch), into=staging)
        check_target(root, force=force)  # again: something may have started meanwhile
        for record in manifest.files:
            try:
                _place(staging / record.name, root / record.name, database=record.database)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                where = root / record.name
                raise BackupError.said("backup.cannot_write", path=where, reason=reason) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    dump = root / PG_DUMP if any(f.name == PG_DUMP for f in manifest.files) else None
    databases = len(manifest.databases)
    return RestoreReport(root, manifest, len(manifest.files) - databases, databases, dump)


def _place(staged: Path, target: Path, *, database: bool) -> None:
    """Move one staged file into the home (its folders 0700), a database without the
    old one's side files."""
    private_folders(target.parent)
    if target.is_symlink() or target.is_dir():
        raise BackupError.said("backup.target_in_way", path=target)
    if database:
        for suffix in _SIDE_FILES:
            Path(f"{target}{suffix}").unlink(missing_ok=True)
    os.replace(staged, target)
