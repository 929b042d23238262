"""The memory review's job kinds, declared apart from their handler (knowledge/review.py)
so a process that never runs a review (`habakkuk run`) still has them in the queue's kind
registry without importing the review's planner, prompts and store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from habakkuk.engine import payloads
from habakkuk.engine.jobs import JobKind, declare_kind

if TYPE_CHECKING:
    from habakkuk.engine.payloads import JsonObject

__all__ = ["NIGHTLIES", "NIGHTLY_KIND", "REVIEWS", "REVIEW_KIND", "MemoryReview", "NightlyReview"]

REVIEW_KIND = "memory_review"
NIGHTLY_KIND = "memory_nightly"


@dataclass(frozen=True)
class MemoryReview:
    """A memory_review job's payload: review `session` of `agent` up to its first
    `length` messages (the reviewed position it moves to)."""

    agent: str
    session: str
    length: int

    def to_json(self) -> JsonObject:
        return {"agent": self.agent, "session": self.session, "length": self.length}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryReview:
        return cls(
            payloads.text(data, "agent"),
            payloads.text(data, "session"),
            payloads.integer(data, "length"),
        )


@dataclass(frozen=True)
class NightlyReview:
    """A memory_nightly job's payload: the agent whose notes the nightly pass tends."""

    agent: str

    def to_json(self) -> JsonObject:
        return {"agent": self.agent}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NightlyReview:
        return cls(payloads.text(data, "agent"))


REVIEWS: JobKind[MemoryReview] = declare_kind(
    JobKind(REVIEW_KIND, payload=MemoryReview, noun="memory review")
)
NIGHTLIES: JobKind[NightlyReview] = declare_kind(
    JobKind(NIGHTLY_KIND, payload=NightlyReview, noun="nightly review")
)
