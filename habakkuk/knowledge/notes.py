"""The note files of one agent: agents/<name>/memory/<slug>.md, written atomically.

Slugs are the only names a caller can give, and they are checked so that no caller can
reach outside the folder (`../x`, `/etc/passwd`, `.trash`). Dot-files and folders under
memory/ are not notes; forgetting moves a note to memory/.trash/ instead of deleting it.

A note is read up to READ_MAX_BYTES: a file dropped in by hand may be any size, and one
of 21 MB read whole made every search build its snippet over all of it. What is past
the cap is neither indexed nor shown, and the note says so (`NoteText.partial`).
"""

from __future__ import annotations

import codecs
import datetime as dt
import os
import re
import secrets
import unicodedata
from pathlib import Path
from stat import S_ISREG
from typing import NamedTuple

from habakkuk.engine.errors import HabakkukError, NotFound

SLUG_MAX = 80
# Notes written through Habakkuk are at most 64,000 bytes (note_checks.NOTE_MAX_BYTES);
# this cap is for the files people put there, and keeps indexing one note to a few
# milliseconds of the database thread (FTS5 takes 2-5 ms for 128 KB of words, 5-17 ms
# for 256 KB, on a small shared machine).
READ_MAX_BYTES = 128 * 1024
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


def valid_slug(slug: str) -> bool:
    """Whether `slug` names a note file (what a scan lists and a caller may give)."""
    return len(slug) <= 200 and _SLUG.fullmatch(slug) is not None and ".." not in slug


def check_slug(slug: str) -> str:
    """`slug` when it names a note inside the folder; HabakkukError naming it otherwise."""
    if not isinstance(slug, str) or not valid_slug(slug):
        raise HabakkukError(
            f"slug {str(slug)[:80]!r}: not a note name (lower-case letters, digits, "
            "'.', '_' and '-', starting with a letter or digit)"
        )
    return slug


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per call: two writers of one file never share a temporary.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
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


def read_capped(path: Path, limit: int = READ_MAX_BYTES) -> tuple[str, os.stat_result]:
    """The first `limit` bytes of `path` as text (as a text-mode read gives them: invalid
    UTF-8 replaced, newlines made \\n), and the file's stat. A character cut by the cap is
    left out whole. Raises what `open` raises."""
    with path.open("rb") as handle:
        data = handle.read(limit)
        stat = os.fstat(handle.fileno())
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = decoder.decode(data, final=stat.st_size <= limit)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, stat


def partial_size(size: int) -> bool:
    """Whether a note file of `size` bytes is read, indexed and shown only in part."""
    return size > READ_MAX_BYTES


def size_text(size: int) -> str:
    """A file size for a message: "21.3 MB", "256 KB", "900 bytes"."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    if size >= 1024:
        return f"{size // 1024} KB"
    return f"{size} bytes"


def partial_note(slug: str, size: int) -> str:
    """What a note over the cap is, in words (for doctor, the CLI and errors)."""
    return (
        f"memory/{slug}.md is {size_text(size)}: only its first {size_text(READ_MAX_BYTES)} "
        "are indexed and shown"
    )


class NoteText(NamedTuple):
    """A note file as read: its text (up to READ_MAX_BYTES), mtime and size in bytes."""

    text: str
    mtime: float
    size: int

    @property
    def partial(self) -> bool:
        """The file is bigger than the cap: `text` is only its beginning."""
        return partial_size(self.size)


class FileStat(NamedTuple):
    """One note file as the index compares it (a tuple: a scan builds 10,000 of them)."""

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

    def read(self, slug: str) -> NoteText | None:
        """The note's text (up to READ_MAX_BYTES), mtime and size, or None when there is
        no such file."""
        path = self.path(slug)
        if path.is_symlink():
            # A link could lead anywhere: the index skips it, and so does every read.
            return None
        try:
            text, stat = read_capped(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return NoteText(text, stat.st_mtime, stat.st_size)

    def oversized(self) -> list[FileStat]:
        """The note files over the cap (read, indexed and shown only in part)."""
        return [item for item in self.scan() if partial_size(item.size)]

    def require(self, slug: str) -> NoteText:
        found = self.read(slug)
        if found is None:
            raise NotFound.said("errors.memory.no_note", slug=repr(slug))
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

    def stat(self, slug: str) -> FileStat | None:
        """One note file as `scan` would list it, or None."""
        try:
            stat = self.path(slug).lstat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(slug, stat.st_mtime_ns, stat.st_size) if S_ISREG(stat.st_mode) else None

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
                if not valid_slug(slug):
                    continue
                try:
                    # One lstat per file (the directory entry's type needs none on Linux).
                    stat = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not S_ISREG(stat.st_mode):
                    continue
                found.append(FileStat(slug, stat.st_mtime_ns, stat.st_size))
        return found
