"""The narrow provider interface and the error classes every adapter maps onto."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, Protocol, get_args

from .types import ModelRequest, StreamEvent

ErrorClass = Literal[
    "rate_limit",
    "overloaded",
    "auth",
    "billing",
    "context_overflow",
    "bad_request",
    "network",
    "server",
]

ERROR_CLASSES: tuple[ErrorClass, ...] = get_args(ErrorClass)

# Errors worth retrying on the same model (after a pause).
TRANSIENT: frozenset[str] = frozenset({"rate_limit", "overloaded", "network", "server"})
# Errors another model (or another key) may not have: fall back down the chain.
FALLBACK: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "network", "server", "auth", "billing", "context_overflow"}
)


class ProviderError(Exception):
    """A classified failure of one model call."""

    def __init__(
        self,
        error_class: ErrorClass,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str = "",
    ):
        super().__init__(message)
        self.error_class: ErrorClass = error_class
        self.status = status
        self.retry_after = retry_after
        self.provider = provider

    @property
    def transient(self) -> bool:
        return self.error_class in TRANSIENT

    def __str__(self) -> str:
        where = f"{self.provider}: " if self.provider else ""
        return f"{where}{self.error_class}: {self.args[0]}"


class Provider(Protocol):
    """Streams one request to one model; the last event is a StreamDone.

    Adapters do no retries of their own: the router is the single source of
    retry truth. They raise ProviderError, already classified.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield deltas as they arrive, then StreamDone."""
        ...
