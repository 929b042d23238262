"""node_invoke from any process of the home: an invocation is a job of its own kind.

A device holds one connection, to the process serving HTTP; a turn may run in another
(`habakkuk run` beside `--serve`, a schedule another process runs). So a call is queued
as a `node_invoke` job pinned to the process that holds the node's connection (nodes.db
records it as the node's `holder`), whose pool sends the invoke frame and completes the
job with the device's answer; the caller awaits the job, within the call's timeout.

The job's id derives from the turn and its tool call: a turn run again after a crash
(the same call of the same turn) finds the job already queued or done and awaits that
one, so the device is not told twice. The kind is at most once: a job whose holder died
mid-call is not sent again. A job freed from a dead holder and claimed where the node is
not connected ends at once with "not connected".
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from habakkuk.engine import payloads
from habakkuk.engine.jobs import JobKind, declare_kind
from habakkuk.engine.payloads import JsonObject

from .wire import FrameError, NodeResult, parse_result_body

if TYPE_CHECKING:
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.sql import Conn

NODE_INVOKE_KIND = "node_invoke"
# What names one invocation: the turn and its tool call's id.
CallId = tuple[str, str]
# The caller's look at its job: quick at first (the holder answers in milliseconds), then
# at most this often.
POLL_FIRST, POLL_MAX = 0.02, 0.25


@dataclass(frozen=True)
class NodeCall:
    """A node_invoke job's payload: the command for the node, and its timeout."""

    node: str
    command: str
    args: Mapping[str, Any]
    timeout: float

    def to_json(self) -> JsonObject:
        """The stored form."""
        return {
            "node": self.node,
            "command": self.command,
            "args": dict(self.args),
            "timeout": self.timeout,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeCall:
        """The call `data` stores; PayloadError naming the field otherwise."""
        node = payloads.text(data, "node", "")
        if not node:
            raise payloads.PayloadError("node", "missing")
        return cls(
            node,
            payloads.text(data, "command"),
            dict(payloads.mapping(data, "args") or {}),
            payloads.number(data, "timeout", 30.0),
        )


NODE_CALLS: JobKind[NodeCall] = declare_kind(
    JobKind(NODE_INVOKE_KIND, at_most_once=True, payload=NodeCall, noun="node invoke")
)


def call_id_for(turn: str, call: str) -> str:
    """The job id of a turn's tool call: the same on every run of that turn."""
    digest = hashlib.sha256(f"node_invoke\0{turn}\0{call}".encode()).hexdigest()[:24]
    return f"nodecall_{digest}"


def result_of(raw: Mapping[str, Any] | None) -> NodeResult:
    """A finished job's result as the device's answer (an error result when unreadable)."""
    try:
        return parse_result_body({"id": "job", "result": dict(raw or {})}).result
    except FrameError as exc:
        return NodeResult(error=f"unreadable result ({exc})")


async def relay(
    queue: JobQueue,
    job_id: str,
    holder: str,
    call: NodeCall,
    *,
    bound: float,
    here: asyncio.Future[NodeResult] | None = None,
) -> NodeResult:
    """Queue `call` pinned to `holder` (unless job `job_id` exists: a rerun's call) and
    await its answer for at most `bound` seconds; a call nobody took by then is cancelled.
    `here`: set by this process's own pool when it holds the node (no wait for the
    job's completion to be written)."""
    from habakkuk.engine.jobs import enqueue_in, enqueued

    def _queue(conn: Conn) -> bool:
        return enqueue_in(
            conn, job_id, NODE_INVOKE_KIND, call, max_attempts=1, node=holder, schema="main"
        )

    if await queue.db.write(_queue):
        enqueued(queue, NODE_INVOKE_KIND)
    deadline = time.monotonic() + bound
    pause = POLL_FIRST
    while True:
        if here is not None and here.done():
            return here.result()
        job = await queue.get(job_id)
        if job is None:
            return NodeResult(error="the call was lost from the queue")
        if job.status == "done":
            return result_of(job.result)
        if job.finished:
            return NodeResult(error=f"the call ended {job.status}: {job.error or 'no answer'}")
        if time.monotonic() >= deadline:
            await queue.cancel(job_id)
            return NodeResult(error=f"node {call.node} did not answer within {bound:g} seconds")
        if here is not None:
            await asyncio.wait({here}, timeout=pause)
        else:
            await asyncio.sleep(pause)
        pause = min(pause * 2, POLL_MAX)
