"""The home's log as the surfaces read it: habakkuk.log and its rotated copies, filtered.

The terminal's Logs screen reads through this service (never the file itself), as the
other screens read their stores through theirs. The reading is engine/logread.py's, run
off the event loop (a 20 MB file takes a moment to parse).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Protocol

from habakkuk.engine.logread import LogFilter, LogRead, read_log


class LogsAccess(Protocol):
    """What the surfaces use of the home's log."""

    async def read(self, wanted: LogFilter, limit: int = 200) -> LogRead:
        """The last `limit` records passing `wanted`, oldest first, with the count of
        lines that were not records."""
        ...


class HomeLogs:
    """habakkuk.log under the home `root`."""

    def __init__(self, root: Path):
        self.root = root

    async def read(self, wanted: LogFilter, limit: int = 200) -> LogRead:
        return await asyncio.to_thread(read_log, self.root, wanted, limit)
