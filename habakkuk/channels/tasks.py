"""Cancelling child tasks without swallowing our own cancellation.

`with suppress(CancelledError): await child` after `child.cancel()` also
swallows a cancellation aimed at the *current* task if it arrives during the
wait; the current task then carries on as if nothing happened (and a
supervisor never stops). These helpers tell the two apart with
`Task.cancelling()`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


def raise_if_cancelling() -> None:
    """Re-raise a cancellation of the current task that something swallowed."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` and wait until it has ended; its own errors are logged, not raised."""
    if task is None:
        return
    if task.done():  # its outcome was already read (or is not ours to report)
        if not task.cancelled():
            task.exception()
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        raise_if_cancelling()
    except Exception:
        log.exception("task %s failed while stopping", task.get_name())
