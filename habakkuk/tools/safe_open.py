"""Writes that land where the permission check said: resolve and open in one step.

The registry allows a write in workspace mode because its path resolves inside
the workspace. Following the path again to write would let a local process
swap a folder for a symlink in between and send the write elsewhere. So a
confined call (ToolContext.confined) writes like this:

1. resolve the path now and check it again: still inside the workspace, still
   not one of the home's own files (else refuse);
2. open the workspace folder, then each folder below it relative to its
   parent's descriptor with O_NOFOLLOW (creating missing ones with mkdir at
   that descriptor), so a link swapped in after step 1 fails the open instead
   of being followed;
3. write a temp file in the last folder's descriptor and rename it into place
   through the same descriptor.

Calls that were allowed for another reason (full mode, a human's approval of
a path outside the workspace) write through the path as given.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.toolkit.home_files import HomeFile, home_file
from habakkuk.engine.toolkit.registry import ToolContext, ToolError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Confinement:
    """Where a confined call's writes must land: below `root`, on a target `allows`."""

    root: Path
    allows: Callable[[Path], bool]


def confinement(ctx: ToolContext) -> Confinement | None:
    """The confinement of this call's writes (None: the call may write where its path leads)."""
    if not ctx.confined:
        return None

    def allows(target: Path) -> bool:
        return home_file(target, ctx.home, workspace=ctx.workspace, agent=ctx.agent) is None

    return Confinement(Path(os.path.realpath(ctx.workspace)), allows)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    confine: Confinement | None,
    create_mode: int | None = None,
    chmod: int | None = None,
    fsync: bool = False,
) -> None:
    """Replace the file at `path` with `data` via a temp file and a rename.

    Missing parent folders are created. A new file gets `create_mode` (default:
    the old file's mode, else 0o644; the umask applies); `chmod` sets an exact mode.
    """
    dir_fd, leaf = _open_parent(path, confine, create=True)
    try:
        if create_mode is None:
            create_mode = _old_mode(leaf, dir_fd, follow=confine is None)
        tmp = f".{leaf}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, _TMP_FLAGS, create_mode, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if fsync:
                    handle.flush()
                    os.fsync(handle.fileno())
                if chmod is not None:
                    os.fchmod(handle.fileno(), chmod)
            os.replace(tmp, leaf, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def delete(path: Path, *, confine: Confinement | None) -> None:
    """Remove the file at `path` (gone already is fine), through its parent's descriptor."""
    try:
        dir_fd, leaf = _open_parent(path, confine, create=False)
    except FileNotFoundError:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(leaf, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _old_mode(leaf: str, dir_fd: int, *, follow: bool) -> int:
    try:
        old = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=follow)
    except FileNotFoundError:
        return 0o644
    # A confined write never follows a link: the rename replaces the link itself.
    return 0o644 if stat.S_ISLNK(old.st_mode) else stat.S_IMODE(old.st_mode)


def _open_parent(path: Path, confine: Confinement | None, *, create: bool) -> tuple[int, str]:
    """A descriptor of the folder `path`'s file goes in, and the file's name in it."""
    if confine is None:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path.name
    target = Path(os.path.realpath(path))
    try:
        parts = target.relative_to(confine.root).parts
    except ValueError:
        parts = ()
    if not parts or not confine.allows(target):
        raise ToolError(
            f"{path} now leads to {target}, not a file in the workspace (a link changed "
            "after the permission check); nothing was written"
        )
    return open_beneath(confine.root, parts[:-1], create=create, label=str(path)), parts[-1]


def open_beneath(root: Path, parts: Sequence[str], *, create: bool, label: str = "") -> int:
    """A descriptor of folder root/parts[0]/parts[1]/..., opened one part at a time.

    Each part is opened relative to its parent's descriptor with O_NOFOLLOW, so a link
    anywhere below `root` is refused (ToolError), never followed. With `create`,
    missing folders are made at their parent's descriptor.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for depth, name in enumerate(parts, start=1):
        fd = _step(fd, name, create, label or str(root), "/".join(parts[:depth]))
    return fd


def _step(parent: int, name: str, create: bool, label: str, shown: str) -> int:
    """Open folder `name` below descriptor `parent` (closing it), never through a link."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):  # made by a parallel call:
                os.mkdir(name, 0o777, dir_fd=parent)  # the open below still refuses a link
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ToolError(
                f"{label}: {shown} in the workspace is no longer a folder (a link or file took "
                "its place after the permission check); nothing was written"
            ) from None
        raise
    finally:
        os.close(parent)


def check_opened_for_reading(fd: int, path: Path, ctx: ToolContext) -> None:
    """Refuse a file opened for reading that turned out to be a credential file.

    The registry refuses reads of the home's credential files below full mode by
    their resolved path; a link swapped in after that check would be followed by
    the open. So the check is repeated on what was actually opened: the descriptor's
    own path (/proc/self/fd), else the path resolved again, when it is the same file.
    """
    if ctx.mode == "full":
        return
    try:
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        opened = Path(os.path.realpath(path))
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(opened))
        except OSError:
            same = False
        if not same:
            raise ToolError(f"{path} changed while it was opened; nothing was read") from None
    kind = home_file(opened, ctx.home, workspace=ctx.workspace, agent=ctx.agent)
    if kind is HomeFile.CREDENTIAL:
        raise ToolError(
            f"refused: {path} leads to {opened}, one of Habakkuk's credential files; "
            "it may be read only in full mode"
        )
