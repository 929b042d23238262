"""What the terminal's screens use of the runtime: a narrow Protocol, `TerminalBackend`.

Screens type the open runtime by it, never by `habakkuk.runtime.Runtime` (which provides
it: habakkuk/app.py has mypy check that). It composes the services' own Protocols, each
declared once beside its service (or in the engine, where the layers below the services
use it too): the chat commands' `Services` (sessions, turns, settings, checkpoints, usage,
memory, skills) and the widgets' `WidgetBackend` are part of it because the chat screen
runs the commands and hosts the widgets. A new section's service joins here as one more
property.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from habakkuk.conversation.commands import Services
from habakkuk.engine.toolkit.waiting import ApprovalsAccess
from habakkuk.tools.clarify import QuestionsAccess
from habakkuk.widgets.backend import WidgetBackend

if TYPE_CHECKING:
    from habakkuk.engine.goals import GoalsAccess
    from habakkuk.services.logs import LogsAccess
    from habakkuk.services.overview import ControlAccess
    from habakkuk.services.voice import VoiceAccess
    from habakkuk.work.board_types import BoardAccess
    from habakkuk.work.schedule_types import SchedulesAccess


class TerminalApprovals(ApprovalsAccess, QuestionsAccess, Protocol):
    """The approvals service as the screens use it: approvals and the agents' clarify
    questions (habakkuk.services.approvals.Approvals holds both)."""


class TerminalBackend(Services, WidgetBackend, Protocol):
    """The open runtime as the terminal's screens see it."""

    @property
    def approvals(self) -> TerminalApprovals: ...

    @property
    def control(self) -> ControlAccess:
        """The control room (the Overview screen)."""
        ...

    @property
    def schedules(self) -> SchedulesAccess:
        """The home's schedules (the Schedules screen)."""
        ...

    @property
    def board(self) -> BoardAccess:
        """The home's board (the Board screen)."""
        ...

    @property
    def goals(self) -> GoalsAccess:
        """The sessions' standing goals (the chat's status line and notes)."""
        ...

    @property
    def logs(self) -> LogsAccess:
        """The home's habakkuk.log (the Logs screen)."""
        ...

    @property
    def voice(self) -> VoiceAccess:
        """The microphone and speech to text (the chat's push-to-talk key)."""
        ...

    # `memory` (the Memory screen's MemoryAccess) comes with the commands' Services.
