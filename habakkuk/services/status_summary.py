"""What `habakkuk status` says beside the readiness parts (spec 000 "Operations", Status):
the version, which processes serve the home and for how long, today's tokens and cost,
and the last errors of the past day (jobs that failed for good and ERROR log records).

Read from the home's stores, so it is the same whether a server answers or not.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.llm.budget import periods_at
from habakkuk.engine.logread import LogFilter
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.services.logs import LogsAccess
from habakkuk.services.usage import UsageLedger

DAY = 86400.0
# The errors shown: the newest first, at most this many of each source.
ERRORS_SHOWN = 5


@dataclass(frozen=True)
class Serving:
    """One process serving the home."""

    host: str
    pid: int
    version: str
    uptime: float  # seconds


@dataclass(frozen=True)
class RecentError:
    """A failed job or an ERROR log record of the past day."""

    at: float  # epoch seconds
    source: str  # "job KIND" or the logger's name
    text: str  # its first line


@dataclass(frozen=True)
class StatusSummary:
    """The summary `habakkuk status` prints before the readiness parts."""

    version: str
    serving: tuple[Serving, ...]
    tokens_today: int
    cost_today: float
    unpriced_today: int
    errors: tuple[RecentError, ...]


def first_line(text: str, width: int = 160) -> str:
    """The first line of `text`, cut to `width` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


async def status_summary(
    *,
    timezone: str,
    nodes: NodeRegistry,
    ledger: UsageLedger,
    queue: JobQueue,
    logs: LogsAccess,
    now: float | None = None,
) -> StatusSummary:
    """Read the summary from the stores (each part best effort: a store that cannot be
    read leaves its part empty; the readiness parts say which store failed)."""
    from habakkuk import __version__

    now = time.time() if now is None else now
    serving: list[Serving] = []
    try:
        for node in await nodes.nodes():
            if not node.stale:
                uptime = max(0.0, node.beat - node.started_at)
                serving.append(Serving(node.host, node.pid, node.version, uptime))
    except Exception:  # no nodes table yet: nothing ever served the home
        serving = []
    try:
        zone = ZoneInfo(timezone)
    except (KeyError, ValueError):
        zone = ZoneInfo("UTC")
    since = periods_at(now, zone).day_start.timestamp()
    totals = await ledger.usage_since(since)
    tokens = sum(
        total.input_tokens
        + total.output_tokens
        + total.cache_read_tokens
        + total.cache_write_tokens
        for total in totals
    )
    errors: list[RecentError] = []
    for job in await queue.recent_failures(ERRORS_SHOWN, errors_only=True):
        if job.updated_at >= now - DAY:
            errors.append(
                RecentError(job.updated_at, f"job {job.kind}", first_line(job.error or ""))
            )
    read = await logs.read(LogFilter(level=logging.ERROR, since=now - DAY), limit=ERRORS_SHOWN)
    errors.extend(
        RecentError(record.time, record.logger, first_line(record.message))
        for record in read.records
    )
    errors.sort(key=lambda error: error.at, reverse=True)
    return StatusSummary(
        version=__version__,
        serving=tuple(serving),
        tokens_today=tokens,
        cost_today=sum(total.cost for total in totals),
        unpriced_today=sum(total.unpriced_calls for total in totals),
        errors=tuple(errors[: ERRORS_SHOWN * 2]),
    )
