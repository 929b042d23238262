"""What a job carries, as a typed value: the codec at the job queue's boundary.

Each kind of job declares the type of its payload where the kind is defined
(`jobs.JobKind.payload`, a frozen dataclass beside its kind: engine.agent.requests's
TurnRequest, work's CardRun, ScheduleSlot and DelegateRun, knowledge's reviews, the
channels' deliveries). A producer hands the queue that value (`JobQueue.enqueue`,
`enqueue_in`, `NewJob`), which stores its `to_json()`; a worker reads it back with
`jobs.payload_of(job, KIND)`, which parses the stored JSON once (`from_json`). Between
the two the payload is JSON in control.db and nobody reads it by key.

Readers are tolerant of what older versions wrote (a field added later has a default; a
field once spelled otherwise is read under both names), and strict about the rest: a
stored payload that does not parse (a hand-edited database, a row from a version that
wrote something else) raises PayloadError naming the field, and the pool fails that job
for good with one line (`jobs.BadPayload`), never a KeyError in a worker. The rows
today's code writes are test fixtures that must still parse (tests/engine/payload_rows.py).

The readers below are the only code that looks inside a stored payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

# A payload as stored: a JSON object (json.loads of the jobs row's payload column).
JsonObject = dict[str, Any]

P_co = TypeVar("P_co", covariant=True)


class PayloadError(ValueError):
    """A stored payload this version cannot read; the message names the field first
    ("session: missing"), and `field` holds it ("" when the whole payload is wrong)."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem

    def inside(self, outer: str) -> PayloadError:
        """The same error for a field of an object stored under `outer` ("spec.task")."""
        return PayloadError(f"{outer}.{self.field}" if self.field else outer, self.problem)


class Payload(Protocol):
    """A job's payload as a value: what the queue stores is its `to_json()`."""

    def to_json(self) -> JsonObject:
        """The stored form (JSON-safe; the format older rows have too)."""
        ...


class PayloadType(Protocol[P_co]):
    """How a kind's stored payload is read back: the payload class itself (a classmethod
    `from_json`), or a codec object for a kind whose payload is one of several classes."""

    def from_json(self, data: Mapping[str, Any]) -> P_co:
        """The value `data` stores; PayloadError naming the field when it is not one."""
        ...


T = TypeVar("T")


def _typed(data: Mapping[str, Any], key: str, kind: type[T], what: str, default: T | None) -> T:
    value = data.get(key)
    if value is None:
        if default is None:
            raise PayloadError(key, "missing")
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise PayloadError(key, f"expected {what}, got {_name(value)}")
    return value


def _name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def text(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    """The string under `key` (`default` when it is missing or null; PayloadError
    when it is missing without a default, or not a string)."""
    return _typed(data, key, str, "a string", default)


def optional_text(data: Mapping[str, Any], key: str) -> str | None:
    """The string under `key`, or None when it is missing or null."""
    return None if data.get(key) is None else text(data, key)


def flag(data: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """The true/false under `key` (`default` when it is missing or null)."""
    return _typed(data, key, bool, "true or false", default)


def integer(data: Mapping[str, Any], key: str, default: int | None = None) -> int:
    """The integer under `key` (not a bool)."""
    return _typed(data, key, int, "an integer", default)


def number(data: Mapping[str, Any], key: str, default: float | None = None) -> float:
    """The number under `key` (an integer or a float, not a bool), as a float."""
    value = data.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return _typed(data, key, float, "a number", default)


def mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The JSON object under `key`, or None when it is missing or null."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise PayloadError(key, f"expected an object, got {_name(value)}")
    return value


def texts(data: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """The list of strings under `key`, or None when it is missing or null."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PayloadError(key, "expected a list of strings")
    return tuple(value)


def objects(data: Mapping[str, Any], key: str) -> tuple[Mapping[str, Any], ...]:
    """The list of JSON objects under `key` (empty when it is missing or null)."""
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise PayloadError(key, "expected a list of objects")
    return tuple(value)


def whole(data: object) -> Mapping[str, Any]:
    """`data` as a JSON object; PayloadError when the stored payload is something else."""
    if not isinstance(data, Mapping):
        raise PayloadError("", f"the payload is {_name(data)}, not an object")
    return data
