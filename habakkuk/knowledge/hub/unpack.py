"""Unpacking a download (or copying a local folder) into a staging folder, safely.

Everything an install brings goes through here before it is hashed or scanned:
- tar (plain, gzip, bzip2, xz) and zip archives, and local folders;
- limits (Limits): the total size, the number of files, one file's size and the path
  depth of what is kept, and for the archive as a whole (parts skipped included) how
  many entries and how many bytes are read through. Sizes are counted as the bytes are
  written, not taken from headers, so an archive that lies about its sizes is stopped at
  the limit and never fills the disk; a header that declares too much is refused before
  anything is read;
- refused, never skipped (the whole unpack fails with UnpackRefused, naming the entry):
  absolute paths, `..`, backslashes, symbolic and hard links, devices and FIFOs, an
  entry that appears twice, zip entries that overlap one another or are encrypted;
- modes: files are written 0600 and folders 0700 whatever the archive says, so no
  executable bit survives (enabling a plugin sets it on the files its manifest runs,
  after the user has seen them: knowledge/plugins/programs.py).

A GitHub tarball holds one top folder (owner-repo-sha/): `strip_top` removes it (and
refuses an archive with more than one). `only` keeps the entries beneath one subpath
(a folder of a repository); entries elsewhere are read through and counted against
the archive's limits but not written, and not judged either, so a symbolic link in an
unrelated part of a repository does not refuse the skill asked for.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import lzma
import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from habakkuk.engine.errors import HabakkukError

CHUNK = 1 << 16
MB = 1 << 20
FILE_MODE = 0o600
DIR_MODE = 0o700
# Skipped when copying a local folder: a checkout's git data is not part of the skill.
SKIPPED_FOLDERS = frozenset({".git"})


class UnpackRefused(HabakkukError):
    """An archive or folder broke a rule or a limit; nothing of it is installed."""


@dataclass(frozen=True)
class Limits:
    """What one install may bring."""

    total_bytes: int = 20 * MB  # everything kept
    files: int = 2_000  # files kept
    file_bytes: int = 10 * MB  # one file
    depth: int = 16  # path components of one entry
    archive_bytes: int = 100 * MB  # read through in the archive (skipped parts included)
    entries: int = 20_000  # entries in the archive (skipped ones included)


@dataclass(frozen=True)
class Unpacked:
    """What an unpack kept."""

    folder: Path  # the folder asked for (dest, or dest/only)
    files: int
    bytes: int


def entry_parts(name: str, where: str) -> tuple[str, ...]:
    """The components of an archive entry's path; UnpackRefused for a path that could
    land outside the folder or that no file system should hold."""
    if not name:
        raise UnpackRefused(f"{where}: an entry has an empty name")
    if "\0" in name or "\\" in name:
        raise UnpackRefused(f"{where}: {name!r}: a backslash or NUL in a path; refused")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnpackRefused(f"{where}: {name!r}: an absolute path; refused")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise UnpackRefused(f"{where}: {name!r}: a path with `..`; refused")
    if any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in parts):
        raise UnpackRefused(f"{where}: {name!r}: a path component longer than 255 bytes")
    return parts


class _Writer:
    """Writes kept files beneath `dest`, counting against the limits as it goes."""

    def __init__(self, dest: Path, limits: Limits, where: str) -> None:
        self.dest = dest
        self.limits = limits
        self.where = where
        self.files = 0
        self.bytes = 0

    def _path(self, parts: tuple[str, ...]) -> Path:
        if len(parts) > self.limits.depth:
            raise UnpackRefused(
                f"{self.where}: {'/'.join(parts)}: deeper than {self.limits.depth} folders"
            )
        return self.dest.joinpath(*parts)

    def folder(self, parts: tuple[str, ...]) -> None:
        path = self._path(parts)
        self._make_parents(path, inclusive=True)

    def _make_parents(self, path: Path, *, inclusive: bool = False) -> None:
        chain = [path] if inclusive else []
        chain.extend(path.parents)
        for folder in reversed([p for p in chain if p.is_relative_to(self.dest)]):
            if folder == self.dest:
                continue
            try:
                os.mkdir(folder, DIR_MODE)
            except FileExistsError:
                if folder.is_symlink() or not folder.is_dir():
                    raise UnpackRefused(
                        f"{self.where}: {folder.relative_to(self.dest)}: "
                        "is both a file and a folder"
                    ) from None

    def declared(self, parts: tuple[str, ...], size: int) -> None:
        """Refuse an entry whose header already says it is too big."""
        name = "/".join(parts)
        if size > self.limits.file_bytes:
            raise UnpackRefused(
                f"{self.where}: {name}: {size} bytes, over the limit of "
                f"{self.limits.file_bytes} for one file"
            )
        if self.bytes + size > self.limits.total_bytes:
            raise UnpackRefused(
                f"{self.where}: over the limit of {self.limits.total_bytes} bytes in all"
            )

    def file(self, parts: tuple[str, ...], source: IO[bytes]) -> None:
        """Copy one entry's content, counting every byte written."""
        name = "/".join(parts)
        if self.files + 1 > self.limits.files:
            raise UnpackRefused(f"{self.where}: more than {self.limits.files} files")
        path = self._path(parts)
        self._make_parents(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, FILE_MODE)
        except FileExistsError:
            raise UnpackRefused(f"{self.where}: {name}: appears twice; refused") from None
        except (IsADirectoryError, NotADirectoryError):
            raise UnpackRefused(f"{self.where}: {name}: is both a file and a folder") from None
        self.files += 1
        written = 0
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = source.read(CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                self.bytes += len(chunk)
                if written > self.limits.file_bytes:
                    raise UnpackRefused(
                        f"{self.where}: {name}: over the limit of {self.limits.file_bytes} "
                        "bytes for one file"
                    )
                if self.bytes > self.limits.total_bytes:
                    raise UnpackRefused(
                        f"{self.where}: over the limit of {self.limits.total_bytes} bytes in all"
                    )
                out.write(chunk)


class _Counted:
    """A read-only stream that refuses to hand out more than `cap` bytes (the
    decompressed size of an archive), reading at most what is left plus one."""

    def __init__(self, inner: IO[bytes] | gzip.GzipFile, cap: int, where: str) -> None:
        self.inner = inner
        self.left = cap
        self.cap = cap
        self.where = where

    def read(self, size: int = -1) -> bytes:
        want = self.left + 1 if size is None or size < 0 else min(size, self.left + 1)
        data = self.inner.read(want)
        self.left -= len(data)
        if self.left < 0:
            raise UnpackRefused(
                f"{self.where}: the archive holds more than {self.cap} bytes; refused "
                "(an archive bomb?)"
            )
        return data


class _Selector:
    """Which entries are kept: the top folder stripped, then beneath `only`."""

    def __init__(self, where: str, strip_top: bool, only: tuple[str, ...]) -> None:
        self.where = where
        self.strip_top = strip_top
        self.only = only
        self.top: str | None = None

    def keep(self, parts: tuple[str, ...]) -> tuple[str, ...] | None:
        """The kept path of an entry, or None when it is outside what was asked for."""
        if self.strip_top:
            if not parts:
                return None
            if self.top is None:
                self.top = parts[0]
            elif parts[0] != self.top:
                raise UnpackRefused(
                    f"{self.where}: more than one top folder ({self.top}, {parts[0]}); "
                    "not a repository tarball"
                )
            parts = parts[1:]
        if not parts or parts[: len(self.only)] != self.only:
            return None
        return parts


def _open_stream(raw: BinaryIO) -> IO[bytes] | gzip.GzipFile:
    head = raw.read(6)
    raw.seek(0)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(raw, mode="rb")
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw, mode="rb")
    return raw


def is_zip(path: Path) -> bool:
    """Whether the file starts like a zip archive."""
    with path.open("rb") as handle:
        return handle.read(4) in (b"PK\x03\x04", b"PK\x05\x06")


def unpack_archive(
    archive: Path,
    dest: Path,
    *,
    limits: Limits | None = None,
    strip_top: bool = False,
    only: str = "",
    where: str | None = None,
) -> Unpacked:
    """Unpack a tar or zip `archive` into the empty or new folder `dest` (see the module
    docstring); UnpackRefused when it breaks a rule or a limit (dest is then left for
    the caller to remove)."""
    limits = limits or Limits()
    label = where or archive.name
    only_parts = entry_parts(only, label) if only.strip("/") else ()
    dest.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    writer = _Writer(dest, limits, label)
    selector = _Selector(label, strip_top, only_parts)
    if is_zip(archive):
        _unpack_zip(archive, writer, selector, limits, label)
    else:
        _unpack_tar(archive, writer, selector, limits, label)
    folder = dest.joinpath(*only_parts)
    if only_parts and not folder.is_dir():
        raise UnpackRefused(f"{label}: no folder {only!r} in the archive")
    return Unpacked(folder, writer.files, writer.bytes)


def _unpack_tar(
    archive: Path, writer: _Writer, selector: _Selector, limits: Limits, label: str
) -> None:
    with archive.open("rb") as raw:
        stream = _Counted(_open_stream(raw), limits.archive_bytes, label)
        try:
            tar = tarfile.open(fileobj=stream, mode="r|")  # type: ignore[call-overload]  # noqa: SIM115 - closed by `with tar` below
        except tarfile.TarError:
            raise UnpackRefused(f"{label}: not a tar or zip archive") from None
        seen = 0
        declared = 0
        try:
            with tar:
                for member in tar:
                    seen += 1
                    declared += max(member.size, 0)
                    if seen > limits.entries:
                        raise UnpackRefused(f"{label}: more than {limits.entries} entries")
                    if declared > limits.archive_bytes:
                        raise UnpackRefused(
                            f"{label}: the archive declares more than {limits.archive_bytes} "
                            "bytes; refused (an archive bomb?)"
                        )
                    parts = selector.keep(entry_parts(member.name, label))
                    if parts is None:
                        continue
                    name = "/".join(parts)
                    if member.issym() or member.islnk():
                        raise UnpackRefused(f"{label}: {name}: a link; refused")
                    if member.isdir():
                        writer.folder(parts)
                    elif member.isreg():
                        writer.declared(parts, member.size)
                        source = tar.extractfile(member)
                        if source is None:  # pragma: no cover - a regular member has data
                            raise UnpackRefused(f"{label}: {name}: cannot be read")
                        writer.file(parts, source)
                    else:
                        raise UnpackRefused(
                            f"{label}: {name}: a device, FIFO or other special file; refused"
                        )
        except (tarfile.TarError, EOFError, OSError, zlib_errors()) as exc:
            if isinstance(exc, UnpackRefused):
                raise
            raise UnpackRefused(f"{label}: a damaged archive ({exc})") from None


def zlib_errors() -> type[Exception]:
    """The decompressors' error for damaged data (zlib's, which gzip raises)."""
    import zlib

    return zlib.error


def _unpack_zip(
    archive: Path, writer: _Writer, selector: _Selector, limits: Limits, label: str
) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UnpackRefused(f"{label}: a damaged zip archive ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.entries:
            raise UnpackRefused(f"{label}: more than {limits.entries} entries")
        _check_zip_layout(infos, archive.stat().st_size, limits, label)
        names: set[str] = set()
        for info in infos:
            if info.filename in names:
                raise UnpackRefused(f"{label}: {info.filename}: appears twice; refused")
            names.add(info.filename)
            parts = selector.keep(entry_parts(info.filename, label))
            if parts is None:
                continue
            name = "/".join(parts)
            kind = stat.S_IFMT(info.external_attr >> 16)
            if kind == stat.S_IFLNK:
                raise UnpackRefused(f"{label}: {name}: a symbolic link; refused")
            if info.is_dir():
                writer.folder(parts)
                continue
            if kind not in (0, stat.S_IFREG):
                raise UnpackRefused(
                    f"{label}: {name}: a device, FIFO or other special file; refused"
                )
            if info.flag_bits & 0x1:
                raise UnpackRefused(f"{label}: {name}: encrypted (password-protected); refused")
            writer.declared(parts, info.file_size)
            try:
                with zf.open(info) as source:
                    writer.file(parts, source)
            except (zipfile.BadZipFile, OSError, EOFError, zlib_errors()) as exc:
                if isinstance(exc, UnpackRefused):
                    raise
                raise UnpackRefused(f"{label}: {name}: damaged ({exc})") from None


def _check_zip_layout(
    infos: list[zipfile.ZipInfo], archive_size: int, limits: Limits, label: str
) -> None:
    """Refuse entries that share bytes (the overlapping-entry bomb) or whose declared
    sizes add up past the archive limit."""
    declared = 0
    for info in infos:
        declared += info.file_size
        if info.compress_size > archive_size:
            raise UnpackRefused(f"{label}: {info.filename}: larger than the archive; damaged")
    if declared > limits.archive_bytes:
        raise UnpackRefused(
            f"{label}: the archive declares more than {limits.archive_bytes} bytes; "
            "refused (an archive bomb?)"
        )
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for current, following in itertools.pairwise(ordered):
        # A local header is at least 30 bytes plus the name; the data follows it.
        end = (
            current.header_offset
            + 30
            + len(current.orig_filename.encode())
            + (current.compress_size)
        )
        if following.header_offset < end:
            raise UnpackRefused(
                f"{label}: {current.filename} and {following.filename} overlap; refused "
                "(an archive bomb?)"
            )


def copy_folder(source: Path, dest: Path, *, limits: Limits | None = None) -> Unpacked:
    """Copy a local folder into the new folder `dest` under the same rules as an archive
    (symbolic links, devices and FIFOs refused; .git skipped; modes 0600/0700)."""
    limits = limits or Limits()
    label = str(source)
    if source.is_symlink():
        raise UnpackRefused(f"{label}: is a symbolic link; give the folder it points to")
    if not source.is_dir():
        raise UnpackRefused(f"{label}: not a folder")
    dest.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    writer = _Writer(dest, limits, label)

    def walk(current: Path, prefix: tuple[str, ...]) -> None:
        with os.scandir(current) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                parts = (*prefix, entry.name)
                if entry.is_symlink():
                    raise UnpackRefused(f"{label}: {'/'.join(parts)}: a symbolic link; refused")
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIPPED_FOLDERS:
                        continue
                    writer.folder(parts)
                    walk(Path(entry.path), parts)
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    if info.st_nlink > 1:
                        raise UnpackRefused(f"{label}: {'/'.join(parts)}: a hard link; refused")
                    writer.declared(parts, info.st_size)
                    with open(entry.path, "rb") as handle:
                        writer.file(parts, handle)
                else:
                    raise UnpackRefused(
                        f"{label}: {'/'.join(parts)}: a device, FIFO or socket; refused"
                    )

    walk(source, ())
    return Unpacked(dest, writer.files, writer.bytes)
