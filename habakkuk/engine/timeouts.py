"""Bounded waits that never swallow a stop.

On Python 3.11, `asyncio.wait_for` returns the result when the awaited future
completes in the same loop iteration as the waiting task is cancelled, and the
cancellation is lost (python/cpython#86296, fixed in 3.12). For us that meant a
Ctrl+C pressed just after approving a call went nowhere: the approval wait
returned, the command ran to its end and the turn carried on. `wait_within` waits
under `asyncio.timeout`, which re-raises a pending cancellation instead, and
`next_within` does the same for loops that poll (a timeout is a result there,
not an error). The package bans `asyncio.wait_for` (ruff TID251) for these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """Await `awaitable`; TimeoutError after `seconds` (None waits for ever).

    On a timeout the awaitable is cancelled, as with `asyncio.wait_for`; wrap a
    task in `asyncio.shield` to keep it running past the deadline.
    """
    async with asyncio.timeout(seconds):
        return await awaitable


async def next_within(awaitable: Awaitable[Any], timeout: float) -> tuple[bool, Any]:
    """(True, result) when `awaitable` finishes within `timeout`, else (False, None).

    Unlike asyncio.wait_for on Python 3.11, a cancellation of the caller that
    races with the timeout or the result is never swallowed, so loops built on
    this stop when their task is cancelled.
    """
    future = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout)
    finally:
        if not future.done():
            future.cancel()
    if not done:
        return False, None
    return True, future.result()
