"""Workspace checkpoints: one git store per agent, a snapshot before each turn, and /undo.

Its Protocol, what the surfaces use of it, is engine.session_access.CheckpointsAccess.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from habakkuk.engine.agent.turn import TURN_KIND
from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.i18n import t
from habakkuk.tools.checkpoints import CheckpointError, Checkpoints

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.home import Home
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.sessions import Session

    from .sessions import Sessions


class WorkspaceCheckpoints:
    """The agents' checkpoint stores (off with `checkpoints: false` or without git)."""

    def __init__(self, config: Config, home: Home, queue: JobQueue, sessions: Sessions):
        self.config = config
        self.home = home
        self.queue = queue
        self.sessions = sessions
        self._stores: dict[str, Checkpoints] = {}
        self._git: bool | None = None  # whether git is on PATH (checkpoints need it)

    def for_agent(self, agent: str | None = None) -> Checkpoints | None:
        """The agent's workspace checkpoints; None when off (`checkpoints: false`, no git)."""
        agent_config = self.config.agent(agent)
        if not self.config.checkpoints:
            return None
        if self._git is None:
            # Asked once per runtime: every turn wants to know, and PATH lookups stat files.
            self._git = Checkpoints.available()
        if not self._git:
            return None
        found = self._stores.get(agent_config.name)
        if found is None:
            found = Checkpoints(
                self.home.checkpoints_dir(agent_config.name),
                agent_config.workspace_path,
                max_mb=self.config.checkpoint_max_mb,
            )
            self._stores[agent_config.name] = found
        return found

    def snapshot_for(
        self, agent: Any, session: Session, task: str
    ) -> Callable[[], Awaitable[None]] | None:
        """The turn's `checkpoint_for`: a snapshot of the workspace before it changes it.
        None for an agent with an ssh sandbox: its changes happen on the remote host."""
        if getattr(agent, "sandbox", "none") == "ssh":
            return None
        store = self.for_agent(agent.name)
        if store is None:
            return None

        async def snapshot() -> None:
            await store.snapshot(kind="turn", session=session.id, request=task)

        return snapshot

    async def undo(self, session_id: str) -> str:
        """/undo: restore the workspace to before the session's latest turn that changed it.

        Repeated, it walks further back. Refuses while a turn of the session is queued
        or running. Returns a reply for the user (the diff stat of what changed).
        """
        session = await self.sessions.session(session_id)
        if any(j.kind == TURN_KIND for j in await self.queue.active_for(session_id)):
            raise HabakkukError.said("errors.checkpoints.busy")
        store = self.for_agent(session.agent)
        if store is None:
            return t("checkpoints.off")
        try:
            undone = await store.undo(session_id)
        except CheckpointError as exc:
            raise HabakkukError(str(exc)) from None
        if undone is None:
            return t("checkpoints.nothing")
        checkpoint, stat = undone
        return t("checkpoints.restored", checkpoint=checkpoint.id[:12], stat=stat)
