"""WhatsApp's 24-hour customer-service window, per customer, kept where WhatsApp cannot be
asked: `channels/whatsappcloud-<account>.json` under the home (0600, replaced whole).

A free-form message may reach a customer only within 24 hours of their last message; past
that, only an approved template. The window opens (again) with each message the customer
sends, and closes early when the API answers 131047.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from habakkuk.engine.home import write_private_file

WINDOW_SECONDS = 24 * 3600.0
# A newer message moves the window only when it is this much later than the one kept: the
# file is not rewritten for every message of a conversation, and the window we keep ends
# at most this much before WhatsApp's (a template a minute early, never a refused send).
SLACK_SECONDS = 60.0
# Windows opened within this long are written together (a burst of customers is one
# write, not one each); a kill -9 inside it loses only that much of a window's start,
# which errs the safe way (a template where free text could still have gone).
FLUSH_SECONDS = 0.5


@dataclass
class ServiceWindows:
    """The time of each customer's last message (0 for a window closed by the API)."""

    path: Path
    last: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending: asyncio.TimerHandle | None = None

    @classmethod
    def load(cls, path: Path, clock: Callable[[], float] = time.time) -> ServiceWindows:
        """The windows in `path` (none when there is no file yet or it cannot be read)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path, clock=clock)
        found = data.get("windows") if isinstance(data, dict) else None
        last = {
            str(who): float(at)
            for who, at in (found.items() if isinstance(found, dict) else [])
            if isinstance(at, int | float)
        }
        return cls(path, last, clock)

    def is_open(self, customer: str) -> bool:
        """True while a free-form message may reach `customer`."""
        return self.clock() - self.last.get(customer, 0.0) < WINDOW_SECONDS

    def opened(self, customer: str, at: float) -> None:
        """The customer wrote at `at` (a message's own timestamp): the window runs from
        there, never backwards (a redelivered old message keeps the newer time)."""
        if at - self.last.get(customer, 0.0) > SLACK_SECONDS:
            self.last[customer] = at
            if self._pending is None:
                loop = asyncio.get_running_loop()
                self._pending = loop.call_later(FLUSH_SECONDS, self.flush)

    def closed(self, customer: str) -> None:
        """The API said the window is closed (131047)."""
        if self.last.get(customer):
            self.last[customer] = 0.0
            self.flush()

    @property
    def dirty(self) -> bool:
        """True while a window's opening is not yet written."""
        return self._pending is not None

    def flush(self) -> None:
        """Write the windows now (a pending write is done by this one)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._save()

    def _save(self) -> None:
        with self._lock:
            text = json.dumps({"windows": dict(sorted(self.last.items()))}, indent=1)
            write_private_file(self.path, text + "\n")
