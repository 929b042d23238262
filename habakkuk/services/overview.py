"""The control room: queue, jobs, errors, channels, MCP links, usage, approvals, HTTP and
the home's nodes.

`ControlAccess` is its Protocol, beside it: the surfaces above the services (the terminal's
screens, the server) read it through their hosts' Protocols.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.engine.overview import (
    NEVER_STARTED,
    OVERVIEW_ERROR_DAYS,
    OVERVIEW_ERRORS,
    ChannelHealth,
    ChannelState,
    ConfigState,
    HttpListener,
    McpState,
    Overview,
)
from habakkuk.work.board_types import OPEN_STATUSES

# The overview's security audit is run again after this many seconds.
AUDIT_SECONDS = 60.0

if TYPE_CHECKING:
    from habakkuk.engine.audit_findings import Finding
    from habakkuk.engine.budget_access import BudgetAccess
    from habakkuk.engine.config import Config
    from habakkuk.engine.goals import GoalsAccess
    from habakkuk.engine.home import Home
    from habakkuk.engine.nodes import NodeRegistry
    from habakkuk.engine.pools import PoolState
    from habakkuk.work.board_types import BoardAccess
    from habakkuk.work.schedule_types import SchedulesAccess

    from .approvals import Approvals
    from .doctor import Check
    from .turns import Turns
    from .usage import UsageLedger


class ControlAccess(Protocol):
    """What the surfaces read of the control room (ControlRoom): the overview screen, the
    dashboard and its config view."""

    async def overview(self) -> Overview:
        """The control room in one read."""
        ...

    async def channel_states(self) -> list[ChannelHealth]:
        """Every configured channel account's health (channels.health)."""
        ...

    def channel_states_now(self) -> list[ChannelState]:
        """Every configured channel account with the state this process's supervisor
        holds in memory (no query)."""
        ...

    def mcp_states(self) -> list[McpState]:
        """Each configured MCP server's link in this process."""
        ...

    def pool_states(self) -> list[PoolState]:
        """Each of this process's worker pools, what it does now."""
        ...

    async def listener(self) -> HttpListener:
        """Who serves the HTTP listener: this process, another one, or nobody."""
        ...

    async def doctor(self, home: Home) -> list[Check]:
        """The doctor's checks of the home, in order."""
        ...


class ControlRoom:
    """What the overview screen, the dashboard and /metrics read in one place."""

    def __init__(
        self,
        config: Config,
        *,
        turns: Turns,
        usage: UsageLedger,
        approvals: Approvals,
        channels: Callable[[], Any],
        mcp: Callable[[], Any],
        http: Callable[[], Awaitable[HttpListener]],
        goals: GoalsAccess | None = None,
    ):
        self.config = config
        self.turns = turns
        self.usage = usage
        self.approvals = approvals
        self._channels = channels  # the running ChannelService, or None
        self._mcp = mcp  # the McpManager once started, or None
        self._http = http
        self.goals = goals  # the running /goals the overview lists
        # The runtime hands in its schedules once built; without them the counts are 0.
        self.schedules: SchedulesAccess | None = None
        # Likewise the board (runtime.board), for `open_cards`.
        self.board: BoardAccess | None = None
        # And this process's node (runtime.nodes), through which every node is read.
        self.nodes: NodeRegistry | None = None
        # The spending limits (runtime.budget), for the spend against them.
        self.budget: BudgetAccess | None = None
        # config.yaml's edits not applied here; the hot reload (services/hot_reload.py)
        # replaces it as the file changes.
        self.config_state = ConfigState()
        # The last audit (monotonic time, findings): `findings` reuses it for a while.
        self._audit: tuple[float, list[Finding]] | None = None

    async def channel_states(self) -> list[ChannelHealth]:
        """Every configured channel account's health, from its recorded row and lease
        (channels.health: "never started" when no process ran it, "not running" when no
        live process holds it, "silent" when connected without a recent beat)."""
        if not self.config.channels:
            return []
        from habakkuk.channels.health import channel_health

        store = await self.approvals.recorded_store()
        if store is None:
            return channel_health(self.config.channels, {}, {})
        statuses, holders = await store.statuses(), await store.live_holders()
        return channel_health(self.config.channels, statuses, holders)

    def channel_states_now(self) -> list[ChannelState]:
        """Every configured channel account with the state this process's supervisor
        holds in memory: what /healthz reports, without a query.

        An account this process does not run (no channel service here, or the web
        chat's while no HTTP server runs) is "never started"; one another process
        holds is "standby". /readyz reads the recorded states instead.
        """
        if not self.config.channels:
            return []
        service = self._channels()
        held: dict[str, str] = service.supervisor.states() if service is not None else {}
        return [
            ChannelState(name, channel.type, held.get(name, NEVER_STARTED))
            for name, channel in sorted(self.config.channels.items())
        ]

    async def channel_health(self) -> dict[str, Any]:
        """Each chat channel account's status row (state, holder, since, detail), by account."""
        channels = self._channels()
        if channels is None:
            return {}
        statuses: dict[str, Any] = await channels.store.statuses()
        return statuses

    def pool_states(self) -> list[PoolState]:
        """Each of this process's worker pools, what it does now (readiness)."""
        return self.turns.pool_states()

    async def listener(self) -> HttpListener:
        """Who serves the HTTP listener (the overview's `http`)."""
        return await self._http()

    def mcp_states(self) -> list[McpState]:
        """Each configured MCP server's link in this process ("not started" before it is)."""
        manager = self._mcp()
        links = {status.name: status for status in (manager.status() if manager else [])}
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
        failures = await self.turns.recent_failures(OVERVIEW_ERRORS, errors_only=True)
        return Overview(
            queue=await self.turns.queue_depth(),
            running=self.turns.running_jobs(),
            upcoming=await self.turns.upcoming_jobs(10),
            errors=[job for job in failures if job.updated_at >= cutoff],
            channels=await self.channel_states(),
            mcp=self.mcp_states(),
            usage_today=await self.usage.usage_since(midnight.timestamp()),
            approvals=len(await self.approvals.waiting()),
            http=await self._http(),
            schedules=await self.schedules.counts() if self.schedules is not None else (0, 0),
            open_cards=await self.open_cards(),
            unsent=await self.turns.unsent_deliveries(cutoff),
            nodes=await self.nodes.nodes() if self.nodes is not None else [],
            config=self.config_state,
            goals=await self.goals.running() if self.goals is not None else [],
            budget=await self.budget.status() if self.budget is not None else None,
            findings=await self.findings(),
        )

    async def findings(self) -> list[Finding]:
        """The security audit of the home (services/audit.py), read at most once every
        AUDIT_SECONDS: it walks the home, and the overview refreshes every few seconds."""
        import asyncio

        from habakkuk.engine.home import Home

        from .audit import audit

        now = time.monotonic()
        if self._audit is None or now - self._audit[0] >= AUDIT_SECONDS:
            home = Home(self.config.path.parent)
            self._audit = (now, await asyncio.to_thread(audit, home, self.config))
        return self._audit[1]

    async def open_cards(self) -> int:
        """Cards todo, doing or blocked (0 without a board)."""
        if self.board is None:
            return 0
        counts = await self.board.counts()
        return sum(counts.get(status, 0) for status in OPEN_STATUSES)

    async def doctor(self, home: Home) -> list[Check]:
        """The doctor's checks of `home` (services.doctor, as `habakkuk doctor` prints them),
        for the dashboard's config view."""
        from .doctor import run_checks

        return await run_checks(home)
