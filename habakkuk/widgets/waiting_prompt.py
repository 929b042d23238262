"""A prompt that shows the oldest of a queue of waiting requests (approvals, questions)."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from textual.content import Content
from textual.widgets import Static


class Waiting(Protocol):
    """A request that waits for an answer: an approval, a question."""

    @property
    def id(self) -> str: ...


R = TypeVar("R", bound=Waiting)


class WaitingPrompt(Static, Generic[R]):
    """Requests wait oldest first; the first one is shown.

    The widget carries the `-waiting` class while anything waits, so its CSS can
    hide it otherwise. Subclasses say how one request looks in `describe`.
    """

    def __init__(self) -> None:
        super().__init__("")
        self.requests: list[R] = []

    @property
    def current(self) -> R | None:
        """The request shown: the oldest waiting."""
        return self.requests[0] if self.requests else None

    def add(self, request: R) -> None:
        """Show a new waiting request (after those already waiting)."""
        if all(r.id != request.id for r in self.requests):
            self.requests.append(request)
        self._redraw()

    def withdraw(self, request_id: str) -> None:
        """Drop a request that was answered elsewhere or withdrawn."""
        self.requests = [r for r in self.requests if r.id != request_id]
        self._redraw()

    def clear(self) -> None:
        """Nothing waits any more (the chat switched sessions)."""
        self.requests = []
        self._redraw()

    def describe(self, request: R) -> Content:
        """The shown request (and what to press), as plain content: never markup."""
        raise NotImplementedError

    def _redraw(self) -> None:
        request = self.current
        self.set_class(request is not None, "-waiting")
        self.update("" if request is None else self.describe(request))
