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
class Check:
    """One readiness check: a store (`control.db`, ...) or a channel (`channel tg`)."""

    name: str
    ok: bool
    reason: str = ""  # one line, when not ok


@dataclass(frozen=True)
class Readiness:
    """What GET /readyz reports."""

    checks: tuple[Check, ...]
    channels: tuple[ChannelState, ...]  # as recorded in control.db; () when unread
    queue: QueueCounts | None  # read now; None when control.db did not answer

    @property
    def ready(self) -> bool:
        """Every check passed."""
        return all(check.ok for check in self.checks)
