"""The composition root: config -> stores -> providers -> tools -> services -> workers.

`Runtime` builds and wires everything below it, starts and stops every worker, and
exposes the domain services as typed attributes (`sessions`, `turns`, `settings`,
`approvals`, `memory`, `checkpointing`, `ledger`, `control`, `http`). Each surface depends
on a narrow Protocol (ServerHost, McpHost, the commands' Services, RuntimeFacade,
TerminalBackend) holding the services it uses, each typed by the service's one Protocol
(`turns: TurnsAccess`), so one object satisfies them all and no method is re-bound here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from habakkuk.engine import retention as _retention  # noqa: F401  # the sweep's kind
from habakkuk.engine.agent.requests import TURN_KIND, session_of
from habakkuk.engine.agent.titles import title_pool
from habakkuk.engine.agent.turn import TurnDeps, TurnRunner
from habakkuk.engine.agent.turn_access import TurnOutcome
from habakkuk.engine.config import Config, load_config
from habakkuk.engine.databases import HomeDatabases, open_databases
from habakkuk.engine.events import EventBus, JobFinished
from habakkuk.engine.home import Environment, Home, default_home
from habakkuk.engine.hooks import Hooks
from habakkuk.engine.jobs import Job, JobQueue
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.llm.router import Router
from habakkuk.engine.logfile import RotatingJsonHandler
from habakkuk.engine.logsetup import install_logging, uninstall_logging
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.engine.pools import Pool
from habakkuk.engine.redact import REDACTOR
from habakkuk.engine.store import BlobStore
from habakkuk.knowledge import review_kinds as _kinds  # noqa: F401  # the review's job kinds
from habakkuk.protocols.acp import kind as _acp_kind  # noqa: F401  # editors' turns
from habakkuk.protocols.nodes.devices import build_devices
from habakkuk.server.listener import Listener
from habakkuk.services.approvals import Approvals
from habakkuk.services.board import build_board
from habakkuk.services.budget import Budget
from habakkuk.services.checkpoints import WorkspaceCheckpoints
from habakkuk.services.goals import Goals
from habakkuk.services.logs import HomeLogs
from habakkuk.services.memory import build_memory
from habakkuk.services.overview import ControlRoom
from habakkuk.services.process_notices import ProcessNotices
from habakkuk.services.sandboxes import build_processes, end_leftovers
from habakkuk.services.schedules import build_schedules
from habakkuk.services.sessions import Sessions, new_id
from habakkuk.services.settings import SessionSettings
from habakkuk.services.skills import build_skills
from habakkuk.services.toolset import (
    ToolServices,
    browser_fleet,
    build_tools,
    chats_run,
    offered_meetings,
)
from habakkuk.services.turns import Turns
from habakkuk.services.usage import UsageLedger
from habakkuk.services.voice import Voice

if TYPE_CHECKING:
    from habakkuk.channels.outbox import Outbox
    from habakkuk.channels.service import ChannelService
    from habakkuk.engine.tracing import Tracing

log = logging.getLogger(__name__)

__all__ = ["Runtime", "TurnOutcome", "new_id"]


class Runtime:
    """One home's running system: stores, router, tools, services, worker pools."""

    def __init__(
        self,
        home: Home,
        config: Config,
        providers: ProviderHub,
        dbs: HomeDatabases,
    ):
        control_db, transcripts, state, usage = dbs.control, dbs.transcripts, dbs.state, dbs.usage
        self.storage = dbs.storage  # SQLite files or a PostgreSQL server, chosen at start
        self.home = home
        self.config = config
        self.env = providers.env
        self.bus = EventBus()
        self.queue = JobQueue(
            control_db,
            lease_seconds=config.workers.lease_seconds,
            hosted_agents=frozenset(config.serve.agents or ()) or None,  # None: every agent
        )
        self.transcripts = transcripts
        self.blobs = BlobStore(
            home.blobs_dir, shared=control_db if dbs.storage.dialect == "postgres" else None
        )
        self.providers = providers
        self.usage = usage
        self.ledger = UsageLedger(usage)
        # Spending limits: every model call is reserved against them first (budget.py).
        self.budget = Budget(config, usage, state, queue=self.queue, outbox=lambda: self.outbox,
                             sessions=lambda: self.sessions)  # fmt: skip
        self.logs = HomeLogs(home.root)  # habakkuk.log, read for the Logs screen
        self.router = Router(
            self.providers, on_usage=self.ledger.record, before_call=self.budget.before_call
        )
        self.hooks = Hooks(config.hooks, home.root)
        self.state = state
        self.memory = build_memory(home, config, self.env)  # a knowledge MemoryAccess
        self.skills = build_skills(home, config, self.memory)  # a knowledge SkillsAccess
        self.notices = ProcessNotices(self.queue, lambda: self.turns)  # notify: true exits
        self.processes = build_processes(home, config, self.env, self.notices.exited)  # sandboxes
        self.browsers = browser_fleet(home.root, config)  # the agents' browsers, on first use
        self._pools: list[Pool] = []
        self._turn_pool: Pool | None = None
        self.turn_runner: TurnRunner | None = None  # once workers start (editors' turns use it)
        self._maintenance: list[asyncio.Task[None]] = []
        self.mcp: Any = None  # habakkuk.protocols.mcp.manager.McpManager once started
        self._mcp_start: asyncio.Task[None] | None = None
        self.channels: ChannelService | None = None  # while the channels run
        self.tracing: Tracing | None = None  # telemetry: spans to an OTLP collector
        self.log_handler: RotatingJsonHandler | None = None  # habakkuk.log, once opened

        # -- the services ------------------------------------------------------------
        self.sessions = Sessions(
            config, home, transcripts, self.queue, self.blobs, state, hooks=self.hooks, bus=self.bus
        )
        self.sessions.memory, self.sessions.skills = self.memory, self.skills  # prompt lists
        self.turns = Turns(
            self.queue, self.bus, self.sessions, lambda: self._pools, lambda: self._turn_pool
        )
        self.settings = SessionSettings(config, self.sessions, usage)
        self.goals = Goals(state.db, self.queue, self.bus, self.turns, config.language_of)
        self.checkpointing = WorkspaceCheckpoints(config, home, self.queue, self.sessions)
        self.schedules = build_schedules(self.queue, config)  # a work SchedulesAccess
        # The board (a work BoardAccess); a card's run in this process stops at once.
        self.board = build_board(self.queue, config, self.bus, home, self._stop_local_job)
        # Waiting approvals; turns marked attended ask a human while someone attends.
        self.approvals = Approvals(
            self.bus,
            config=config,
            transcripts=transcripts,
            control_db=control_db,
            channels=lambda: self.channels,
            outbox=lambda: self.outbox,
        )
        self.http = Listener(
            self,
            leases=self.approvals.store,
            recorded_leases=self.approvals.recorded_store,
            attend=self.approvals.attach,
        )
        self.control = ControlRoom(
            config,
            turns=self.turns,
            usage=self.ledger,
            approvals=self.approvals,
            channels=lambda: self.channels,
            mcp=lambda: self.mcp,
            http=self.http.describe,
            goals=self.goals,
        )
        self.nodes = NodeRegistry(control_db, agents=config.serve.agents)  # joins in workers
        # The overview's counts, its spend against the limits and its nodes.
        self.control.schedules, self.control.board = self.schedules, self.board
        self.control.budget, self.control.nodes = self.budget, self.nodes
        from habakkuk.work.delegation import Delegation  # sub-agents: a DelegationAccess

        self.delegation = Delegation(
            config, self.queue, self.bus, self.sessions, transcripts, self.turns
        )
        self.devices = build_devices(config.nodes, dbs.storage, self.queue, self.bus)  # or None
        # The built-in tools, each toolset bound to the services above it uses.
        self.tools = build_tools(
            config,
            ToolServices(
                processes=self.processes,
                process_started=self.notices.started,
                memory=self.memory,
                skills=self.skills,
                schedules=self.schedules,
                board=self.board,
                delegation=self.delegation,
                channels=lambda: self.channels,
                usage=self.ledger,
                env=self.env,
                nodes=self.devices,
                browsers=self.browsers,
                meetings=offered_meetings(home.root, self.queue, config),  # attended by serve
            ),
        )
        self.tools.hooks = self.hooks
        self.voice = Voice(config, self.env)  # the terminal's push-to-talk key

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    async def open(
        cls, home: Home | None = None, config: Config | None = None, hub: ProviderHub | None = None
    ) -> Runtime:
        """Open `home` (default: $HABAKKUK_HOME) on its config, or on `hub`'s (made before)."""
        home = home or Home(default_home())
        config = hub.config if hub is not None else config or load_config(home)
        home.prepare()
        hub = hub or ProviderHub(config, Environment(home.env_path), home.root)
        # habakkuk.log, and the redactor told this home's secrets (engine/logsetup.py).
        handler = install_logging(home.root, config, hub.env)
        for problem in config.plugin_problems:  # a plugin that failed to load: never fatal
            log.warning("%s", problem)
        runtime = cls(home, config, hub, await open_databases(home, config))
        runtime.log_handler = handler
        await runtime.settings.adopt_legacy_model_choices()
        # Keys `habakkuk setup` put in the OS keyring (slow: off the loop); old process logs.
        await asyncio.to_thread(runtime.providers.prefetch_secrets)  # secrets.refs, if any
        await asyncio.to_thread(runtime.providers.load_keyring)
        REDACTOR.add_values(hub.keyring_values())
        await asyncio.to_thread(runtime.processes.cleanup_old_logs)
        await end_leftovers(home, runtime.processes)  # what a killed Habakkuk left running
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
        """Tool search: on-demand tools, and agents with more tools than tool_search_over."""
        from habakkuk.protocols.mcp.toolsearch import ToolSearchView

        return ToolSearchView(self.tools)

    def _launch_mcp(self) -> None:
        if self.mcp is None and self.config.mcp_servers:
            from habakkuk.protocols.mcp.manager import START_WAIT, McpManager

            self.mcp = McpManager(self.config, self.env, self.home, self.tools)
            self._mcp_start = asyncio.create_task(self.mcp.start(START_WAIT))

    def start_workers(self, *, channels: bool = True, maintenance: bool = False) -> None:
        """Start the worker pools; `channels`: this process serves the home, so the chats
        and the schedules' script runs too (a script runs at most once: `run`, compact
        and the MCP stdio server, which stop when their own work is done, leave them to
        serve and the app); `maintenance`: retention, review, the ticker."""
        if self._pools:
            return
        # Each agent's memory.db and history.db open now, in the background: a first message
        # does not wait for them (the first turn used to open them on its way).
        self.memory.open_ahead()
        if channels and chats_run(self.config):
            self.channel_service()  # the web chat is a channel too
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
                approver_for=lambda session, request: self.approvals.turn_approver(
                    session, request, self.router
                ),
                hooks=self.hooks,
                state=self.state,
                checkpoint_for=self.checkpointing.snapshot_for,
                tool_view=self._tool_view(),
            )
        )
        self.turn_runner = runner
        self._turn_pool = Pool(
            self.queue,
            [TURN_KIND],
            runner.run_to_done,
            concurrency=self.config.workers.turns,
            on_finished=self._job_finished,
        )
        self._pools.append(self._turn_pool)
        if maintenance:
            # Imported here: only processes that run maintenance need these loops.
            from habakkuk.knowledge.review_wiring import memory_review_pool
            from habakkuk.services.maintenance import retention_pool, start_maintenance

            self._pools.append(retention_pool(self, self._job_finished))

            self._maintenance = start_maintenance(self)
            self._pools.append(memory_review_pool(self, on_finished=self._job_finished))
            self._pools.append(title_pool(self.queue, runner.deps, on_finished=self._job_finished))
        # Schedule slots, board cards, sub-agents: each kind its own pool (work/wiring.py).
        from habakkuk.work.wiring import WorkRuns

        work = WorkRuns(self, runner, on_finished=self._job_finished, scripts=channels)
        self._pools.extend(work.pools + (self.devices.pools() if self.devices else []))
        if self.config.telemetry is not None:  # spans to a collector: imported only then
            from habakkuk.engine.tracing import open_tracing

            cost = self.ledger.call_cost
            self.tracing = open_tracing(self.config, self.env, self.bus, self.router, cost)
        for pool in self._pools:
            pool.start()
        self._maintenance.extend(work.start_loops(maintenance=maintenance))
        self.goals.start()  # the steps a crash cut short, taken again
        if self.channels is not None:
            self.channels.start()

    async def close(self) -> None:
        """Stop the HTTP server and the workers (leases released), close the stores."""
        await self.http.stop()
        for task in self._maintenance:
            task.cancel()
        await asyncio.gather(*self._maintenance, return_exceptions=True)
        if self.channels is not None:
            await self.channels.stop()
        for pool in self._pools:
            await pool.stop()
        self._pools.clear()
        if self.tracing is not None:
            await self.tracing.stop()  # the last turns' spans, exported (bounded)
        if self._mcp_start is not None:
            self._mcp_start.cancel()
            await asyncio.gather(self._mcp_start, return_exceptions=True)
        if self.mcp is not None:
            await self.mcp.close()
        # The commands, and what the toolsets hold open (the agents' browsers and desktops).
        await asyncio.gather(self.processes.shutdown(), self.tools.close())
        await self.goals.settled()  # the steps after the last turns, before the stores close
        await self.budget.settled()
        await self.hooks.drain()
        # The stores close together: each may checkpoint its WAL as it closes (an fsync).
        stores = (self.usage, self.state, self.memory, self.transcripts, self.queue.db)
        closing = (store.close() for store in (*stores, self.devices) if store is not None)
        for ended in await asyncio.gather(
            self.providers.aclose(), *closing, return_exceptions=True
        ):
            if isinstance(ended, BaseException):  # every store closed first, as far as it could
                raise ended
        uninstall_logging(self.log_handler)

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def channel_service(self) -> Any:
        """The chat channels (channels.service.ChannelService), made on first use."""
        from habakkuk.channels.service import ChannelService  # imported only when used

        self.channels = self.channels or ChannelService(self)
        return self.channels

    def job_settled(self, job: Job) -> None:
        """Publish `job.finished` for a job a pool settled (done, failed or cancelled)."""
        self.bus.publish(
            JobFinished(
                session=session_of(job),
                job=job.id,
                job_kind=job.kind,
                status=job.status,
                attempts=job.attempts,
            )
        )

    def _stop_local_job(self, job_id: str) -> bool:
        """Stop a job one of this process's pools runs now; False when none does."""
        return any(pool.stop_job(job_id) for pool in self._pools)

    def _job_finished(self, job: Job) -> None:
        self.job_settled(job)
        self.goals.turn_finished(job)  # a session's goal steps after each of its turns
        self.budget.turn_finished(job)  # a chat told of a pause or of 80 % spent, once
        if self.channels is not None:
            self.channels.turn_finished(job)

    @property
    def outbox(self) -> Outbox:
        """Where messages to chats are queued: the running channels, else control.db's queue."""
        from habakkuk.channels.outbox import Outbox

        return self.channels or Outbox(self.queue)
