"""Turns: queue them (and compactions), stop them, wait for them, and read the queue.

Its Protocol, what the surfaces use of it, is engine.agent.turn_access.TurnsAccess.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.channels.delivery_types import DELIVERY_PREFIX, UNSENT_PREFIX
from habakkuk.engine.agent.requests import TURN_KIND, ReplyTo, TurnRequest
from habakkuk.engine.agent.turn_access import FilesTurn, SentFile, TurnOutcome, outcome_of
from habakkuk.engine.errors import NotFound
from habakkuk.engine.events import JobFinished
from habakkuk.engine.jobs import enqueued
from habakkuk.engine.timeouts import wait_within

from .sessions import Sessions, new_id

if TYPE_CHECKING:
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.jobs import Job, JobQueue
    from habakkuk.engine.llm.types import Block
    from habakkuk.engine.pools import Pool, PoolState
    from habakkuk.engine.sessions import Session
    from habakkuk.engine.sql import Conn

TURN_MAX_ATTEMPTS = 3


class Turns:
    """The turn queue of the home (control.db) and this process's pools running it."""

    def __init__(
        self,
        queue: JobQueue,
        bus: EventBus,
        sessions: Sessions,
        pools: Callable[[], list[Pool]],
        turn_pool: Callable[[], Pool | None],
    ):
        self.queue = queue
        self.bus = bus
        self.sessions = sessions
        self._pools = pools
        self._turn_pool = turn_pool
        # Told of a queued turn stopped here, which no pool settles (the goals' step).
        self.cancelled: Callable[[Job], None] | None = None

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        reply_to: ReplyTo | None = None,
        blocks: Sequence[Block] = (),
        here: bool = False,
    ) -> str:
        """Queue a turn for `text` in the session; returns the turn id.

        With a `turn_id` derived from what caused the message, a redelivery is a
        no-op (the existing turn's id is returned). `reply_to`: the chat its reply goes
        to (a channel's, a webhook's, a schedule's); `blocks`: the attachments a channel
        message carried (images, PDFs, stored as blobs). `here`: only this process runs
        it while it lives (the terminal's chat streams it and answers its approvals,
        which no other node could); a crash frees it for any node (engine/jobs.py PIN_DDL).
        """
        turn = turn_id or new_id("turn")
        request = TurnRequest(
            session_id, text, attended=attended, reply_to=reply_to, blocks=tuple(blocks)
        )
        await self._queue(turn, request, node=self.queue.node if here else "")
        return turn

    async def submit_files(
        self,
        session_id: str,
        text: str,
        paths: Sequence[str],
        *,
        attended: bool = False,
        here: bool = False,
    ) -> FilesTurn:
        """Queue a turn for `text` with the files at `paths` (on this machine) attached.

        Each file is copied to the agent's workspace/inbox/ and what the model gets of it
        is the channels' attachments rule (images and PDFs as blocks, other documents as
        their text), as for a chat's or the web chat's upload. A file over the size cap,
        or one that cannot be read, gets a note in the message instead.
        """
        from habakkuk.channels.attachments import MAX_ATTACHMENT_BYTES, TOO_LARGE, for_model

        session = await self.sessions.session(session_id)
        lines = [text] if text.strip() else []
        blocks: list[Block] = []
        files: list[SentFile] = []
        for given in paths:
            path = Path(given)
            media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            data, note = await asyncio.to_thread(_read_capped, path, MAX_ATTACHMENT_BYTES)
            if data is None:
                note = note or TOO_LARGE.format(name=path.name)
                lines.append(note)
                files.append(SentFile(given, path.name, _size(path), media, note=note))
                continue
            saved = await self.sessions.save_attachment(session.agent, path.name, data)
            lines.append(f"[attached file: {saved} ({media}, {len(data)} bytes)]")
            name = saved.rsplit("/", 1)[-1]
            for_it = await for_model(self.sessions.blobs, data, media, name, saved)
            blocks.extend(for_it.blocks)
            if for_it.note:
                lines.append(for_it.note)
            files.append(SentFile(given, path.name, len(data), media, saved=saved))
        turn = await self.submit(
            session_id, "\n".join(lines), attended=attended, blocks=blocks, here=here
        )
        return FilesTurn(turn, tuple(files))

    async def _queue(self, job_id: str, request: TurnRequest, *, node: str = "") -> None:
        """Find the session and queue the job in one trip (NotFound: no such session);
        wake this process's pools when it is new. `node`: the process it is pinned to."""
        queued = await self.sessions.queue_for(
            job_id, request, max_attempts=TURN_MAX_ATTEMPTS, node=node
        )
        if queued:
            enqueued(self.queue, TURN_KIND)

    async def compact_session(
        self,
        session_id: str,
        *,
        job_id: str | None = None,
        reply_to: ReplyTo | None = None,
        here: bool = False,
    ) -> str:
        """Queue a compaction of the session (/compact); returns its job id.

        It runs as a turn of the session (the same serial key, so never beside one)
        that appends no message: wait_turn's reply says what it did. `job_id`,
        `reply_to` (a channel's) and `here` work as for `submit`.
        """
        job = job_id or new_id("compact")
        request = TurnRequest(session_id, compact=True, reply_to=reply_to)
        await self._queue(job, request, node=self.queue.node if here else "")
        return job

    async def steer(self, session_id: str, text: str) -> bool:
        """Queue `text` as guidance for the session's queued or running turn, in the
        transaction that finds it (engine/agent/guidance.py); False, and nothing queued,
        when no turn is queued or running (the surface sends it as a message)."""
        from habakkuk.engine.agent.guidance import active_turn_in, add_in

        transcripts = self.sessions.transcripts
        schema = transcripts.state_schema
        if schema is None:
            return False  # state.db is not on the transcripts' connection: a message then

        def _steer(conn: Conn, session: Session) -> bool:
            if not active_turn_in(conn, session.id):
                return False
            add_in(conn, session.id, text, schema)
            return True

        found = await transcripts.with_session(session_id, _steer)
        if found is None:
            raise NotFound(f"session {session_id!r} not found")
        return found[1]

    async def ask_aside(
        self,
        session_id: str,
        question: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        reply_to: ReplyTo | None = None,
        here: bool = False,
    ) -> str:
        """Queue /btw's `question` as the one turn of a throwaway session of the session's
        agent (origin ASIDE_ORIGIN: the lists skip it), its message the conversation as
        text then the question (services/aside.py). Its own session is its own serial
        key, so it runs beside the session's turn; nothing is added to the session's
        transcript and no binding moves. The turn id; `turn_id`, `attended`, `reply_to`
        and `here` work as for `submit` (a redelivered /btw finds its turn queued)."""
        from habakkuk.engine.sessions import ASIDE_ORIGIN

        from .aside import aside_text

        turn = turn_id or new_id("turn")
        if turn_id is not None and await self.queue.get(turn) is not None:
            return turn  # a redelivery: its throwaway session exists already
        main = await self.sessions.session(session_id)
        view = await self.sessions.transcripts.view(session_id)
        aside = await self.sessions.new_session(main.agent, origin=ASIDE_ORIGIN)
        text = aside_text(view, question)
        return await self.submit(
            aside.id, text, turn_id=turn, attended=attended, reply_to=reply_to, here=here
        )

    async def stop_turn(self, turn_id: str) -> str | None:
        """Stop a queued or running turn; returns its status after the request."""
        pool = self._turn_pool()
        if pool is not None and pool.stop_job(turn_id):
            return "running"
        status = await self.queue.cancel(turn_id)
        if status == "cancelled" and self.cancelled is not None:
            job = await self.queue.get(turn_id)
            if job is not None and job.finished:
                self.cancelled(job)
        return status

    async def wait_turn(self, turn_id: str, *, poll: float = 0.5) -> TurnOutcome:
        """Wait until the turn finishes here or in another process, and report it."""
        with self.bus.subscribe(
            lambda e: isinstance(e, JobFinished) and e.job == turn_id, maxsize=4
        ) as finished:
            while True:
                job = await self.queue.get(turn_id)
                if job is None:
                    raise NotFound(f"turn {turn_id!r} not found")
                if job.finished:
                    return outcome_of(job)
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_within(finished.get(), poll)

    async def turn_outcome(self, turn_id: str) -> TurnOutcome | None:
        """The turn's state now (queued, running, done, failed, cancelled), or None."""
        job = await self.queue.get(turn_id)
        return outcome_of(job) if job is not None else None

    async def queue_depth(self) -> dict[tuple[str, str], int]:
        """Queued jobs by (kind, state)."""
        return await self.queue.depth()

    def running_jobs(self) -> list[Job]:
        """Jobs this process's pools are running now."""
        return [job for pool in self._pools() for job in pool.running_jobs]

    def pool_states(self) -> list[PoolState]:
        """Each of this process's worker pools, what it does now (readiness)."""
        return [pool.state() for pool in self._pools()]

    def drain(self) -> None:
        """Every pool of this process claims nothing more; running jobs go on (memory
        pressure: services.memory_guard)."""
        for pool in self._pools():
            pool.drain()

    async def upcoming_jobs(self, limit: int = 10) -> list[Job]:
        """Jobs waiting for their time (the daily retention sweep, retries), soonest first."""
        return await self.queue.upcoming(limit)

    async def unsent_deliveries(self, since: float) -> int:
        """Parts a chat could not receive since `since` (each told in its chat: a file to
        a chat without files, over the platform's limit or gone from disk)."""
        return await self.queue.failed_count(DELIVERY_PREFIX, UNSENT_PREFIX, since)

    async def recent_failures(self, limit: int = 10, *, errors_only: bool = False) -> list[Job]:
        """Jobs that failed for good, newest first (`errors_only`: without those a budget
        paused, which are told otherwise)."""
        return await self.queue.recent_failures(limit, errors_only=errors_only)


def _read_capped(path: Path, cap: int) -> tuple[bytes | None, str]:
    """The file's bytes, or None and why not ("" when it is over `cap` bytes)."""
    try:
        with path.open("rb") as file:
            data = file.read(cap + 1)  # one byte more tells an over-cap file without reading it all
    except OSError as exc:
        return None, f"[attachment {path.name} could not be read: {exc.strerror or exc}]"
    return (data, "") if len(data) <= cap else (None, "")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
