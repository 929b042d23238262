"""What /healthz and /readyz report, as typed values (habakkuk.server.health and
habakkuk.server.readiness build them; the JSON is their `asdict`)."""

from __future__ import annotations

from dataclasses import dataclass

from habakkuk.engine.overview import ChannelState


@dataclass(frozen=True)
class QueueCounts:
    """Jobs queued and running, every kind and every process of the home."""

    pending: int
    running: int

    @classmethod
    def of(cls, depth: dict[tuple[str, str], int]) -> QueueCounts:
        """The totals of a depth by (kind, status)."""
        pending = sum(n for (_, status), n in depth.items() if status == "queued")
        running = sum(n for (_, status), n in depth.items() if status == "running")
        return cls(pending, running)


@dataclass(frozen=True)
class QueueHealth:
    """The last queue depth read, and how long ago (None before the first read)."""

    pending: int | None
    running: int | None
    age_seconds: float | None


@dataclass(frozen=True)
class Health:
    """What GET /healthz reports."""

    status: str
    channels: tuple[ChannelState, ...]
    queue: QueueHealth


@dataclass(frozen=True)
class Part:
    """One part of readiness: a store, the listener, a channel account, an MCP server or
    a worker pool of this process, with its own state.

    Only states, names and fixed reasons: never an error's text (that goes to the log),
    since /readyz answers without a token."""

    kind: str  # store | listener | channel | mcp | pool
    name: str  # control.db | http | the account | the server | the pool's kinds
    ok: bool
    state: str  # what it is now (connected, up, answers, serving, backoff, ...)
    since: str | None  # RFC 3339: when it entered this state (None: unknown)
    reason: str = ""  # why not ready, one line; "" when ok
    served_by: str = ""  # channels: "here", or the lease holder ("pid 42 on host")


@dataclass(frozen=True)
class Readiness:
    """What GET /readyz reports (and `habakkuk status` prints)."""

    parts: tuple[Part, ...]
    queue: QueueCounts | None  # read now; None when control.db did not answer

    @property
    def ready(self) -> bool:
        """Every part is up."""
        return all(part.ok for part in self.parts)
