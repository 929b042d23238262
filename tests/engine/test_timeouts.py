"""wait_within: a bounded wait that keeps a stop that meets the result."""

from __future__ import annotations

import asyncio

import pytest

from habakkuk.engine.timeouts import next_within, wait_within


async def _settle_and_cancel(waiting: asyncio.Future[str]) -> asyncio.Task[str]:
    """Start a waiter, then resolve its future and cancel it in one loop iteration."""
    task = asyncio.create_task(wait_within(asyncio.shield(waiting), 60))
    for _ in range(3):
        await asyncio.sleep(0)  # let the waiter reach its await
    waiting.set_result("answer")
    task.cancel()
    return task


async def test_a_cancel_that_meets_the_result_is_kept() -> None:
    waiting: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = await _settle_and_cancel(waiting)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_result_comes_back_within_the_bound() -> None:
    waiting: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(waiting.set_result, "done")
    assert await wait_within(waiting, 60) == "done"


async def test_a_missed_deadline_raises_timeout_and_cancels_the_awaitable() -> None:
    never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await wait_within(never, 0)
    assert never.cancelled()


async def test_no_bound_waits_for_the_result() -> None:
    assert await wait_within(asyncio.sleep(0, "slept"), None) == "slept"


async def test_next_within_keeps_a_cancel_that_meets_the_result() -> None:
    waiting: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(next_within(asyncio.shield(waiting), 60))
    for _ in range(3):
        await asyncio.sleep(0)
    waiting.set_result("answer")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_next_within_reports_a_timeout_as_not_got() -> None:
    never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    assert await next_within(never, 0) == (False, None)
    assert never.cancelled()
    assert await next_within(asyncio.sleep(0, "now"), 60) == (True, "now")
