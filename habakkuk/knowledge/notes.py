"""The note files of one agent: agents/<name>/memory/<slug>.md, written atomically.

Slugs are the only names a caller can give, and they are checked so that no caller can
reach outside the folder (`../x`, `/etc/passwd`, `.trash`). Dot-files and folders under
memory/ are not notes; forgetting moves a note to memory/.trash/ instead of deleting it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.errors import HabakkukError, NotFound

SLUG_MAX = 80
_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]*")


def slugify(title: str) -> str:
    """The slug a title gives: lower-case ASCII words joined by "-", at most 80 chars."""
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > SLUG_MAX:
            if not slug:
                slug = word[:SLUG_MAX]
            break
        slug = candidate
    return slug or "note"


def check_slug(slug: str) -> str:
    """`slug` when it names a note inside the folder; HabakkukError naming it otherwise."""
    if not isinstance(slug, str) or len(slug) > 200 or not _SLUG.fullmatch(slug) or ".." in slug:
        raise HabakkukError(
            f"slug {str(slug)[:80]!r}: not a note name (lower-case letters, digits, "
            "'.', '_' and '-', starting with a letter or digit)"
        )
    return slug


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class FileStat:
    """One note file as the index compares it."""

    slug: str
    mtime_ns: int
    size: int


class NoteFiles:
    """The memory/ folder of one agent."""

    def __init__(self, folder: Path):
        self.folder = folder

    @property
    def trash_dir(self) -> Path:
        return self.folder / ".trash"

    def path(self, slug: str) -> Path:
        """The file of note `slug` (checked)."""
        return self.folder / f"{check_slug(slug)}.md"

    def relative(self, slug: str) -> str:
        """The note's path relative to the agent's folder, as the history records it."""
        return f"memory/{check_slug(slug)}.md"

    def read(self, slug: str) -> tuple[str, float] | None:
        """The note's text and mtime, or None when there is no such file."""
        path = self.path(slug)
        if path.is_symlink():
            # A link could lead anywhere: the index skips it, and so does every read.
            return None
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read()
                mtime = os.fstat(handle.fileno()).st_mtime
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return text, mtime

    def require(self, slug: str) -> tuple[str, float]:
        found = self.read(slug)
        if found is None:
            raise NotFound(f"memory: no note {slug!r}")
        return found

    def write(self, slug: str, text: str) -> os.stat_result:
        """Write note `slug` atomically; its stat afterwards."""
        path = self.path(slug)
        write_atomic(path, text)
        return path.stat()

    def trash(self, slug: str) -> Path:
        """Move note `slug` to .trash/<slug>-<UTC stamp>.md; its new path."""
        source = self.path(slug)
        self.trash_dir.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = self.trash_dir / f"{slug}-{stamp}.md"
        os.replace(source, target)
        return target

    def scan(self) -> list[FileStat]:
        """Every note file: regular *.md files with a valid slug, dot-files skipped."""
        found: list[FileStat] = []
        try:
            entries = os.scandir(self.folder)
        except FileNotFoundError:
            return found
        with entries:
            for entry in entries:
                name = entry.name
                if name.startswith(".") or not name.endswith(".md"):
                    continue
                slug = name[:-3]
                if not _SLUG.fullmatch(slug) or ".." in slug:
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    stat = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                found.append(FileStat(slug, stat.st_mtime_ns, stat.st_size))
        return found
