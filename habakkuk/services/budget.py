"""The budget: spending limits enforced before each model call (spec 001 "Budget").

`Budget.before_call` is the router's pre-call hook: every call of every purpose (turns,
compaction, the reviewer, titles, sub-agents, schedules, cards, the memory review)
passes through it. It reserves the call's worst case (engine/llm/budget.py) against the
install's and the call's agent's daily, monthly and per-turn limits, or refuses it with
BudgetPaused, whose message the turn ends with. A call that would fit were it not for
the reservations of calls still running waits for them to settle; one that would not
fit even then is refused, and the scope is paused until the period resets, the config
raises the limit or the owner's /budget raise does.

Spend is the rows of usage.db in the period (all of them: model calls, generations and
web searches), read at most every REFRESH_SECONDS and kept in memory between reads with
the calls this process settled since, so a check is a few additions. Several processes
may share a home: each re-reads what the others wrote at that interval. The month is
read once a day up to today's midnight; today's rows are summed whole every
FULL_READ_SECONDS and, between, only the rows added since (a range of the primary key).

Raises are kept in state.db (settings of the pseudo-session STATE_SESSION), so
`habakkuk run "/budget raise 5"` lifts a pause in the serving process at its next read.
The pause and the 80 % warning are told to each chat once per period: the message is a
delivery whose job id derives from the chat and the period, so every process and every
retry queue it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from habakkuk.engine.agent.requests import TURN_KIND, turn_request
from habakkuk.engine.budget_access import BudgetStatus, PeriodKind, PeriodSpend, ScopeSpend
from habakkuk.engine.databases import login_providers
from habakkuk.engine.errors import BadInput
from habakkuk.engine.i18n import t, use_language
from habakkuk.engine.llm.budget import (
    INSTALL,
    PERIOD_KINDS,
    BudgetPaused,
    Hold,
    Key,
    Ledger,
    Limits,
    periods_at,
    worst_case,
)
from habakkuk.engine.llm.pricing import PriceTable
from habakkuk.engine.silent import SILENT
from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    from habakkuk.engine.config import Config, ModelRef
    from habakkuk.engine.jobs import Job, JobQueue
    from habakkuk.engine.llm.router import Caller, Settle
    from habakkuk.engine.llm.types import ModelRequest, Usage
    from habakkuk.engine.llm.usage import UsageStore
    from habakkuk.engine.outbox_access import TextOutbox
    from habakkuk.engine.session_access import SessionsAccess
    from habakkuk.engine.state import StateStore

log = logging.getLogger(__name__)

STATE_SESSION = "~budget"  # state.db's settings of the budget (no session has this id)
REFRESH_SECONDS = 1.0  # how stale the spend read from usage.db may get
# Today's rows are summed whole this often (between, only the rows added since): a row
# another node committed late under a lower id is counted at the next whole read.
FULL_READ_SECONDS = 300.0
WARN_AT = 0.8  # the warning's share of a limit
WAIT_SECONDS = 5.0  # a waiting call looks again at least this often


def _settled_nothing(usage: Usage | None) -> None:
    """The settle of a call no limit watches."""


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def dollars(amount: float) -> str:
    """$1,234.56"""
    return f"${amount:,.2f}"


class Budget:
    """One home's spending limits, enforced in this process (a BudgetGate and a
    BudgetAccess)."""

    def __init__(
        self,
        config: Config,
        usage: UsageStore | None,
        state: StateStore | None,
        *,
        queue: JobQueue | None = None,
        outbox: Callable[[], TextOutbox] | None = None,
        sessions: Callable[[], SessionsAccess] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.config = config
        self.usage = usage
        self.state = state
        self.queue = queue  # the finished turns are read back from it (their error)
        self.outbox = outbox  # where the chats are told
        self.sessions = sessions  # a turn's agent
        self.clock = clock
        self.prices = usage.prices if usage is not None else PriceTable(config.pricing)
        # Calls through a subscription login cost $0 (usage.db counts them so): nothing to
        # reserve for them.
        self.free = usage.free if usage is not None else login_providers(config)
        try:
            self.zone = ZoneInfo(config.timezone)
        except (KeyError, ValueError):
            self.zone = ZoneInfo("UTC")
        self.ledger = Ledger()
        self.raised: dict[Key, float] = {}
        # (scope, period) -> the limit in force when a call did not fit even alone: paused
        # until the limit is higher than that.
        self.refused: dict[Key, float] = {}
        self.periods = periods_at(clock(), self.zone)
        self._read_at = -math.inf
        self._reading: asyncio.Task[None] | None = None
        self._month_base: tuple[str, dict[str, float]] = ("", {})
        # Today's sums by agent and the newest row id they count: (day, sums, id).
        self._today: tuple[str, dict[str, float], int] = ("", {}, 0)
        self._full_at = -math.inf
        self._moved: asyncio.Event | None = None
        self._pending: set[asyncio.Task[Any]] = set()

    # -- limits ------------------------------------------------------------------------

    def limits(self, scope: str) -> Limits:
        """The configured limits of the install (INSTALL) or an agent."""
        if scope == INSTALL:
            b = self.config.budget
            return Limits(b.daily, b.monthly, b.per_turn)
        agent = self.config.agents.get(scope)
        if agent is None:
            return Limits()
        return Limits(agent.budget.daily, agent.budget.monthly, agent.budget.per_turn)

    @property
    def limited(self) -> bool:
        """Any limit is set (else every call goes through untouched)."""
        return self.limits(INSTALL).any or any(self.limits(a).any for a in self.config.agents)

    def limit(self, scope: str, kind: PeriodKind) -> float:
        """The limit in force now: the config's plus this period's raises (0: none)."""
        base = getattr(self.limits(scope), kind)
        if base <= 0:
            return 0.0
        return float(base + self.raised.get(self._key(scope, kind), 0.0))

    def _key(self, scope: str, kind: PeriodKind) -> Key:
        return (scope, self.periods.day if kind == "daily" else self.periods.month)

    # -- reading usage.db ------------------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> None:
        """Read the period's spend (and the raises) again when older than REFRESH_SECONDS.

        The first read, the first of a new day and a forced one are awaited; a stale one
        starts in the background and the check goes on with what the last read said (this
        process's own calls are in the ledger already: only other processes' are late).
        One read at a time, shared by whoever asks meanwhile."""
        now = self.clock()
        day = periods_at(now, self.zone).day
        fresh = now - self._read_at < REFRESH_SECONDS
        if not force and fresh and day == self.periods.day:
            return
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read(now))
        if force or day != self.periods.day or self._read_at == -math.inf:
            await asyncio.shield(self._reading)

    async def _read(self, now: float) -> None:
        periods = periods_at(now, self.zone)
        mark = self.ledger.begin_read()
        if self.usage is not None:
            day_start = periods.day_start.timestamp()
            if self._month_base[0] != periods.day:  # once a day: the month up to today
                month = await self._sums(periods.month_start.timestamp(), day_start)
                self._month_base = (periods.day, month)
            if periods.day != self._today[0] or now - self._full_at >= FULL_READ_SECONDS:
                self._today = (periods.day, *await self._read_today(day_start, 0))
                self._full_at = now
            else:  # only the rows written since the last read: a range of the primary key
                _, sums, last = self._today
                new, newest = await self._read_today(day_start, last)
                for agent, cost in new.items():
                    sums[agent] = sums.get(agent, 0.0) + cost
                self._today = (periods.day, sums, max(last, newest))
        stored: dict[Key, float] = {}
        today, month_base = self._today[1], self._month_base[1]
        for agent in set(today) | set(month_base):
            stored[(agent, periods.day)] = today.get(agent, 0.0)
            stored[(agent, periods.month)] = month_base.get(agent, 0.0) + today.get(agent, 0.0)
        stored[(INSTALL, periods.day)] = sum(today.values())
        stored[(INSTALL, periods.month)] = sum(today.values()) + sum(month_base.values())
        raised = await self._raises()
        self.periods = periods
        self.ledger.load(mark, stored)
        self.raised = raised
        self._read_at = now

    async def _read_today(self, day_start: float, after: int) -> tuple[dict[str, float], int]:
        """Dollars by agent of today's rows (whose id is over `after`, when given: a range
        of the primary key), and the newest id."""
        assert self.usage is not None
        if after:
            sql = (
                "SELECT agent, COALESCE(SUM(CASE WHEN at >= ? THEN cost ELSE 0 END), 0) AS cost,"
                " MAX(id) AS newest FROM calls WHERE id > ? GROUP BY agent"
            )
            params: tuple[float, ...] = (day_start, after)
        else:
            sql = (
                "SELECT agent, COALESCE(SUM(cost), 0) AS cost, MAX(id) AS newest"
                " FROM calls WHERE at >= ? GROUP BY agent"
            )
            params = (day_start,)
        rows = await self.usage.db.fetchall(sql, params)
        newest = max((int(row["newest"]) for row in rows), default=after)
        if not after and not rows:  # nothing today: later rows are those past the newest
            found = await self.usage.db.fetchone("SELECT MAX(id) AS newest FROM calls", ())
            newest = int(found["newest"] or 0) if found is not None else 0
        return {str(row["agent"]): float(row["cost"]) for row in rows}, newest

    async def _sums(self, since: float, until: float) -> dict[str, float]:
        """Dollars by agent of usage.db's rows in [since, until)."""
        assert self.usage is not None
        rows = await self.usage.db.fetchall(
            "SELECT agent, COALESCE(SUM(cost), 0) AS cost FROM calls"
            " WHERE at >= ? AND at < ? GROUP BY agent",
            (since, until),
        )
        return {str(row["agent"]): float(row["cost"]) for row in rows}

    async def _raises(self) -> dict[Key, float]:
        if self.state is None:
            return {}
        rows = await self.state.db.fetchall(
            "SELECT name, value FROM session_settings WHERE session = ?", (STATE_SESSION,)
        )
        raised: dict[Key, float] = {}
        for row in rows:
            kind, _, rest = str(row["name"]).partition(":")
            scope, _, period = rest.rpartition(":")
            if kind == "raise":
                try:
                    raised[(scope, period)] = float(row["value"])
                except ValueError:
                    continue
        return raised

    # -- the router's hook -----------------------------------------------------------------

    async def before_call(self, ref: ModelRef, caller: Caller, request: ModelRequest) -> Settle:
        """Reserve the call's worst case, or raise BudgetPaused (the router's before_call)."""
        scopes = [INSTALL, caller.agent] if caller.agent else [INSTALL]
        if ref.provider in self.free or not any(self.limits(s).any for s in scopes):
            return _settled_nothing
        price = self.prices.lookup(ref.model)
        if price is None:
            if self.config.budget.unknown_price == "deny":
                raise BudgetPaused(
                    t("budget.unpriced", model=str(ref)), scope=INSTALL, kind="unknown_price"
                )
            return _settled_nothing  # allowed, at $0
        amount = worst_case(price, request)
        while True:
            await self.refresh()
            refusal, wait = self._check(scopes, caller.turn, amount)
            if refusal is None:
                keys = [self._key(s, k) for s in scopes for k in PERIOD_KINDS]
                hold = self.ledger.hold(amount, keys, caller.turn)
                return lambda usage: self._settle(hold, ref, usage)
            if not wait:
                raise refusal
            moved = self._moved = self._moved or asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await wait_within(moved.wait(), WAIT_SECONDS)

    def _check(
        self, scopes: list[str], turn: str, amount: float
    ) -> tuple[BudgetPaused | None, bool]:
        """(None, _) when `amount` fits everywhere now; else the refusal, and whether it
        would fit once the calls running now settle (then the call waits)."""
        wait = False
        for scope in scopes:
            for kind in PERIOD_KINDS:
                limit = self.limit(scope, kind)
                if limit <= 0:
                    continue
                key = self._key(scope, kind)
                if self.ledger.settled(key) + amount > limit:
                    self.refused[key] = limit
                    return BudgetPaused(self._message(scope, kind), scope=scope, kind=kind), False
                if self.ledger.committed(key) + amount > limit:
                    wait = True
            per_turn = self.limits(scope).per_turn
            if per_turn > 0 and turn and self.ledger.turn_spent(turn) + amount > per_turn:
                message = t("budget.paused_turn", limit=dollars(per_turn), scope=self._who(scope))
                return BudgetPaused(message, scope=scope, kind="per_turn"), False
        if wait:
            return BudgetPaused(""), True
        return None, False

    def _settle(self, hold: Hold, ref: ModelRef, usage: Usage | None) -> None:
        if usage is None:
            self.ledger.release(hold)
        else:
            self.ledger.settle(hold, self.prices.cost(ref.model, usage) or 0.0)
        if self._moved is not None:  # the calls waiting for room look again
            self._moved.set()
            self._moved = None

    # -- pauses ----------------------------------------------------------------------------

    def _who(self, scope: str) -> str:
        return t("budget.install") if scope == INSTALL else t("budget.agent", agent=scope)

    def _resets(self, kind: PeriodKind) -> datetime:
        return self.periods.day_end if kind == "daily" else self.periods.month_end

    def _message(self, scope: str, kind: PeriodKind) -> str:
        """The Paused: sentence of a used-up limit (what turns end with)."""
        resets = self._resets(kind).strftime("%Y-%m-%d %H:%M")
        raise_with = "/budget raise AMOUNT" if kind == "daily" else "/budget raise monthly AMOUNT"
        if scope != INSTALL:
            raise_with += f" {scope}"
        return t(
            f"budget.paused_{kind}",
            limit=dollars(self.limit(scope, kind)),
            scope=self._who(scope),
            resets=resets,
            timezone=self.config.timezone,
            command=raise_with,
            setting=("budget" if scope == INSTALL else f"agents.{scope}.budget")
            + (".daily" if kind == "daily" else ".monthly"),
        )

    def _used_up(self, scope: str, kind: PeriodKind) -> bool:
        limit = self.limit(scope, kind)
        if limit <= 0:
            return False
        key = self._key(scope, kind)
        return self.ledger.settled(key) >= limit or self.refused.get(key, -1.0) >= limit

    def pause_of(self, agent: str) -> tuple[str, Key] | None:
        """The message and (scope, period) of the limit that pauses `agent`'s turns."""
        for scope in (INSTALL, agent) if agent else (INSTALL,):
            for kind in PERIOD_KINDS:
                if self._used_up(scope, kind):
                    key = self._key(scope, kind)
                    return self._message(scope, kind), key
        return None

    def paused(self, agent: str) -> str | None:
        """The message `agent`'s turns end with while a limit is used up (no query)."""
        found = self.pause_of(agent)
        return found[0] if found is not None else None

    async def check_paused(self, agent: str) -> str | None:
        """`paused`, after reading usage.db if it is stale (schedules, cards)."""
        if not self.limited:
            return None
        await self.refresh()
        return self.paused(agent)

    # -- telling the chats -----------------------------------------------------------------

    def turn_finished(self, job: Job) -> None:
        """A turn finished: if a chat asked for it, tell that chat (once per period) that a
        limit paused it, or that 80 % of one is spent (in the background, by the outbox)."""
        if job.kind != TURN_KIND or not job.finished or self.outbox is None or not self.limited:
            return
        request = turn_request(job)
        if request is None or request.reply_to is None or not request.reply_to.to:
            return
        task = asyncio.get_running_loop().create_task(
            self._tell(job.id, request.session, request.reply_to.to)
        )
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _tell(self, turn: str, session: str, chat: str) -> None:
        try:
            fresh = await self.queue.get(turn) if self.queue is not None else None
            if fresh is None:
                return
            channel = chat.partition(":")[0]
            with use_language(self.config.language_of(channel)):
                notice = await self._notice(fresh, session, chat)
            if notice is not None and self.outbox is not None:
                job_id, text = notice
                await self.outbox().send_text(job_id, chat, text)
        except Exception as exc:  # a notice is best effort: the overview shows the spend
            log.warning("budget notice to %s failed: %s", chat, exc)

    async def _notice(self, job: Job, session: str, chat: str) -> tuple[str, str] | None:
        """(the delivery's job id, its text), the id derived from the chat and what is
        said, so each is queued once."""
        error = job.error or ""
        if job.status == "failed" and error.startswith(SILENT):
            text = error[len(SILENT) :].strip()
            return f"budget-paused:{_digest(chat, text)}", text
        if job.status != "done" or self.sessions is None:
            return None
        agent = (await self.sessions().session(session)).agent
        await self.refresh()
        for scope in (INSTALL, agent):
            for kind in PERIOD_KINDS:
                limit = self.limit(scope, kind)
                key = self._key(scope, kind)
                spent = self.ledger.settled(key)
                if limit > 0 and WARN_AT * limit <= spent < limit:
                    text = t(
                        f"budget.warning_{kind}",
                        percent=int(spent / limit * 100),
                        limit=dollars(limit),
                        spent=dollars(spent),
                        scope=self._who(scope),
                    )
                    return f"budget-warning:{_digest(chat, f'{scope}:{key[1]}:{limit}')}", text
        return None

    async def settled(self) -> None:
        """Wait for the notices and the read under way (tests; a closing runtime)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        if self._reading is not None:
            await asyncio.gather(self._reading, return_exceptions=True)

    # -- what the surfaces read -----------------------------------------------------------

    def _period(self, scope: str, kind: PeriodKind) -> PeriodSpend:
        key = self._key(scope, kind)
        return PeriodSpend(
            spent=self.ledger.settled(key),
            limit=self.limit(scope, kind),
            resets=self._resets(kind).isoformat(),
            raised=self.raised.get(key, 0.0) if getattr(self.limits(scope), kind) > 0 else 0.0,
        )

    def _scope(self, scope: str) -> ScopeSpend:
        return ScopeSpend(
            name=scope,
            today=self._period(scope, "daily"),
            month=self._period(scope, "monthly"),
            per_turn=self.limits(scope).per_turn,
            paused=self.paused(scope) or "" if scope else "",
        )

    async def status(self, agent: str | None = None) -> BudgetStatus:
        """Spend today and this month against the limits (usage.db read now)."""
        await self.refresh(force=True)
        names = [agent] if agent is not None else sorted(self.config.agents)
        install = self._scope(INSTALL)
        install = ScopeSpend(
            INSTALL, install.today, install.month, install.per_turn, self.paused("") or ""
        )
        return BudgetStatus(
            timezone=self.config.timezone,
            day=self.periods.day,
            month=self.periods.month,
            unknown_price=self.config.budget.unknown_price,
            install=install,
            agents=tuple(self._scope(name) for name in names),
        )

    async def raise_limit(self, kind: PeriodKind, amount: float, agent: str = "") -> PeriodSpend:
        """Raise this period's daily or monthly limit of the install (or `agent`) by
        `amount` dollars (state.db); BadInput when there is no such limit."""
        scope = agent or INSTALL
        if not math.isfinite(amount) or amount <= 0:
            raise BadInput.said("budget.bad_amount", amount=str(amount))
        if agent and agent not in self.config.agents:
            raise BadInput.said("budget.no_agent", agent=agent)
        if getattr(self.limits(scope), kind) <= 0:
            raise BadInput.said(f"budget.no_limit_{kind}", scope=self._who(scope))
        if self.state is None:
            raise BadInput.said("budget.no_state")
        await self.refresh(force=True)
        key = self._key(scope, kind)
        total = self.raised.get(key, 0.0) + amount
        await self.state.set_setting(STATE_SESSION, f"raise:{key[0]}:{key[1]}", repr(total))
        await self.refresh(force=True)
        return self._period(scope, kind)
