"""What the work layer's runs use of the runtime, named once: `WorkHost`, the part the
schedule runs (run_wiring.RunHost) and the card runs (board_wiring.BoardHost) share.

The services in it are typed by their own Protocols, each declared once below the work
layer (engine/session_access.py, engine/agent/turn_access.py, engine/outbox_access.py), so
the runs, the dispatcher and the sub-agents name the same ones; the runtime satisfies
them all.
"""

from __future__ import annotations

from typing import Protocol

from habakkuk.engine.agent.turn_access import TurnsAccess
from habakkuk.engine.config import Config
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.llm.budget import BudgetGate
from habakkuk.engine.outbox_access import TextOutbox
from habakkuk.engine.session_access import SessionsAccess


class WorkHost(Protocol):
    """What every run of the work layer uses of the runtime."""

    # Read-only, so the runtime's own service types satisfy them.
    @property
    def config(self) -> Config: ...
    @property
    def home(self) -> Home: ...
    @property
    def queue(self) -> JobQueue: ...
    @property
    def sessions(self) -> SessionsAccess: ...
    @property
    def turns(self) -> TurnsAccess: ...
    @property
    def outbox(self) -> TextOutbox: ...
    @property
    def budget(self) -> BudgetGate: ...  # schedules and cards wait while a limit is used up
