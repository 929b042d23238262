"""The composition root: config -> stores -> providers -> tools -> workers.

`Runtime` is also the facade every client uses (the CLI, the TUI, the HTTP
server): clients call its methods and follow its events bus; they never open a
database or call a provider themselves. Only this module knows every part.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from habakkuk.engine.agent.prompt import build_system_prompt
from habakkuk.engine.agent.turn import TURN_KIND, TurnDeps, TurnRunner
from habakkuk.engine.config import (
    THINKING_LEVELS,
    Config,
    ModelRef,
    Thinking,
    load_config,
    thinking_level,
)
from habakkuk.engine.errors import HabakkukError, NotFound
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Environment, Home, default_home
from habakkuk.engine.hooks import Hooks
from habakkuk.engine.jobs import MIGRATIONS as JOB_MIGRATIONS
from habakkuk.engine.jobs import Job, JobQueue, Lease
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.llm.pricing import PriceTable
from habakkuk.engine.llm.router import Caller, Router
from habakkuk.engine.llm.types import Message, ToolResultBlock, Usage
from habakkuk.engine.llm.usage import UsageStore, UsageTotal
from habakkuk.engine.overview import (
    OVERVIEW_ERROR_DAYS,
    OVERVIEW_ERRORS,
    HttpListener,
    McpState,
    Overview,
)
from habakkuk.engine.pools import Pool
from habakkuk.engine.retention import RETENTION_KIND, retention_job_id
from habakkuk.engine.retention import sweep as retention_sweep
from habakkuk.engine.sessions import (
    Compaction,
    SearchHit,
    Session,
    StoredMessage,
    TranscriptStore,
)
from habakkuk.engine.state import StateStore
from habakkuk.engine.store import BlobStore, Database
from habakkuk.engine.timeouts import wait_within
from habakkuk.engine.toolkit.approvals import ApprovalHub, Approver
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.engine.toolkit.reviewer import Reviewer, select_approver
from habakkuk.engine.toolkit.waiting import TERMINAL, WaitingApproval, merge_waiting
from habakkuk.tools.checkpoints import CheckpointError, Checkpoints
from habakkuk.tools.processes import ProcessInfo, ProcessManager

if TYPE_CHECKING:
    from habakkuk.channels.outbox import Outbox

log = logging.getLogger(__name__)

TURN_MAX_ATTEMPTS = 3
# The lease (in control.db) naming the process that serves the home's HTTP listener.
HTTP_LEASE = "http"
HTTP_LEASE_SECONDS = 60.0
# How a chat is told that someone answered its approval elsewhere ("... from the dashboard.").
APPROVAL_VERBS = {
    "allow_once": "Approved",
    "allow_session": "Approved for this session",
    "deny": "Denied",
}


def new_id(prefix: str) -> str:
    """A random id such as ses_3f9a... (16 hex digits)."""
    return f"{prefix}_{secrets.token_hex(8)}"


def build_tools(config: Config) -> ToolRegistry:
    """The built-in tools, registered by toolset."""
    from habakkuk.engine.toolkit.registry import Tool
    from habakkuk.tools.clarify import Clarify
    from habakkuk.tools.edit import EditFile
    from habakkuk.tools.fetch_tool import FetchUrl
    from habakkuk.tools.files import ListDir, ReadFile, WriteFile
    from habakkuk.tools.hardline import check_hardline
    from habakkuk.tools.patch_tool import ApplyPatch
    from habakkuk.tools.process_tools import (
        BackgroundExec,
        ProcessKill,
        ProcessList,
        ProcessOutput,
        ProcessWait,
        ProcessWrite,
    )
    from habakkuk.tools.search_tool import SearchFiles
    from habakkuk.tools.todo import Todo

    registry = ToolRegistry(hardline=check_hardline, inline_budget=config.tools.inline_budget)
    core: list[Tool] = [
        ReadFile(),
        WriteFile(),
        EditFile(),
        ListDir(),
        ApplyPatch(),
        SearchFiles(),
        BackgroundExec(),
        ProcessList(),
        ProcessOutput(),
        ProcessWait(),
        ProcessKill(),
        ProcessWrite(),
        FetchUrl(allow_private=config.tools.allow_private_urls),
        Todo(),
        Clarify(),
    ]
    for tool in core:
        registry.register(tool, "core")
    if config.channels:
        from habakkuk.channels.service import register_tools

        register_tools(registry)
    return registry


@dataclass
class TurnOutcome:
    """How a turn ended, as a client reports it."""

    session: str
    turn: str
    status: str
    reply: str
    error: str | None


class AttendedApprovals(ApprovalHub):
    """The approval hub, and clarify questions for attached clients that take them.

    A client that can answer questions (the terminal app) counts itself in
    `askers`; while none is attached, `ask` fails at once as if there were no
    asker at all, so the model goes on with stated assumptions instead of
    waiting for nobody. Questions are published as question.pending {id,
    request}, question.answered and question.withdrawn (a stopped turn
    withdraws its question).
    """

    def __init__(self, bus: Any, *, timeout: float = 900.0):
        super().__init__(bus, timeout=timeout)
        self.askers = 0
        self._questions: dict[str, tuple[Any, asyncio.Future[str | None]]] = {}

    @property
    def questions(self) -> list[Any]:
        """Waiting clarify requests (each has `id`), oldest first."""
        return [request for request, _ in self._questions.values()]

    async def ask(self, request: Any) -> str | None:
        """Put the questions to the attached client and wait for its answer text."""
        if self.askers <= 0:
            from habakkuk.engine.toolkit.registry import ToolError
            from habakkuk.tools.clarify import NO_ASKER

            raise ToolError(NO_ASKER)
        request.id = getattr(request, "id", "") or f"qst_{secrets.token_hex(6)}"
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._questions[request.id] = (request, future)
        self.bus.publish("question.pending", request.session, id=request.id, request=request)
        try:
            return await wait_within(asyncio.shield(future), self.timeout)
        except TimeoutError:
            return None
        finally:
            self._questions.pop(request.id, None)
            kind = "question.answered" if future.done() else "question.withdrawn"
            if not future.done():
                future.cancel()
            self.bus.publish(kind, request.session, id=request.id)

    def answer_question(self, question_id: str, text: str) -> bool:
        """Answer a waiting question; False when it is no longer waiting."""
        entry = self._questions.get(question_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(text)
        return True


class Runtime:
    """One home's running system: stores, router, tools, worker pools."""

    def __init__(
        self,
        home: Home,
        config: Config,
        env: Environment,
        control_db: Database,
        transcripts: TranscriptStore,
        state: StateStore | None = None,
        usage: UsageStore | None = None,
    ):
        self.home = home
        self.config = config
        self.env = env
        self.bus = EventBus()
        self.queue = JobQueue(control_db, lease_seconds=config.workers.lease_seconds)
        self.transcripts = transcripts
        self.blobs = BlobStore(home.blobs_dir)
        self.providers = ProviderHub(config, env, home.root)
        self.usage = usage
        self.router = Router(self.providers, on_usage=self._record_usage)
        self.tools = build_tools(config)
        self.hooks = Hooks(config.hooks, home.root)
        self.tools.hooks = self.hooks
        self.state = state
        # Agents' background processes live as long as this runtime (killed at close).
        self.processes = ProcessManager(home.procs_dir, on_exit=self._process_exited)
        self._checkpoints: dict[str, Checkpoints] = {}
        self._git: bool | None = None  # whether git is on PATH (checkpoints need it)
        # notify: true process id -> the turn that started it (its reply address is reused)
        self._process_turns: dict[str, str] = {}
        # Waiting approvals; turns marked attended use it while a client that can
        # answer (the terminal, the dashboard) has set `interactive`.
        self.approvals: ApprovalHub = AttendedApprovals(self.bus)
        self.interactive = False
        self._pools: list[Pool] = []
        self._turn_pool: Pool | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._http_standby: asyncio.Task[None] | None = None
        self._http_lease: asyncio.Task[None] | None = None
        self.mcp: Any = None  # habakkuk.protocols.mcp.manager.McpManager once started
        self._mcp_start: asyncio.Task[None] | None = None
        self._http: Any = None  # habakkuk.server.app.HttpServer while serving
        self.channels: Any = None  # habakkuk.channels.service.ChannelService while running
        self._prompts: Any = None  # a ChannelStore for chat approvals when channels run elsewhere

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    async def open(cls, home: Home | None = None, config: Config | None = None) -> Runtime:
        """Load config and open the stores of `home` (default: $HABAKKUK_HOME)."""
        home = home or Home(default_home())
        config = config or load_config(home)
        home.prepare()
        env = Environment(home.env_path)
        control = await Database.open(home.db_path("control"), JOB_MIGRATIONS)
        transcripts = await TranscriptStore.open(
            home.db_path("transcripts"), home.db_path("control")
        )
        state = await StateStore.open(home.db_path("state"))
        usage = await UsageStore.open(home.db_path("usage"), PriceTable(config.pricing))
        runtime = cls(home, config, env, control, transcripts, state, usage=usage)
        await runtime._adopt_legacy_model_choices()
        # Keys `habakkuk setup` put in the OS keyring; the keyring is slow, so off the loop.
        await asyncio.to_thread(runtime.providers.load_keyring)
        # Logs of an earlier run's background processes (nothing is resumed after a restart).
        await asyncio.to_thread(runtime.processes.cleanup_old_logs)
        return runtime

    async def start_mcp(self, wait: float | None = None) -> None:
        """Connect to the configured MCP servers in parallel (at most 20 s in all).

        Servers not up by then keep retrying in the background; their tools join
        the registry as `mcp:<server>` toolsets when they connect.
        """
        self._launch_mcp()
        if self._mcp_start is not None:
            await asyncio.wait([self._mcp_start], timeout=wait)

    def _tool_view(self) -> Any:
        """Tool search for agents with more tools than their tool_search_over."""
        from habakkuk.protocols.mcp.toolsearch import ToolSearchView

        return ToolSearchView(self.tools)

    def _launch_mcp(self) -> None:
        if self.mcp is None and self.config.mcp_servers:
            from habakkuk.protocols.mcp.manager import START_WAIT, McpManager

            self.mcp = McpManager(self.config, self.env, self.home, self.tools)
            self._mcp_start = asyncio.create_task(self.mcp.start(START_WAIT))

    def start_workers(self, *, channels: bool = True, maintenance: bool = False) -> None:
        """Start the worker pools on the running loop.

        `channels` also starts the chat channels; `maintenance` (long-lived
        processes: `--serve`, the terminal app) also runs the daily retention sweep.
        """
        if self._pools:
            return
        if channels and self.config.channels and self.channels is None:
            from habakkuk.channels.service import ChannelService

            self.channels = ChannelService(self)
        # Clients that did not wait for MCP still get its tools as servers connect.
        self._launch_mcp()
        runner = TurnRunner(
            TurnDeps(
                config=self.config,
                home=self.home,
                transcripts=self.transcripts,
                router=self.router,
                tools=self.tools,
                bus=self.bus,
                blobs=self.blobs,
                approver_for=self._approver_for,
                services={
                    "processes": self.processes,
                    "process_started": self._process_started,
                    "state": self.state,
                    **({"channels": self.channels} if self.channels is not None else {}),
                },
                hooks=self.hooks,
                state=self.state,
                checkpoint_for=self._checkpoint_for,
                tool_view=self._tool_view(),
            )
        )
        self._turn_pool = Pool(
            self.queue,
            [TURN_KIND],
            runner.run,
            concurrency=self.config.workers.turns,
            on_finished=self._job_finished,
        )
        self._pools.append(self._turn_pool)
        if maintenance:
            self._pools.append(
                Pool(
                    self.queue,
                    [RETENTION_KIND],
                    self._retention,
                    concurrency=1,
                    on_finished=self._job_finished,
                )
            )
            self._maintenance = asyncio.create_task(self._schedule_retention(), name="retention")
        for pool in self._pools:
            pool.start()
        if self.channels is not None:
            self.channels.start()

    async def _schedule_retention(self) -> None:
        """Queue today's retention sweep now and every hour (one job per day per home)."""
        while True:
            await self.queue.enqueue(retention_job_id(), RETENTION_KIND, max_attempts=3)
            await asyncio.sleep(3600)

    async def _retention(self, lease: Lease) -> dict[str, Any]:
        limits = self.config.retention
        report = await retention_sweep(
            self.queue,
            self.transcripts,
            self.blobs.root,
            jobs_days=limits.jobs_days,
            sessions_days=limits.sessions_days,
            state=self.state,
        )
        result: dict[str, Any] = report.as_dict()
        if self.usage is not None and limits.usage_days > 0:
            result["usage"] = await self.usage.prune(limits.usage_days)
        log.info("retention: %s", result)
        return result

    async def close(self) -> None:
        """Stop the HTTP server and the workers (leases released), close the stores."""
        await self.stop_http()
        if self._maintenance is not None:
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
        if self.channels is not None:
            await self.channels.stop()
        for pool in self._pools:
            await pool.stop()
        self._pools.clear()
        if self._mcp_start is not None:
            self._mcp_start.cancel()
            await asyncio.gather(self._mcp_start, return_exceptions=True)
        if self.mcp is not None:
            await self.mcp.close()
        await self.processes.shutdown()
        await self.hooks.drain()
        await self.providers.aclose()
        if self.usage is not None:
            await self.usage.close()
        if self.state is not None:
            await self.state.close()
        await self.transcripts.close()
        await self.queue.db.close()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def call_cost(self, model: str, usage: dict[str, Any]) -> float | None:
        """Dollars of one model call ("provider/model" and its usage), None when unpriced."""
        if self.usage is None:
            return None
        from habakkuk.engine.llm.types import Usage

        known = {k: int(v or 0) for k, v in usage.items() if k in Usage.__dataclass_fields__}
        return self.usage.prices.cost(model.partition("/")[2], Usage(**known))

    def job_settled(self, job: Job) -> None:
        """Publish `job.finished` for a job a pool settled (done, failed or cancelled)."""
        self.bus.publish(
            "job.finished",
            str(job.payload.get("session", "")),
            job=job.id,
            job_kind=job.kind,
            status=job.status,
            attempts=job.attempts,
        )

    def _job_finished(self, job: Job) -> None:
        self.job_settled(job)
        if self.channels is not None:
            self.channels.turn_finished(job)

    def _approver_for(self, session: Session, payload: dict[str, Any]) -> Approver | None:
        """The turn's approver: the chat for channel turns, else the human one (behind the
        reviewer when `approvals` says)."""
        if payload.get("reply_to") and self.channels is not None:
            return self.channels.approver_for(payload)  # type: ignore[no-any-return]
        human = self._human_approver_for(session, payload)
        agent = self.config.agent(session.agent)
        if agent.approvals == "human":
            return human
        reviewer = Reviewer(
            self.router,
            agent.reviewer_chain or agent.chain,
            bus=self.bus,
            task=str(payload.get("text") or ""),
            workspace=agent.workspace_path,
        )
        return select_approver(agent.approvals, human=human, reviewer=reviewer)

    async def _process_exited(self, info: ProcessInfo) -> None:
        """A notify: true background process ended: tell its session in a new turn."""
        from habakkuk.tools.processes import format_exit_notice

        try:
            started = self._process_turns.pop(info.id, None)
            job = await self.queue.get(started) if started else None
            reply_to = job.payload.get("reply_to") if job is not None else None
            await self.submit(
                info.session,
                format_exit_notice(info),
                turn_id=f"turn_{info.id}",
                extra={"reply_to": reply_to} if reply_to else None,
            )
        except Exception as exc:  # the session may be gone; the notice is best effort
            log.warning("cannot deliver the exit notice of %s: %s", info.id, exc)

    def _process_started(self, info: ProcessInfo, turn: str) -> None:
        if info.notify:
            self._process_turns[info.id] = turn

    # -- checkpoints ---------------------------------------------------------------------

    def checkpoints(self, agent: str | None = None) -> Checkpoints | None:
        """The agent's workspace checkpoints; None when off (`checkpoints: false`, no git)."""
        agent_config = self.config.agent(agent)
        if not self.config.checkpoints:
            return None
        if self._git is None:
            # Asked once per runtime: every turn wants to know, and PATH lookups stat files.
            self._git = Checkpoints.available()
        if not self._git:
            return None
        found = self._checkpoints.get(agent_config.name)
        if found is None:
            found = Checkpoints(
                self.home.checkpoints_dir(agent_config.name),
                agent_config.workspace_path,
                max_mb=self.config.checkpoint_max_mb,
            )
            self._checkpoints[agent_config.name] = found
        return found

    def _checkpoint_for(
        self, agent: Any, session: Session, task: str
    ) -> Callable[[], Awaitable[None]] | None:
        store = self.checkpoints(agent.name)
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
        session = await self.session(session_id)
        if any(j.kind == TURN_KIND for j in await self.queue.active_for(session_id)):
            raise HabakkukError("a turn of this session is queued or running; try /undo after it")
        store = self.checkpoints(session.agent)
        if store is None:
            return "checkpoints are off (checkpoints: false in config, or git is not on PATH)"
        try:
            undone = await store.undo(session_id)
        except CheckpointError as exc:
            raise HabakkukError(str(exc)) from None
        if undone is None:
            return "nothing to undo: no earlier turn of this session changed the workspace"
        checkpoint, stat = undone
        return f"restored the workspace to checkpoint {checkpoint.id[:12]}:\n{stat}"

    def _human_approver_for(self, session: Session, payload: dict[str, Any]) -> Approver | None:
        if payload.get("attended") and self.interactive:
            from habakkuk.channels.home_approvals import RecordedApprover
            from habakkuk.channels.store import ChannelStore

            # Recorded in control.db too, so every process of the home lists and answers it.
            channels = self.channels
            store = channels.store if channels is not None else ChannelStore(self.queue.db)
            where = "web" if session.origin == "web" else TERMINAL
            return RecordedApprover(self.approvals, store, where)
        return None

    async def _record_usage(self, ref: ModelRef, caller: Caller, usage: Usage) -> None:
        if self.usage is not None:
            await self.usage.record(ref, caller, usage)

    # -- facade: models and usage --------------------------------------------------------

    async def set_session_model(self, session_id: str, model: str | None) -> ModelRef | None:
        """/model provider/model: try this model first in the session's turns (None clears).

        HabakkukError when the text is not PROVIDER/MODEL or the provider is not configured.
        """
        await self.session(session_id)
        if model is None or not model.strip():
            await self._state_store().set_setting(session_id, "model", None)
            return None
        try:
            ref = ModelRef.parse(model.strip())
        except ValueError as exc:
            raise HabakkukError(f"/model: {exc}") from None
        if ref.provider not in self.config.providers:
            known = ", ".join(sorted(self.config.providers)) or "none"
            raise HabakkukError(
                f"/model: provider {ref.provider!r} is not configured (providers: {known})"
            )
        await self._state_store().set_setting(session_id, "model", str(ref))
        return ref

    async def session_model(self, session_id: str) -> ModelRef | None:
        """The session's /model choice, if any."""
        if self.state is None:
            return None
        choice = await self.state.setting(session_id, "model")
        try:
            return ModelRef.parse(choice) if choice else None
        except ValueError:
            return None

    async def set_session_thinking(
        self, session_id: str, level: str | None
    ) -> tuple[Thinking, bool]:
        """/think LEVEL: the effort sent with each request of the session.

        None (or "default") goes back to the agent's `thinking` setting. Returns the
        session's effort now and whether /think chose it, as `session_thinking` does;
        HabakkukError names the levels when LEVEL is not one of them.
        """
        session = await self.session(session_id)
        state = self._state_store()
        choice = (level or "").strip().lower()
        if choice in ("", "default"):
            await state.set_setting(session.id, "thinking", None)
            return self.config.agent(session.agent).thinking, False
        known = thinking_level(choice)
        if known is None:
            levels = ", ".join(THINKING_LEVELS)
            raise HabakkukError(f"/think: unknown level {level!r} (levels: {levels}, default)")
        await state.set_setting(session.id, "thinking", known)
        return known, True

    async def session_thinking(self, session_id: str) -> tuple[Thinking, bool]:
        """The session's effort and whether /think chose it (False: the agent's setting)."""
        session = await self.session(session_id)
        chosen = thinking_level(await self._state_store().setting(session.id, "thinking"))
        if chosen is not None:
            return chosen, True
        return self.config.agent(session.agent).thinking, False

    async def _adopt_legacy_model_choices(self) -> None:
        """Move /model choices an older version kept in usage.db into state.db, beside
        /think (a starting turn reads both in one trip). Idempotent: a crash between the
        two steps only repeats the copy, which never overwrites a newer choice."""
        if self.usage is None or self.state is None:
            return
        legacy = await self.usage.legacy_session_models()
        if legacy:
            await self.state.adopt_settings("model", legacy)
            await self.usage.forget_legacy_session_models(list(legacy))

    def _state_store(self) -> StateStore:
        if self.state is None:
            raise HabakkukError("state.db is not open")
        return self.state

    async def usage_totals(
        self, *, days: float | None = None, agent: str | None = None, session: str | None = None
    ) -> list[UsageTotal]:
        """Tokens and dollars by model and agent (over the last `days` when given)."""
        if self.usage is None:
            return []
        since = time.time() - days * 86400 if days is not None else None
        return await self.usage.totals(since=since, agent=agent, session=session)

    # -- facade: sessions and turns ------------------------------------------------------

    async def new_session(
        self, agent: str | None = None, *, origin: str = "cli", session_id: str | None = None
    ) -> Session:
        """Start a session of `agent` with its frozen system prompt.

        A `session_id` derived from what caused the session (a webhook delivery)
        makes a repeat return the existing session.
        """
        agent_config = self.config.agent(agent)
        return await self.transcripts.create_session(
            session_id or new_id("ses"),
            agent_config.name,
            build_system_prompt(agent_config),
            origin=origin,
        )

    async def session(self, session_id: str) -> Session:
        found = await self.transcripts.get_session(session_id)
        if found is None:
            raise NotFound(f"session {session_id!r} not found")
        return found

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Queue a turn for `text` in the session; returns the turn id.

        With a `turn_id` derived from what caused the message, a redelivery is a
        no-op (the existing turn's id is returned). `extra` adds payload keys
        (a channel turn's `reply_to` address and attachment `blocks`).
        """
        session = await self.session(session_id)
        turn = turn_id or new_id("turn")
        await self.queue.enqueue(
            turn,
            TURN_KIND,
            {**(extra or {}), "session": session.id, "text": text, "attended": attended},
            serial_key=session.id,
            max_attempts=TURN_MAX_ATTEMPTS,
        )
        return turn

    async def compact_session(
        self,
        session_id: str,
        *,
        job_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Queue a compaction of the session (/compact); returns its job id.

        It runs as a turn of the session (the same serial key, so never beside one)
        that appends no message: wait_turn's reply says what it did. `job_id` and
        `extra` (a channel's `reply_to`) work as for `submit`.
        """
        session = await self.session(session_id)
        job = job_id or new_id("compact")
        await self.queue.enqueue(
            job,
            TURN_KIND,
            {**(extra or {}), "session": session.id, "compact": True},
            serial_key=session.id,
            max_attempts=TURN_MAX_ATTEMPTS,
        )
        return job

    async def stop_turn(self, turn_id: str) -> str | None:
        """Stop a queued or running turn; returns its status after the request."""
        if self._turn_pool is not None and self._turn_pool.stop_job(turn_id):
            return "running"
        return await self.queue.cancel(turn_id)

    async def wait_turn(self, turn_id: str, *, poll: float = 0.5) -> TurnOutcome:
        """Wait until the turn finishes here or in another process, and report it."""
        with self.bus.subscribe(
            lambda e: e.kind == "job.finished" and e.data.get("job") == turn_id, maxsize=4
        ) as finished:
            while True:
                job = await self.queue.get(turn_id)
                if job is None:
                    raise NotFound(f"turn {turn_id!r} not found")
                if job.finished:
                    return self._outcome(job)
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_within(finished.get(), poll)

    def _outcome(self, job: Job) -> TurnOutcome:
        result = job.result or {}
        return TurnOutcome(
            session=str(job.payload.get("session", "")),
            turn=job.id,
            status=job.status,
            reply=str(result.get("reply", "")),
            error=job.error,
        )

    async def list_sessions(
        self, agent: str | None = None, *, limit: int = 50, archived: bool = False
    ) -> list[Session]:
        if agent is not None:
            self.config.agent(agent)
        return await self.transcripts.list_sessions(agent, limit=limit, archived=archived)

    async def messages(self, session_id: str) -> list[StoredMessage]:
        await self.session(session_id)
        return await self.transcripts.messages(session_id)

    async def queue_depth(self) -> dict[tuple[str, str], int]:
        return await self.queue.depth()

    # -- facade: approvals waiting in any process of this home ---------------------------

    async def waiting_approvals(self) -> list[WaitingApproval]:
        """Every call waiting for approval on this home, oldest first.

        This process's hub requests (terminal, web chat, chat turns run here) and the
        chat approvals that turns of other processes wait on (recorded in control.db),
        each listed once with where it was asked and whether it is `local`.
        """
        local = self.approvals.pending
        chat = await self._chat_approvals()
        asked_in_chat = {approval.id for approval in chat}
        where: dict[str, str] = {}
        for request in local:
            if request.id not in asked_in_chat:
                session = await self.transcripts.get_session(request.session)
                where[request.id] = "web" if session and session.origin == "web" else TERMINAL
        return merge_waiting(local, chat, since=self.approvals.since, where=where, now=time.time())

    async def answer_approval(self, approval_id: str, answer: str, by: str) -> bool:
        """Answer a waiting approval wherever it waits; False when it no longer waits.

        `answer` is allow_once, allow_session or deny (HabakkukError otherwise). A
        request of this process's hub is answered there; a chat approval that a turn
        of another process waits on is answered in control.db, where that turn finds
        it (the first answer wins). The chat is told who answered in its place
        ("Approved from the dashboard.").
        """
        if answer not in APPROVAL_VERBS:
            raise HabakkukError(
                f"approval answer {answer!r}: expected allow_once, allow_session or deny"
            )
        waiting = {a.id: a for a in await self.waiting_approvals()}.get(approval_id)
        if waiting is None:
            return False
        if waiting.local:
            answered = self.approvals.answer(approval_id, answer, by=by)  # type: ignore[arg-type]
        else:
            store = await self._prompt_store()
            answered = await store.answer_waiting_approval(approval_id, answer, by)
        channel = waiting.where.partition(":")[0]
        if answered and channel in self.config.channels:
            await self.outbox.send_text(
                f"prompt-answer:{approval_id}",
                waiting.where,
                f"{APPROVAL_VERBS[answer]} from the {by}.",
            )
        return answered

    @property
    def outbox(self) -> Outbox:
        """Where messages to chats are queued: the running channels, else control.db's queue."""
        from habakkuk.channels.outbox import Outbox

        return self.channels or Outbox(self.queue)

    async def _prompt_store(self) -> Any:
        """The channel tables of control.db (the running channels' store when they run here)."""
        if self.channels is not None:
            return self.channels.store
        if self._prompts is None:
            from habakkuk.channels.store import ChannelStore

            store = ChannelStore(self.queue.db)
            if self.config.channels:
                # Creates the tables, or adds the columns an older version's file lacks.
                await store.ensure()
            self._prompts = store
        return self._prompts

    async def _chat_approvals(self) -> list[WaitingApproval]:
        """Chat approvals waiting in control.db (asked by this process or another)."""
        import sqlite3

        store = await self._prompt_store()
        try:
            prompts = await store.waiting_approvals()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            return []  # no channel ever ran on this home
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
            for prompt in prompts
        ]

    # -- facade: what the HTTP server needs ------------------------------------------------

    async def channel_states(self) -> list[dict[str, Any]]:
        """Every configured channel account with its last recorded state.

        Keys: account, type, state ("never started" when no process ran it),
        detail, restarts, since and last_beat (epoch seconds or None).
        """
        if not self.config.channels:
            return []
        import sqlite3

        from habakkuk.channels.store import ChannelStore

        store = self.channels.store if self.channels is not None else ChannelStore(self.queue.db)
        try:
            statuses = await store.statuses()
        except sqlite3.OperationalError:  # no process has run a channel yet: no table
            statuses = {}
        states = []
        for name, channel in sorted(self.config.channels.items()):
            status = statuses.get(name)
            states.append(
                {
                    "account": name,
                    "type": channel.type,
                    "state": status.state if status else "never started",
                    "detail": status.detail if status else "",
                    "restarts": status.restarts if status else 0,
                    "since": status.since if status else None,
                    "last_beat": status.last_beat if status else None,
                }
            )
        return states

    async def usage_since(self, since: float, *, agent: str | None = None) -> list[UsageTotal]:
        """Usage totals by model and agent of the calls at or after `since` (epoch seconds)."""
        if self.usage is None:
            return []
        return await self.usage.totals(since=since, agent=agent)

    async def start_http(self, listen: str | None = None) -> Any:
        """Serve the config's `http` section (or `listen`, e.g. 127.0.0.1:0 in tests).

        Returns the running `habakkuk.server.app.HttpServer` (its `url` names the
        bound port). While it runs, the dashboard can answer approvals, so turns
        submitted as attended wait for it.
        """
        from habakkuk.engine.config import HttpConfig, parse_listen
        from habakkuk.engine.errors import ConfigError
        from habakkuk.server.app import HttpServer

        if self._http is not None:
            return self._http
        config = self.config.http or HttpConfig()
        token = None
        if config.token_env:
            token = self.env.get(config.token_env)
            if not token:
                raise ConfigError(
                    f"http.token_env: the variable {config.token_env} is not set "
                    "(process environment or HOME/.env)"
                )
        host, port = (config.host, config.port)
        if listen is not None:
            try:
                host, port = parse_listen(listen)
            except ValueError as exc:
                raise ConfigError(f"http listen address: {exc}") from None
        server = HttpServer(self, config, token)
        await server.start(host, port)
        self._http = server
        self._http_lease = asyncio.create_task(self._hold_http_lease(), name="http-lease")
        self._interactive_before_http = self.interactive
        self.interactive = True
        return server

    async def serve_http(
        self, report: Callable[[str], None], *, retry_seconds: float = 5.0
    ) -> None:
        """Serve the config's `http` section; when another process holds the address
        (a `--serve` beside this terminal), stand by and take over once it is free.

        Config errors (a missing token) raise at once; `report` gets one line for each
        change of state.
        """
        import errno

        def announce(server: Any) -> None:
            report(f"HTTP on {server.url} (dashboard {server.url}/app/)")

        try:
            announce(await self.start_http())
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        listen = self.config.http.listen if self.config.http else "the address"
        report(f"HTTP: {listen} is in use (another Habakkuk serving?); standing by")

        async def standby() -> None:
            while self._http is None:
                await asyncio.sleep(retry_seconds)
                try:
                    announce(await self.start_http())
                except OSError as exc:
                    if exc.errno != errno.EADDRINUSE:
                        report(f"HTTP server not started: {exc}")
                        return

        self._http_standby = asyncio.create_task(standby(), name="http-standby")

    async def _hold_http_lease(self) -> None:
        """Name this process as the HTTP listener's holder in control.db while it serves."""
        import socket

        owner = f"pid {os.getpid()} on {socket.gethostname()}"
        store = await self._prompt_store()
        await store.ensure()
        try:
            while True:
                await store.acquire_lease(HTTP_LEASE, owner, HTTP_LEASE_SECONDS)
                await asyncio.sleep(HTTP_LEASE_SECONDS / 3)
        finally:
            with contextlib.suppress(Exception):  # closing: the lease runs out by itself
                await store.release_lease(HTTP_LEASE, owner)

    async def http_listener(self) -> HttpListener:
        """Who serves the config's HTTP listener: this process, another one, or nobody."""
        import sqlite3

        if self._http is not None:
            return HttpListener("serving", str(self._http.url), f"this process (pid {os.getpid()})")
        if self.config.http is None:
            return HttpListener("off", "", "")
        listen = self.config.http.listen
        try:
            holder = await (await self._prompt_store()).lease_holder(HTTP_LEASE) or ""
        except sqlite3.OperationalError:  # no process ever served: no table yet
            holder = ""
        standing_by = self._http_standby is not None and not self._http_standby.done()
        return HttpListener("stand-by" if standing_by else "elsewhere", listen, holder)

    def mcp_states(self) -> list[McpState]:
        """Each configured MCP server's link in this process ("not started" before it is)."""
        links = {status.name: status for status in (self.mcp.status() if self.mcp else [])}
        states = []
        for name in sorted(self.config.mcp_servers):
            link = links.get(name)
            if link is None:
                states.append(McpState(name, "not started", ""))
                continue
            detail = link.error or (f"{len(link.tools)} tool(s)" if link.state == "up" else "")
            states.append(McpState(name, link.state, " ".join(str(detail).split())))
        return states

    async def overview(self) -> Overview:
        """The control room in one read: queue, jobs, errors, channels, MCP, usage, HTTP."""
        from datetime import datetime
        from zoneinfo import ZoneInfo

        try:
            zone = ZoneInfo(self.config.timezone)
        except (KeyError, ValueError):
            zone = ZoneInfo("UTC")
        midnight = datetime.now(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        cutoff = time.time() - OVERVIEW_ERROR_DAYS * 86400
        failures = await self.recent_failures(OVERVIEW_ERRORS)
        return Overview(
            queue=await self.queue_depth(),
            running=self.running_jobs(),
            upcoming=await self.upcoming_jobs(10),
            errors=[job for job in failures if job.updated_at >= cutoff],
            channels=await self.channel_states(),
            mcp=self.mcp_states(),
            usage_today=await self.usage_since(midnight.timestamp()),
            approvals=len(await self.waiting_approvals()),
            http=await self.http_listener(),
        )

    async def stop_http(self) -> None:
        """Stop the HTTP server (and any standby) if it runs."""
        if self._http_standby is not None:
            self._http_standby.cancel()
            await asyncio.gather(self._http_standby, return_exceptions=True)
            self._http_standby = None
        if self._http_lease is not None:
            self._http_lease.cancel()
            await asyncio.gather(self._http_lease, return_exceptions=True)
            self._http_lease = None
        if self._http is not None:
            server, self._http = self._http, None
            self.interactive = bool(getattr(self, "_interactive_before_http", False))
            await server.stop()

    async def seed_session(
        self, session_id: str, history: Sequence[tuple[str, str] | Message]
    ) -> None:
        """Append earlier messages ((role, text) or whole messages) to a new session
        before its first turn."""
        from habakkuk.engine.sessions import plain_text_message

        await self.session(session_id)
        for item in history:
            message = item if isinstance(item, Message) else plain_text_message(*item)
            await self.transcripts.append(session_id, message)

    async def turn_outcome(self, turn_id: str) -> TurnOutcome | None:
        """The turn's state now (queued, running, done, failed, cancelled), or None."""
        job = await self.queue.get(turn_id)
        return self._outcome(job) if job is not None else None

    async def save_attachment(self, agent: str, filename: str, data: bytes) -> str:
        """Store an upload as a blob and copy it to the agent's workspace/inbox/.

        Returns the path relative to the workspace. The name is reduced to a safe
        base name; an existing different file keeps its name and the upload gets
        a numbered one.
        """
        import re

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

    # -- facade: what the terminal app needs ---------------------------------------------

    async def rename_session(self, session_id: str, title: str) -> Session:
        """Set a session's title by hand (a hand-set title is never replaced)."""
        await self.session(session_id)
        await self.transcripts.set_title(session_id, title.strip(), "user")
        return await self.session(session_id)

    async def archive_session(self, session_id: str, archived: bool = True) -> None:
        """Hide a session from the recent list (or bring it back)."""
        await self.session(session_id)
        await self.transcripts.set_archived(session_id, archived)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session for good: its transcript, search rows and state (todos, /model,
        /think). NotFound when unknown; HabakkukError while one of its turns is active."""
        await self.session(session_id)
        if await self.active_turns(session_id):
            raise HabakkukError(f"session {session_id!r} has a turn queued or running")
        await self.transcripts.delete_sessions([session_id])
        await self._state_store().forget_sessions([session_id])

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
        await self._state_store().copy_settings(session_id, fork.id)
        return fork

    async def rewind_session(self, session_id: str, turns: int = 1) -> Session:
        """/rewind N: fork the session without its last `turns` messages the user typed
        (and everything after them); the original stays as it was."""
        from habakkuk.conversation.commands import typed_seqs

        await self.session(session_id)
        typed = typed_seqs(await self.transcripts.messages(session_id))
        if len(typed) < turns:
            had = f"only {len(typed)}" if typed else "no"
            raise HabakkukError(f"this session has {had} message(s) of yours to rewind")
        fork = await self.transcripts.fork(session_id, new_id("ses"), upto_seq=typed[-turns] - 1)
        await self._state_store().copy_settings(session_id, fork.id)
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
        from habakkuk.engine.export import export_transcript

        if fmt not in ("md", "json", "html"):
            raise ValueError(f"unknown export format {fmt!r} (md, json, html)")
        session = await self.session(session_id)
        messages = await self.messages(session_id)
        compaction = await self.transcripts.latest_compaction(session_id)
        return export_transcript(session, messages, fmt, compaction)  # type: ignore[arg-type]

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

    async def active_turns(self, session_id: str) -> list[Job]:
        """The session's queued or running turns, oldest first."""
        return [j for j in await self.queue.active_for(session_id) if j.kind == TURN_KIND]

    def running_jobs(self) -> list[Job]:
        """Jobs this process's pools are running now."""
        return [job for pool in self._pools for job in pool.running_jobs]

    async def upcoming_jobs(self, limit: int = 10) -> list[Job]:
        """Jobs waiting for their time (the daily retention sweep, retries), soonest first."""
        return await self.queue.upcoming(limit)

    async def recent_failures(self, limit: int = 10) -> list[Job]:
        """Jobs that failed for good, newest first."""
        return await self.queue.recent_failures(limit)

    async def channel_health(self) -> dict[str, Any]:
        """Each chat channel account's status row (state, holder, since, detail), by account."""
        if self.channels is None:
            return {}
        statuses: dict[str, Any] = await self.channels.store.statuses()
        return statuses
