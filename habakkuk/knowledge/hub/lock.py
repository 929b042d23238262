"""skills/.lock.json and plugins/.lock.json: what was installed, from where, and its state.

One JSON object per file, `{"version": 1, "entries": {NAME: {...}}}`, replaced
atomically. An entry records the source as the user gave it, its kind, the ref asked
for, what it resolved to (a commit, a version, the content hash of a URL), the tree
hash, the scan's verdict and findings, whether the user approved it (and, for a plugin,
enabled it), and when. A file that cannot be read is reported by `read_lock` with its
path and treated as empty, never fatal, so a corrupt lock never hides hand-made skills.

Why it stays a file beside what it describes, on a PostgreSQL home too (issue 29 lists
"skills lock" among the stores; its item 3 keeps agents' folders, skills among them, as
files): every entry is a claim about the bytes in this folder (the tree hash the scan's
verdict and the user's approval were given to; `update` compares a source's tree with it
and looks for the folder), and the folders stay files on each machine. In the
database, one node's install would mark a skill installed and approved on every node,
where the folder is missing or holds other bytes, and a folder copied to another
machine (or restored from a backup) would lose the record of what it is. Beside the
folder, the record and its subject move, are backed up and are shared together: on a
filesystem several nodes share (the README's "Several machines" section), they share
the file too, and `held`'s flock keeps their read-modify-writes apart (NFS v4 locks).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from habakkuk.knowledge.notes import write_atomic

log = logging.getLogger(__name__)

LOCK_FILE = ".lock.json"
GUARD_FILE = ".lock.json.lock"
LOCK_VERSION = 1

SourceKind = Literal["github", "url", "path", "registry"]


@dataclass
class LockEntry:
    """One installed skill or plugin."""

    name: str
    source: str  # as the user gave it (a GitHub URL or owner/repo/path, a URL, a path, a name)
    kind: SourceKind
    ref: str = ""  # the branch, tag or commit asked for ("" = the default branch)
    resolved: str = ""  # the commit (github), the version (registry), the sha256 (url, path)
    tree_hash: str = ""  # "sha256:<hex>" over paths, sizes and contents (hub/treehash.py)
    verdict: str = "clean"  # the scan's Verdict
    findings: list[dict[str, Any]] = field(default_factory=list)  # Finding.as_json()
    approved: bool = False  # `habakkuk skills approve` / `plugins enable`
    enabled: bool = False  # plugins only
    registry: str = ""  # the registry the name came from (kind registry)
    # Where in what the source unpacks to the folder is ("" = its root): a repository or
    # archive holding several skills installs each, and `update` takes the same one again.
    subpath: str = ""
    installed_at: str = ""  # RFC 3339 UTC
    updated_at: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> LockEntry:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["name"] = name
        return cls(**values)


def lock_path(folder: Path) -> Path:
    """The lock file of HOME/skills or HOME/plugins."""
    return folder / LOCK_FILE


def read_lock(folder: Path) -> tuple[dict[str, LockEntry], str | None]:
    """The entries of `folder`'s lock file and a one-line problem (None when fine)."""
    # One reader of the JSON, shared with the engine's merge of enabled plugins.
    from habakkuk.engine.plugin_config import read_lock_file

    raw, problem = read_lock_file(folder)
    return {name: LockEntry.from_json(name, value) for name, value in raw.items()}, problem


def write_lock(folder: Path, entries: dict[str, LockEntry]) -> None:
    """Replace `folder`'s lock file atomically (mode 0600)."""
    data = {
        "version": LOCK_VERSION,
        "entries": {name: entries[name].as_json() for name in sorted(entries)},
    }
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(lock_path(folder), json.dumps(data, indent=2, sort_keys=True) + "\n")


@contextmanager
def held(folder: Path) -> Iterator[None]:
    """Hold `folder`'s lock file for a read-modify-write, across processes (an flock on
    .lock.json.lock), so an install from the CLI and an approval from the running server
    never lose each other's entry."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / GUARD_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock
