"""A prompt that shows the oldest of a queue of waiting requests (approvals, questions)."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widgets import Static


class WaitingPrompt(Static):
    """Requests (anything with an `id`) wait oldest first; the first one is shown.

    The widget carries the `-waiting` class while anything waits, so its CSS can
    hide it otherwise. Subclasses say how one request looks in `describe`.
    """

    def __init__(self) -> None:
        super().__init__("")
        self.requests: list[Any] = []

    @property
    def current(self) -> Any | None:
        return self.requests[0] if self.requests else None

    def add(self, request: Any) -> None:
        """Show a new waiting request (after those already waiting)."""
        if all(r.id != request.id for r in self.requests):
            self.requests.append(request)
        self._redraw()

    def withdraw(self, request_id: str) -> None:
        """Drop a request that was answered elsewhere or withdrawn."""
        self.requests = [r for r in self.requests if r.id != request_id]
        self._redraw()

    def clear(self) -> None:
        self.requests = []
        self._redraw()

    def describe(self, request: Any) -> Content:
        """The shown request (and what to press), as plain content: never markup."""
        raise NotImplementedError

    def _redraw(self) -> None:
        request = self.current
        self.set_class(request is not None, "-waiting")
        self.update("" if request is None else self.describe(request))
