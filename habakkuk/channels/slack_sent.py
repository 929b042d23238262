"""Slack sends that survive a crash: each chunk of a delivery carries its key, and a chunk
a crash may have posted is looked for before it is posted again.

Slack has no idempotency key on chat.postMessage, but it keeps message metadata (an
`event_type` and an `event_payload` of our own) and returns it from
conversations.history and conversations.replies with `include_all_metadata`. So every
chunk a delivery posts carries `{"delivery": <job id>, "chunk": <index>}`, and a chunk
whose earlier send started and left no record (deliveries.Sending.attempted) is first
looked for in the messages posted since that start (less a margin for the clocks): found,
its ts is the chunk's; else it is posted.
"""

from __future__ import annotations

import logging
from typing import Any

from .slack_api import SlackRefused, WebApi

log = logging.getLogger(__name__)

EVENT_TYPE = "habakkuk_delivery"
# Slack stamps a message with its own clock, the attempt was noted with ours.
CLOCK_MARGIN_SECONDS = 300.0
PAGE = 200  # messages per history page (Slack's maximum is 999)
MAX_PAGES = 25  # a chat busier than this since the attempt is not searched further


def delivery_metadata(job: str, chunk: int) -> dict[str, Any]:
    """chat.postMessage's `metadata` naming a delivery's chunk."""
    return {"event_type": EVENT_TYPE, "event_payload": {"delivery": job, "chunk": chunk}}


def _is_chunk(message: object, job: str, chunk: int) -> bool:
    if not isinstance(message, dict):
        return False
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != EVENT_TYPE:
        return False
    payload = metadata.get("event_payload")
    return (
        isinstance(payload, dict)
        and payload.get("delivery") == job
        and payload.get("chunk") == chunk
    )


async def posted_chunk(
    api: WebApi, target: dict[str, Any], job: str, chunk: int, *, since: float
) -> str:
    """The ts of the message carrying chunk `chunk` of delivery `job` that was posted to
    `target` (chat.postMessage's channel and thread_ts) after `since` less the clocks'
    margin; "" when there is none, or when Slack will not let us read the chat (a missing
    history scope: then the chunk is posted again, as on a platform that cannot look)."""
    params: dict[str, Any] = {
        "channel": target["channel"],
        "oldest": f"{max(0.0, since - CLOCK_MARGIN_SECONDS):.6f}",
        "include_all_metadata": True,
        "limit": PAGE,
    }
    method = "conversations.history"
    if "thread_ts" in target:  # our replies in a thread are not in the channel's history
        method = "conversations.replies"
        params["ts"] = target["thread_ts"]
    for _ in range(MAX_PAGES):
        try:
            found = await api.call(method, params)
        except SlackRefused as exc:
            log.warning("slack: cannot look for a chunk a crash may have sent: %s", exc)
            return ""
        for message in found.get("messages") or []:
            if _is_chunk(message, job, chunk):
                return str(message.get("ts", ""))
        cursor = (found.get("response_metadata") or {}).get("next_cursor", "")
        if not found.get("has_more") or not cursor:
            return ""
        params["cursor"] = cursor
    log.warning("slack: stopped looking for chunk %d of %s after %d pages", chunk, job, MAX_PAGES)
    return ""
