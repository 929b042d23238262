"""Sessions: create, find, read, rename, archive, delete, fork, rewind, search and export them.

Its Protocol, what the surfaces use of it, is engine.session_access.SessionsAccess.
"""

from __future__ import annotations

import asyncio
import copy
import re
import secrets
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.agent.prompt import build_system_prompt
from habakkuk.engine.agent.requests import TURN_KIND, TurnRequest
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import SessionRenamed
from habakkuk.engine.goals import GoalStore, running_goal_in
from habakkuk.engine.jobs import enqueue_in
from habakkuk.engine.llm.types import Message, Role, ToolResultBlock
from habakkuk.engine.sessions import (
    WORK_ORIGINS,
    Compaction,
    SearchHit,
    Session,
    StoredMessage,
)
from habakkuk.engine.sql import Conn

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.home import Home
    from habakkuk.engine.hook_events import HookFirer
    from habakkuk.engine.jobs import Job, JobQueue
    from habakkuk.engine.sessions import TranscriptStore
    from habakkuk.engine.state import StateStore
    from habakkuk.engine.store import BlobStore
    from habakkuk.knowledge.memory_types import MemoryAccess
    from habakkuk.knowledge.skills.types import SkillsAccess


def new_id(prefix: str) -> str:
    """A random id such as ses_3f9a... (16 hex digits)."""
    return f"{prefix}_{secrets.token_hex(8)}"


class Sessions:
    """The home's sessions (transcripts.db) and their per-session state (state.db)."""

    def __init__(
        self,
        config: Config,
        home: Home,
        transcripts: TranscriptStore,
        queue: JobQueue,
        blobs: BlobStore,
        state: StateStore | None,
        memory: MemoryAccess | None = None,
        hooks: HookFirer | None = None,
        bus: EventBus | None = None,
    ):
        self.config = config
        self.bus = bus  # session.renamed when a title is set by hand
        self.memory = memory
        self.hooks = hooks  # session_new fires here, whichever surface made the session
        self.skills: SkillsAccess | None = None  # the # Skills listing (runtime.skills)
        self.home = home
        self.transcripts = transcripts
        self.queue = queue
        self.blobs = blobs
        self.state = state

    def state_store(self) -> StateStore:
        """state.db; HabakkukError when it is not open."""
        if self.state is None:
            raise HabakkukError("state.db is not open")
        return self.state

    async def new_session(
        self,
        agent: str | None = None,
        *,
        origin: str = "cli",
        session_id: str | None = None,
        chat: bool = False,
        workspace: Path | None = None,
    ) -> Session:
        """Start a session of `agent` with its frozen system prompt.

        The prompt takes SOUL.md, IDENTITY.md, AGENTS.md, USER.md and the memory's
        listing as they are now. `chat` marks a conversation with the user (a direct
        message, the web chat, the terminal app): only such a session may take the
        one-time welcome; schedules, webhooks, /v1 and `habakkuk run` never do.
        A `session_id` derived from what caused the session (a webhook delivery)
        makes a repeat return the existing session. `workspace` replaces the agent's in the
        prompt (a delegated child's git worktree). A session created fires the session_new
        hooks (subject: the agent); a repeat does not.
        """
        from habakkuk.services.session_prompt import gather_sections

        agent_config = self.config.agent(agent)
        if workspace is not None:
            agent_config = copy.copy(agent_config)
            agent_config.workspace_path = workspace
        if session_id is not None:
            existing = await self.transcripts.get_session(session_id)
            if existing is not None:
                return existing  # a repeat: no second snapshot, no welcome taken
        sections = await gather_sections(
            agent_config,
            self.home.agent_dir(agent_config.name),
            self.memory,
            chat=chat,
            skills=self.skills,
        )
        # The language a configured person speaks here: the channel's that started the
        # session (origin "channel:NAME"), else config.yaml's.
        channel = origin.removeprefix("channel:") if origin.startswith("channel:") else ""
        sections = replace(sections, language=self.config.language_of(channel))
        session = await self.transcripts.create_session(
            session_id or new_id("ses"),
            agent_config.name,
            build_system_prompt(agent_config, sections),
            origin=origin,
        )
        if self.hooks is not None:
            self.hooks.fire(
                "session_new",
                session.agent,
                {"agent": session.agent, "session": session.id, "origin": origin, "chat": chat},
            )
        return session

    async def session(self, session_id: str) -> Session:
        """The session `session_id`; NotFound when there is none."""
        found = await self.transcripts.get_session(session_id)
        if found is None:
            raise NotFound.said("errors.sessions.not_found", session=repr(session_id))
        return found

    async def queue_for(
        self, job_id: str, request: TurnRequest, *, max_attempts: int, node: str = ""
    ) -> bool:
        """Queue `request` as a turn job of its session (the serial key) in control.db, in
        the same transaction (one trip) that finds the session; True when the job was new.
        `node`: the process it is pinned to ('' for any). NotFound when there is no such
        session: nothing is queued. The turn carries the session's running /goal, read in
        that transaction where state.db is attached (engine/goals.py running_goal_in)."""
        schema = self.transcripts.state_schema
        goal = ""
        if schema is None and self.state is not None:  # not attached: a trip of its own
            found = await GoalStore(self.state.db).current(request.session)
            goal = found.id if found is not None and found.running else ""

        def _queue(conn: Conn, session: Session) -> bool:
            marked = running_goal_in(conn, session.id, schema) if schema is not None else goal
            return enqueue_in(
                conn,
                job_id,
                TURN_KIND,
                replace(request, session=session.id, goal=marked),
                serial_key=session.id,
                max_attempts=max_attempts,
                agent=session.agent,  # claimed only by a process hosting the agent
                node=node,
            )

        done = await self.transcripts.with_session(request.session, _queue)
        if done is None:
            raise NotFound.said("errors.sessions.not_found", session=repr(request.session))
        return done[1]

    async def list_sessions(
        self,
        agent: str | None = None,
        *,
        limit: int = 50,
        archived: bool = False,
        include_work: bool = False,
    ) -> list[Session]:
        """Recent sessions (of `agent`), newest first: the user's own, unless
        `include_work` also lists the sessions the home's work started (board cards' runs
        and delegated sub-agents', engine.sessions.WORK_ORIGINS). The one rule every
        sessions list (terminal, CLI, API) follows; each has its switch for the others."""
        if agent is not None:
            self.config.agent(agent)
        without = () if include_work else WORK_ORIGINS
        return await self.transcripts.list_sessions(
            agent, limit=limit, archived=archived, without=without
        )

    async def messages(self, session_id: str) -> list[StoredMessage]:
        """The session's stored messages, in order."""
        await self.session(session_id)
        return await self.transcripts.messages(session_id)

    async def turn_messages(self, session_id: str, turn_id: str) -> list[StoredMessage]:
        """The messages one turn wrote, in order (by index: not the whole transcript)."""
        return await self.transcripts.turn_messages(session_id, turn_id)

    async def active_turns(self, session_id: str) -> list[Job]:
        """The session's queued or running turns, oldest first."""
        return [j for j in await self.queue.active_for(session_id) if j.kind == TURN_KIND]

    async def seed_session(
        self, session_id: str, history: Sequence[tuple[Role, str] | Message]
    ) -> None:
        """Append earlier messages ((role, text) or whole messages) to a new session
        before its first turn."""
        from habakkuk.engine.sessions import plain_text_message

        await self.session(session_id)
        for item in history:
            message = item if isinstance(item, Message) else plain_text_message(*item)
            await self.transcripts.append(session_id, message)

    async def rename_session(self, session_id: str, title: str) -> Session:
        """Set a session's title by hand (a hand-set title is never replaced)."""
        await self.session(session_id)
        await self.transcripts.set_title(session_id, title.strip(), "user")
        renamed = await self.session(session_id)
        if self.bus is not None:
            self.bus.publish(SessionRenamed(session=renamed.id, title=renamed.title, source="user"))
        return renamed

    async def archive_session(self, session_id: str, archived: bool = True) -> None:
        """Hide a session from the recent list (or bring it back)."""
        await self.session(session_id)
        await self.transcripts.set_archived(session_id, archived)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session for good: its transcript, search rows and state (todos, /model,
        /think). NotFound when unknown; HabakkukError while one of its turns is active."""
        await self.session(session_id)
        if await self.active_turns(session_id):
            raise HabakkukError.said("errors.sessions.busy", session=repr(session_id))
        await self.transcripts.delete_sessions([session_id])
        await self.state_store().forget_sessions([session_id])

    async def fork_session(self, session_id: str) -> Session:
        """Copy the session up to its last finished turn into a new one (same agent and
        frozen prompt, title "Fork of ..."); the original stays as it was."""
        await self.session(session_id)
        # What is stored now; a turn that starts meanwhile is not copied.
        stored = await self.transcripts.messages(session_id)
        upto = stored[-1].seq if stored else -1
        for job in await self.active_turns(session_id):
            # A turn still queued or running is not copied, nor anything after it.
            written = await self.transcripts.turn_messages(session_id, job.id)
            if written:
                upto = min(upto, written[0].seq - 1)
        fork = await self.transcripts.fork(session_id, new_id("ses"), upto_seq=upto)
        await self.state_store().copy_settings(session_id, fork.id)
        return fork

    async def rewind_session(self, session_id: str, turns: int = 1) -> Session:
        """/rewind N: fork the session without its last `turns` messages the user typed
        (and everything after them); the original stays as it was."""
        from habakkuk.conversation.commands import typed_seqs

        await self.session(session_id)
        typed = typed_seqs(await self.transcripts.messages(session_id))
        if len(typed) < turns:
            if not typed:
                raise HabakkukError.said("errors.sessions.rewind_none")
            raise HabakkukError.said("errors.sessions.rewind_only", count=len(typed))
        fork = await self.transcripts.fork(session_id, new_id("ses"), upto_seq=typed[-turns] - 1)
        await self.state_store().copy_settings(session_id, fork.id)
        return fork

    async def search_sessions(
        self, query: str, agent: str | None = None, *, limit: int = 20
    ) -> list[SearchHit]:
        """Full-text search over sessions' user and assistant text, best first."""
        if agent is not None:
            self.config.agent(agent)
        return await self.transcripts.search(query, agent=agent, limit=limit)

    async def export_session(self, session_id: str, fmt: str) -> str:
        """A session's transcript as md, json or html text."""
        from habakkuk.engine.export import EXPORT_FORMATS, export_transcript

        chosen = next((f for f in EXPORT_FORMATS if f == fmt), None)
        if chosen is None:
            raise ValueError(f"unknown export format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
        session = await self.session(session_id)
        messages = await self.messages(session_id)
        compaction = await self.transcripts.latest_compaction(session_id)
        return export_transcript(session, messages, chosen, compaction)

    def export_default(self, session_id: str, fmt: str) -> str:
        """Where an export goes when no path is given: HOME/exports/<session>.<fmt>."""
        from habakkuk.engine.export import export_path

        return str(export_path(self.home.root, session_id, fmt))

    async def save_export(self, session_id: str, fmt: str, path: str | None = None) -> str:
        """Write a session's transcript as md, json or html to `path` (relative to the
        current folder), else to HOME/exports/<session>.<fmt>; missing folders are
        created. Returns where it went; HabakkukError (one line) when it cannot be written."""
        from habakkuk.engine.export import save_export

        text = await self.export_session(session_id, fmt)
        where = await asyncio.to_thread(save_export, self.home.root, session_id, fmt, text, path)
        return str(where)

    async def compaction(self, session_id: str) -> Compaction | None:
        """The session's latest compaction (its summary and first kept message), if any."""
        await self.session(session_id)
        return await self.transcripts.latest_compaction(session_id)

    async def tool_output(self, session_id: str, call_id: str) -> ToolResultBlock | None:
        """The full recorded result of one tool call, read from the transcript."""
        for stored in reversed(await self.messages(session_id)):
            for result in stored.message.tool_results:
                if result.tool_use_id == call_id:
                    return result
        return None

    async def save_attachment(self, agent: str, filename: str, data: bytes) -> str:
        """Store an upload as a blob and copy it to the agent's workspace/inbox/.

        Returns the path relative to the workspace. The name is reduced to a safe
        base name; an existing different file keeps its name and the upload gets
        a numbered one.
        """
        agent_config = self.config.agent(agent)
        blob = await self.blobs.put(data)
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", filename.rsplit("/", 1)[-1]).strip("._")
        base = base[:100] or "file"

        def _copy() -> str:
            inbox = agent_config.workspace_path / "inbox"
            inbox.mkdir(parents=True, exist_ok=True)
            stem, dot, suffix = base.partition(".")
            candidate = inbox / base
            number = 1
            while candidate.exists() and candidate.read_bytes() != data:
                number += 1
                candidate = inbox / f"{stem}-{number}{dot}{suffix}"
            if not candidate.exists():
                candidate.write_bytes(blob.read_bytes())
            return str(candidate.relative_to(agent_config.workspace_path))

        return await asyncio.to_thread(_copy)
