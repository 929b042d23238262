"""The editor turns' pool: `habakkuk acp` runs the turns its editor queued, and no other
process does (their kind is its own, and each is pinned to this process).

A turn runs on the home's turn runner with the editor's registry (editor_tools.py) and in
the editor's folder. One this process did not queue (a turn left by an editor process
that died, taken back by another once its pin fell) or whose session the connection no
longer has open fails at once: no one could see it stream or answer its approvals.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from habakkuk.engine.agent.requests import TurnRequest
from habakkuk.engine.agent.turn import TurnDeps, TurnRunner
from habakkuk.engine.errors import NotFound
from habakkuk.engine.i18n import t
from habakkuk.engine.jobs import (
    Job,
    JobQueue,
    Lease,
    enqueue_in,
    enqueued,
    payload_of,
)
from habakkuk.engine.pools import PermanentJobError, Pool
from habakkuk.engine.sessions import Session, TranscriptStore
from habakkuk.engine.sql import Conn

from .editor_tools import EditorFiles, EditorRegistry
from .kind import ACP_TURN_KIND, ACP_TURNS

TURN_MAX_ATTEMPTS = 3  # as the home's turns (services/turns.py)


class EditorTurns:
    """Queue, run and stop editor turns (session_agent.TurnQueue); start `pool` with the
    runtime's pools and stop it with them."""

    def __init__(
        self,
        queue: JobQueue,
        transcripts: TranscriptStore,
        deps: TurnDeps,
        editor: EditorFiles,
        live: Callable[[str], bool],
        *,
        settled: Callable[[Job], None],
    ):
        self.queue = queue
        self.transcripts = transcripts
        self.live = live
        self.settled = settled
        # No workspace checkpoints: they snapshot the agent's own workspace, which these
        # turns do not work in, and the editor keeps the history of what it changes.
        tools = EditorRegistry(deps.tools, editor)
        self.runner = TurnRunner(replace(deps, tools=tools, checkpoint_for=None))
        # The turns this process queued (an id a prompt): only those have an editor
        # following them here.
        self.mine: set[str] = set()
        self.pool = Pool(
            queue,
            [ACP_TURN_KIND],
            self.run,
            concurrency=max(1, deps.config.workers.turns),
            on_finished=settled,
        )

    async def submit(self, session: str, text: str, workspace: Path) -> str:
        """Queue the editor's message as a turn of `session`, pinned to this process, in
        the transaction that finds the session; its id."""
        turn = f"acp_{secrets.token_hex(8)}"  # a prompt carries no id to derive one from
        request = TurnRequest(session, text, attended=True, workspace=str(workspace))
        node = self.queue.node

        def _queue(conn: Conn, found: Session) -> bool:
            return enqueue_in(
                conn,
                turn,
                ACP_TURN_KIND,
                replace(request, session=found.id),
                serial_key=found.id,  # one turn of a session at a time, whatever its kind
                max_attempts=TURN_MAX_ATTEMPTS,
                agent=found.agent,
                node=node,
            )

        self.mine.add(turn)
        done = await self.transcripts.with_session(session, _queue)
        if done is None:
            self.mine.discard(turn)
            raise NotFound.said("errors.sessions.not_found", session=repr(session))
        enqueued(self.queue, ACP_TURN_KIND)
        return turn

    async def stop(self, turn: str) -> None:
        """Stop the turn: its task at once when it runs here, else in the queue (which
        settles it without a pool, so job.finished is published here)."""
        if self.pool.stop_job(turn):
            return
        if await self.queue.cancel(turn) == "cancelled":
            job = await self.queue.get(turn)
            if job is not None and job.finished:
                self.settled(job)

    async def run(self, lease: Lease) -> dict[str, Any]:
        """The pool's handler: the turn, in its editor's folder with its editor's tools."""
        request = payload_of(lease.job, ACP_TURNS)
        if lease.job.id not in self.mine or not self.live(request.session):
            raise PermanentJobError(t("acp.editor_gone", session=request.session))
        return await self.runner.run(lease, request, completes=True)
