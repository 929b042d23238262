"""HOME/auth.json: the logins, written atomically at 0600; refreshes hold auth.json.lock.

The file is one JSON object, a login per key: the subscription logins `chatgpt` and
`copilot` (engine/llm/logins/) and the MCP servers' `mcp:<server>` (protocols/mcp/oauth.py),
one store for both. A writer holds the lock file's flock,
re-reads, changes its own entry and replaces the file (temp file, fsync, rename), so
no process ever reads half a file or loses another's entry. The flock is taken on a
worker thread (`locked`): the event loop never blocks while another process refreshes;
code already on a thread of its own holds it with `held`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from habakkuk.engine.errors import HabakkukError

AUTH_FILE = "auth.json"
LOCK_FILE = "auth.json.lock"


class LoginStore:
    """The logins of one home (HOME/auth.json)."""

    def __init__(self, home_root: Path):
        self.path = home_root / AUTH_FILE
        self.lock_path = home_root / LOCK_FILE

    def read(self) -> dict[str, Any]:
        """Every entry ({} when there is no file yet)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError:
            raise HabakkukError.said("auth.file_invalid", path=self.path) from None
        except OSError as exc:  # a folder in its place, no permission: one line, no traceback
            reason = exc.strerror or type(exc).__name__
            raise HabakkukError.said(
                "cli.config_unreadable", path=self.path, reason=reason
            ) from None
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        """One entry, or None."""
        value = self.read().get(key)
        return dict(value) if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Replace one entry (hold the lock: another process may write too)."""
        data = self.read()
        data[key] = value
        self._write(data)

    def remove(self, key: str) -> bool:
        """Drop one entry; False when there was none."""
        data = self.read()
        if key not in data:
            return False
        del data[key]
        self._write(data)
        return True

    def _write(self, data: dict[str, Any]) -> None:
        """Replace the file: a private temp file, synced, renamed over it."""
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = folder / f".{AUTH_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.chmod(self.path, 0o600)
        with contextlib.suppress(OSError):  # the rename itself, durable
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _acquire(self) -> int:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold auth.json.lock from a thread that may block (a command, a worker thread)."""
        fd = self._acquire()
        try:
            yield
        finally:
            _release(fd)

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        """Hold auth.json.lock (shared by every Habakkuk process), taken off the loop."""
        taking = asyncio.ensure_future(asyncio.to_thread(self._acquire))
        try:
            fd = await asyncio.shield(taking)
        except asyncio.CancelledError:
            # The thread may still get the lock: let it go as soon as it does.
            taking.add_done_callback(_release_late)
            raise
        try:
            yield
        finally:
            _release(fd)


def _release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _release_late(taking: asyncio.Future[int]) -> None:
    """A lock taken after its caller was cancelled: released at once."""
    if not taking.cancelled() and taking.exception() is None:
        _release(taking.result())
