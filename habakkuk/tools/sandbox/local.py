"""sandbox: none: commands run here, with bash, each in its own process group."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .base import Launch, Sandbox, SandboxError, shell_argv


class LocalSandbox(Sandbox):
    """Runs commands on this machine; the local process group is the whole tree."""

    kind = "none"
    remote = False

    async def launch(self, command: str, cwd: Path, *, token: str, foreground: bool) -> Launch:
        """bash -c COMMAND in `cwd`, which must be a folder here."""
        if not await asyncio.to_thread(cwd.is_dir):
            raise SandboxError(f"cwd {cwd} is not a folder")
        return Launch(tuple(shell_argv(command)), cwd, token)

    async def kill(self, token: str, signal_name: str = "KILL") -> None:
        """Nothing runs elsewhere: the caller kills the local process group."""
