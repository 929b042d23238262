"""The meeting job's kind: one job per attendance, run only by the serving process in a
pool of its own (the attendance holds a browser for up to hours, so it must never take
a chat turn's worker, and only `habakkuk serve` stays up long enough)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from habakkuk.engine import payloads
from habakkuk.engine.jobs import JobKind, declare_kind

MEETING_KIND = "meeting"
MEETING_WORKERS = 3  # at most three calls attended at once


@dataclass(frozen=True)
class MeetingRun:
    """A meeting job's payload: the meeting it attends (its record holds the rest)."""

    meeting: str

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"meeting": self.meeting}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MeetingRun:
        """The payload `data` stores."""
        return cls(payloads.text(data, "meeting"))


MEETINGS: JobKind[MeetingRun] = declare_kind(
    JobKind(MEETING_KIND, payload=MeetingRun, noun="meeting")
)


def job_id_of(meeting_id: str) -> str:
    """The attendance job of a meeting (one per meeting)."""
    return f"meeting:{meeting_id}"


def delivery_id_of(meeting_id: str) -> str:
    """The delivery job of a meeting's notes (so they are sent once)."""
    return f"meeting-notes:{meeting_id}"
