"""Telling a session that a background process it started with `notify: true` ended.

The exec tool's process manager calls `started` when a turn starts such a process and
`exited` when it ends; the notice is a new turn of the session, replying where the
starting turn replied, with an id derived from the process so it is queued once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from habakkuk.engine.agent.requests import turn_request
from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.jobs import JobQueue
from habakkuk.tools.processes import ProcessInfo, format_exit_notice

log = logging.getLogger(__name__)


class ProcessNotices:
    """The exit notices of `notify: true` background processes."""

    def __init__(self, queue: JobQueue, turns: Callable[[], TurnsAccess]) -> None:
        self.queue = queue
        self.turns = turns  # built after the process manager, hence read when needed
        self._turn_of: dict[str, str] = {}  # process id -> the turn that started it

    def started(self, info: ProcessInfo, turn: str) -> None:
        """Remember which turn started `info`, when it wants its exit told."""
        if info.notify:
            self._turn_of[info.id] = turn

    async def exited(self, info: ProcessInfo) -> None:
        """A notify: true background process ended: tell its session in a new turn."""
        try:
            started = self._turn_of.pop(info.id, None)
            job = await self.queue.get(started) if started else None
            request = turn_request(job) if job is not None else None
            await self.turns().submit(
                info.session,
                format_exit_notice(info),
                turn_id=f"turn_{info.id}",
                reply_to=request.reply_to if request is not None else None,
            )
        except Exception as exc:  # the session may be gone; the notice is best effort
            log.warning("cannot deliver the exit notice of %s: %s", info.id, exc)
