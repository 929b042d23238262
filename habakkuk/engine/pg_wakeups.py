"""Wake-ups across nodes on PostgreSQL: LISTEN on a connection of its own, in a thread.

An enqueue on PostgreSQL notifies a channel inside its transaction (delivered at
commit, `jobs.WAKE_CHANNEL`); every node's queue listens on it, so an idle pool on
another machine claims the job at once instead of at its next poll. Notifications are
a hint, not the record: one sent while the connection was down is lost, and the pools'
polling still finds the job. Imported only when the storage is PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql as pgsql

from .db_url import redact

log = logging.getLogger(__name__)

# How long one wait for notifications lasts: the longest a stop waits for the thread.
WAIT_SECONDS = 0.2
# The pause before connecting again after the server dropped the connection.
RECONNECT_SECONDS = 1.0


class Wakeups:
    """LISTENs to `channel` on `url`; each notification's payload is handed to
    `on_payload` on `loop`'s thread."""

    def __init__(
        self,
        url: str,
        channel: str,
        on_payload: Callable[[str], None],
        loop: asyncio.AbstractEventLoop,
    ):
        self.url = url
        self.channel = channel
        self.on_payload = on_payload
        self.loop = loop
        self._stop = threading.Event()
        # Set once the first LISTEN is in place (tests wait for it: a notification sent
        # before it would not be heard).
        self.ready = threading.Event()
        self._thread = threading.Thread(
            target=self._listen, name=f"pg-listen-{channel}", daemon=True
        )

    def start(self) -> None:
        """Start listening, in the background."""
        self._thread.start()

    async def stop(self) -> None:
        """Stop listening; returns once the connection is closed."""
        self._stop.set()
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(self.channel)))
                    self.ready.set()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=WAIT_SECONDS):
                            self._hand_over(note.payload)
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                log.warning(
                    "%s: not hearing other nodes' jobs (%s); polling meanwhile",
                    redact(self.url),
                    line,
                )
                self._stop.wait(RECONNECT_SECONDS)

    def _hand_over(self, payload: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody to wake
            self.loop.call_soon_threadsafe(self.on_payload, str(payload))
