"""The tree hash of a skill or plugin folder: what a registry entry pins and the lock records.

"sha256:" + the hex SHA-256 of one line per regular file, sorted by path:
`<path>\\0<size>\\0<sha256 of the content, hex>\\n`, the path relative to the folder with
"/" between parts (UTF-8). Folders count only through the files in them, modes and
times not at all, so the same files give the same hash wherever and whenever they were
unpacked. A symbolic link (never unpacked, see unpack.py) is refused rather than followed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.errors import HabakkukError

PREFIX = "sha256:"
CHUNK = 1 << 16


@dataclass(frozen=True)
class TreeEntry:
    """One file of a tree: its relative path, size and content hash (hex)."""

    path: str
    size: int
    sha256: str


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of one file's content."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_entries(folder: Path) -> list[TreeEntry]:
    """Every regular file beneath `folder`, sorted by path."""
    found: list[TreeEntry] = []

    def walk(current: Path, prefix: str) -> None:
        with os.scandir(current) as entries:
            for entry in entries:
                rel = f"{prefix}{entry.name}"
                if entry.is_symlink():
                    raise HabakkukError(f"{entry.path}: is a symbolic link; not hashed")
                if entry.is_dir(follow_symlinks=False):
                    walk(Path(entry.path), rel + "/")
                elif entry.is_file(follow_symlinks=False):
                    size = entry.stat(follow_symlinks=False).st_size
                    found.append(TreeEntry(rel, size, file_sha256(Path(entry.path))))
                else:
                    raise HabakkukError(f"{entry.path}: is not a regular file or folder")

    walk(folder, "")
    found.sort(key=lambda e: e.path)
    return found


def hash_entries(entries: list[TreeEntry]) -> str:
    """The tree hash of entries already listed (sorted here, so any order gives one hash)."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        digest.update(f"{entry.path}\0{entry.size}\0{entry.sha256}\n".encode())
    return PREFIX + digest.hexdigest()


def tree_hash(folder: Path) -> str:
    """ "sha256:<hex>" over the folder's sorted (path, size, content hash) entries."""
    return hash_entries(tree_entries(folder))


def same_hash(a: str, b: str) -> bool:
    """Whether two tree hashes are equal, ignoring case and the optional "sha256:" prefix."""
    return _bare(a) == _bare(b)


def _bare(value: str) -> str:
    value = value.strip().lower()
    return value[len(PREFIX) :] if value.startswith(PREFIX) else value
