"""Which files of one folder changed since we last asked: Linux inotify, read on demand.

The index must see a hand edit on the very next search, and stat-ing 10,000 notes before
every search costs 25-80 ms on a small machine. The kernel queues an inotify event the
moment a write, rename or delete happens, so draining that queue (non-blocking) just
before a search names exactly the files to look at, with no latency and no background
task. Anything uncertain (no inotify on this platform, the queue overflowed, the folder
itself was moved or deleted, too many watches) answers None: "scan everything", which
is always correct.

watchfiles debounces in a background thread (an edit shows up ~50 ms later, and a search
in between would miss it), so it does not fit here; inotify through ctypes is a few
system calls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import struct
import sys
import threading
from pathlib import Path

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

WATCHED = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
# Files whose writer is done with them (closed, renamed in, created, deleted, touched):
# what a watcher that wakes on each event wants, so that neither a half-written file nor
# every commit to a database in the folder wakes it.
SETTLED = WATCHED & ~IN_MODIFY
# The folder itself is gone or the kernel dropped events: only a full scan is sure.
LOST = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then `len` bytes of name


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, found once per process.

    The process's own symbols come first (dlopen(NULL): Python links libc, so no search):
    `ctypes.util.find_library` runs `ldconfig -p` in a subprocess, and each agent's memory
    opened a watch on the event loop, so every first turn of an agent waited for a fork
    and exec (6-12 ms warm, more on a cold disk).
    """
    if not sys.platform.startswith("linux"):
        return None
    for name in (None, "libc.so.6"):
        try:
            libc = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if hasattr(libc, "inotify_init1"):
            return libc
    try:  # an unusual layout: ask the loader's cache, as before
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    return libc if hasattr(libc, "inotify_init1") else None


class FolderWatch:
    """The names changed in one folder since the last `changed()` (not recursive)."""

    def __init__(self, folder: Path, mask: int = WATCHED):
        """`mask`: the events to watch (every change by default; a folder of databases
        is better watched without IN_MODIFY, which every commit to them raises)."""
        self.folder = folder
        self._mask = mask
        self._fd = -1
        self._libc = _libc()
        self._open()

    def _open(self) -> None:
        """Start watching; on any failure the watch stays closed (every answer: None)."""
        self.close()
        if self._libc is None:
            return
        fd = int(self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
        if fd < 0:
            return  # EMFILE: too many inotify instances for this user
        mask = self._mask | IN_ONLYDIR
        wd = int(self._libc.inotify_add_watch(fd, os.fsencode(self.folder), mask))
        if wd < 0:
            os.close(fd)  # ENOSPC (max_user_watches), ENOENT, ENOTDIR
            return
        self._fd = fd

    @property
    def active(self) -> bool:
        """Whether the kernel is watching the folder for us."""
        return self._fd >= 0

    def fileno(self) -> int:
        """The inotify descriptor, readable when events wait (-1 while not watching); a
        `changed()` that answers None may open a new one."""
        return self._fd

    def changed(self) -> set[str] | None:
        """The file names touched since the last call, or None when only a full scan is
        sure (then the watch restarts, so the scan that follows is the new baseline)."""
        if self._fd < 0:
            self._open()
            return None
        names: set[str] = set()
        lost = False
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                break
            except OSError:
                lost = True
                break
            if not data:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                raw = data[offset : offset + length].split(b"\0", 1)[0]
                offset += length
                if mask & LOST:
                    lost = True
                elif raw:
                    names.add(os.fsdecode(raw))
        if lost:
            self._open()
            return None
        return names

    def close(self) -> None:
        """Stop watching (idempotent). The descriptor is closed on a thread of its own,
        which nobody waits for: the kernel holds the thread that closes an inotify
        descriptor for a grace period (10-20 ms), and a one-shot `habakkuk run` spent
        that at its very end, with nothing else to do, for each agent's memory."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            threading.Thread(target=os.close, args=(fd,), name="unwatch", daemon=True).start()
