"""Approvals: the hub of this process, who is attending, and one answer path for every surface.

`Approvals` is the runtime's approval hub (engine.toolkit.approvals.ApprovalHub) plus
what a client needs around it: `attach()` says someone is attending (the terminal,
the dashboard), clarify questions for clients that take them, every approval waiting
on the home (this process's and the chat approvals other processes recorded in
control.db), and `respond`, the one method the terminal, the web chat, the dashboard
and the API answer through. Its Protocols, what the surfaces use of it, are
engine.toolkit.waiting.ApprovalsAccess and tools.clarify.QuestionsAccess.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from habakkuk.engine.errors import HabakkukError
from habakkuk.engine.events import QuestionAnswered, QuestionAsked, QuestionWithdrawn
from habakkuk.engine.i18n import use_language
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.approvals import APPROVAL_VERBS, Answer, ApprovalHub, Approver
from habakkuk.engine.toolkit.reviewer import Reviewer, select_approver
from habakkuk.engine.toolkit.waiting import TERMINAL, WaitingApproval, merge_waiting

if TYPE_CHECKING:
    from habakkuk.channels.outbox import Outbox
    from habakkuk.channels.store import ChannelStore
    from habakkuk.engine.agent.requests import TurnRequest
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.llm.router import Router
    from habakkuk.engine.sessions import Session, TranscriptStore
    from habakkuk.engine.store import Database
    from habakkuk.tools.clarify import ClarifyRequest


# Whether control's channel_prompts table exists, asked of each engine's catalogue.
_PROMPTS_TABLE = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'channel_prompts'",
    "postgres": "SELECT table_name FROM information_schema.tables"
    " WHERE table_schema = current_schema() AND table_name = 'channel_prompts'",
}


class Attendance:
    """One client attending (from `Approvals.attach`); `release()` or leaving `with` ends it."""

    def __init__(self, approvals: Approvals, questions: bool):
        self._approvals = approvals
        self._questions = questions
        self._released = False

    def release(self) -> None:
        """Stop attending; a second call does nothing."""
        if not self._released:
            self._released = True
            self._approvals._detach(self._questions)

    def __enter__(self) -> Attendance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Approvals(ApprovalHub):
    """The approval hub with attendance, questions, the home's waiting list and `respond`."""

    def __init__(
        self,
        bus: EventBus,
        *,
        config: Config,
        transcripts: TranscriptStore,
        control_db: Database,
        channels: Callable[[], Any],
        outbox: Callable[[], Outbox],
        timeout: float = 900.0,
    ):
        super().__init__(bus, timeout=timeout)
        self._config = config
        self._transcripts = transcripts
        self._control_db = control_db
        self._channels = channels  # the running ChannelService, or None
        self._outbox = outbox
        self._attending = 0
        self._askers = 0
        self._store: ChannelStore | None = None
        self._questions: dict[str, tuple[ClarifyRequest, asyncio.Future[str | None]]] = {}

    # -- who is attending ------------------------------------------------------------

    def attach(self, *, questions: bool = False) -> Attendance:
        """Someone who can answer approvals is here (the terminal, the dashboard) until the
        returned attendance is released; `questions` also takes the agent's clarify questions.

        Turns submitted as attended ask a human only while someone attends.
        """
        self._attending += 1
        if questions:
            self._askers += 1
        return Attendance(self, questions)

    def _detach(self, questions: bool) -> None:
        self._attending -= 1
        if questions:
            self._askers -= 1

    @property
    def attending(self) -> bool:
        """Whether any client that answers approvals is attached."""
        return self._attending > 0

    # -- clarify questions -----------------------------------------------------------

    @property
    def questions(self) -> list[ClarifyRequest]:
        """Waiting clarify requests (each has `id`), oldest first."""
        return [request for request, _ in self._questions.values()]

    async def ask(self, request: ClarifyRequest) -> str | None:
        """Put the questions to the attached client and wait for its answer text.

        While no client that takes questions is attached, it fails at once as if there
        were no asker at all, so the model goes on with stated assumptions instead of
        waiting for nobody. Publishes question.pending {id, request}, then
        question.answered or question.withdrawn (a stopped turn withdraws its question).
        """
        if self._askers <= 0:
            from habakkuk.engine.toolkit.registry import ToolError
            from habakkuk.tools.clarify import NO_ASKER

            raise ToolError(NO_ASKER)
        request.id = request.id or f"qst_{secrets.token_hex(6)}"
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._questions[request.id] = (request, future)
        self.bus.publish(QuestionAsked(session=request.session, id=request.id, request=request))
        try:
            return await wait_within(asyncio.shield(future), self.timeout)
        except TimeoutError:
            return None
        finally:
            self._questions.pop(request.id, None)
            settled = QuestionAnswered if future.done() else QuestionWithdrawn
            if not future.done():
                future.cancel()
            self.bus.publish(settled(session=request.session, id=request.id))

    def answer_question(self, question_id: str, text: str) -> bool:
        """Answer a waiting question; False when it is no longer waiting."""
        entry = self._questions.get(question_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(text)
        return True

    # -- every approval waiting on the home, and the one answer path -----------------

    async def store(self) -> ChannelStore:
        """The channel tables of control.db (the running channels' store when they run here),
        created if missing, so reading them never meets a missing table."""
        channels = self._channels()
        if channels is not None:
            store: ChannelStore = channels.store
            return store
        if self._store is None:
            from habakkuk.channels.store import ChannelStore

            store = ChannelStore(self._control_db)
            # Creates the tables, or adds the columns an older version's file lacks.
            await store.ensure()
            self._store = store
        return self._store

    async def recorded_store(self) -> ChannelStore | None:
        """The channel tables when some process of the home has them (None: none ever ran).

        With channels configured here they are created; without, reading the list must
        not create them, so their absence is looked up rather than met as an error.
        """
        if self._channels() is not None or self._store is not None or self._config.channels:
            return await self.store()
        rows = await self._control_db.fetchall(_PROMPTS_TABLE[self._control_db.dialect])
        return await self.store() if rows else None

    def turn_approver(
        self, session: Session, request: TurnRequest, router: Router
    ) -> Approver | None:
        """The turn's approver: the chat for channel turns, else the human one (behind the
        reviewer when the agent's `approvals` says). An unattended turn that replies to a
        chat (a webhook's) asks nobody."""
        channels = self._channels()
        if request.reply_to is not None and request.attended and channels is not None:
            approver: Approver | None = channels.approver_for(request)
            return approver
        human = self.human_approver(session, request)
        agent = self._config.agent(session.agent)
        if agent.approvals == "human":
            return human
        reviewer = Reviewer(
            router,
            agent.reviewer_chain or agent.chain,
            bus=self.bus,
            task=request.text,
            workspace=agent.workspace_path,
        )
        return select_approver(agent.approvals, human=human, reviewer=reviewer)

    def human_approver(self, session: Session, request: TurnRequest) -> Approver | None:
        """The approver of a turn submitted as attended while someone attends, else None.

        Its requests are recorded in control.db too, so every process of the home lists
        and answers them.
        """
        if not (request.attended and self.attending):
            return None
        from habakkuk.channels.home_approvals import RecordedApprover
        from habakkuk.channels.store import ChannelStore

        channels = self._channels()
        store = channels.store if channels is not None else ChannelStore(self._control_db)
        where = "web" if session.origin == "web" else TERMINAL
        return RecordedApprover(self, store, where)

    async def waiting(self) -> list[WaitingApproval]:
        """Every call waiting for approval on this home, oldest first.

        This process's hub requests (terminal, web chat, chat turns run here) and the
        chat approvals that turns of other processes wait on (recorded in control.db),
        each listed once with where it was asked and whether it is `local`.
        """
        local = self.pending
        chat = await self._chat_approvals()
        asked_in_chat = {approval.id for approval in chat}
        where: dict[str, str] = {}
        for request in local:
            if request.id not in asked_in_chat:
                session = await self._transcripts.get_session(request.session)
                where[request.id] = "web" if session and session.origin == "web" else TERMINAL
        return merge_waiting(local, chat, since=self.since, where=where, now=time.time())

    async def respond(
        self, approval_id: str, answer: Answer, by: str, *, notify: bool = True
    ) -> bool:
        """Answer a waiting approval wherever it waits; False when it no longer waits.

        The one answer path of the terminal, the web chat, the dashboard and the API,
        each of which reads the person's word or key as an Answer first
        (conversation/answers.py); an untyped caller's other value is a HabakkukError. A
        request of this process's hub is answered there; a chat approval that a turn
        of another process waits on is answered in control.db, where that turn finds
        it (the first answer wins). The chat is told who answered in its place
        ("Approved from the dashboard."), unless `notify` is off (the chat itself answered).
        """
        if answer not in APPROVAL_VERBS:
            raise HabakkukError(
                f"approval answer {answer!r}: expected allow_once, allow_session or deny"
            )
        waiting = {a.id: a for a in await self.waiting()}.get(approval_id)
        if waiting is None:
            return False
        if waiting.local:
            answered = self.answer(approval_id, answer, by=by)
        else:
            store = await self.store()
            answered = await store.answer_waiting_approval(approval_id, answer, by)
        channel = waiting.where.partition(":")[0]
        if answered and notify and channel in self._config.channels:
            # Imported here: the chat commands' package, which a one-shot run never loads.
            from habakkuk.conversation.answers import answered_from

            with use_language(self._config.language_of(channel)):
                notice = answered_from(answer, by)
            await self._outbox().send_text(f"prompt-answer:{approval_id}", waiting.where, notice)
        return answered

    async def _chat_approvals(self) -> list[WaitingApproval]:
        """Chat approvals waiting in control.db (asked by this process or another)."""
        store = await self.recorded_store()
        if store is None:
            return []
        return [
            WaitingApproval(
                id=prompt.id,
                tool=prompt.tool,
                summary=prompt.summary,
                reason=prompt.reason,
                agent=prompt.agent,
                session=prompt.session,
                turn=prompt.turn,
                since=prompt.created,
                where=prompt.conversation,
                local=False,
            )
            for prompt in await store.waiting_approvals()
        ]
