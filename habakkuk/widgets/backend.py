"""What the widgets use of the runtime: a narrow Protocol, so widgets/ never name `Runtime`.

A widget reaches the open runtime as the app's `runtime` attribute (None before it opens
and after it closes); `habakkuk.runtime.Runtime` provides it, and the screens' wider
`habakkuk.screens.backend.TerminalBackend` includes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from habakkuk.engine.llm.types import ToolResultBlock
    from habakkuk.engine.toolkit.approvals import Answer


class WidgetSessions(Protocol):
    """What the widgets use of the sessions service (habakkuk.services.sessions)."""

    async def tool_output(self, session_id: str, call_id: str) -> ToolResultBlock | None:
        """The full result of a tool call, or None when none is recorded yet."""
        ...


class WidgetApprovals(Protocol):
    """What the widgets use of the approvals service (habakkuk.services.approvals)."""

    async def respond(self, approval_id: str, answer: Answer, by: str) -> bool:
        """The one answer path: answer a waiting approval wherever it waits."""
        ...


class WidgetBackend(Protocol):
    """The runtime as the widgets see it (a tool card's output, the approval prompt)."""

    @property
    def sessions(self) -> WidgetSessions: ...

    @property
    def approvals(self) -> WidgetApprovals: ...
