"""What the widgets use of the runtime: a narrow Protocol, so widgets/ never name `Runtime`.

A widget reaches the open runtime as the app's `runtime` attribute (None before it opens
and after it closes); `habakkuk.runtime.Runtime` provides it, and the screens' wider
`habakkuk.screens.backend.TerminalBackend` includes it. The services in it are typed by
their own Protocols, declared once in the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from habakkuk.engine.session_access import SessionsAccess
    from habakkuk.engine.toolkit.waiting import ApprovalsAccess


class WidgetBackend(Protocol):
    """The runtime as the widgets see it (a tool card's output, the approval prompt)."""

    @property
    def sessions(self) -> SessionsAccess: ...

    @property
    def approvals(self) -> ApprovalsAccess: ...
