"""Home Assistant triggers: the bus followed in `habakkuk serve`, each match a turn.

One process of a home follows the bus: the one holding the named lease
`homeassistant:triggers` in control.db, like the other per-home singletons (a second
`serve` stands by and takes over when the holder dies). The connection is retried with
jittered exponential backoff; a refused token waits the longest (it will not mend by
itself, but a fixed .env is read on the next try). A trigger that fired ignores its
matches for its cooldown. A match starts an unattended turn of the trigger's agent in a
fresh session, as a webhook's delivery does, whose id derives from the event's context
id, so an event seen twice (a replay, a reconnect) runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.jobs import backoff_delay
from habakkuk.engine.leases import NamedLeases

from .events import HaEvent, matches, render_prompt, session_id, turn_id
from .rest import HaAuthError, HaError, read_token
from .stream import follow

if TYPE_CHECKING:
    from habakkuk.engine.agent.turn_access import TurnsAccess
    from habakkuk.engine.home import Environment
    from habakkuk.engine.homeassistant_config import HaTriggerConfig, HomeAssistantConfig
    from habakkuk.engine.session_access import SessionsAccess
    from habakkuk.engine.store import Database

log = logging.getLogger(__name__)

LEASE_NAME = "homeassistant:triggers"
LEASE_SECONDS = 30.0
ORIGIN = "homeassistant"  # the origin of a trigger's session

StartTurn = Callable[["HaTriggerConfig", HaEvent], Awaitable[str]]


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: the first, the cap, and how long a connection must have
    lasted to count as healthy (the next failure starts from `first` again)."""

    first: float = 1.0
    cap: float = 300.0
    healthy: float = 60.0


class TriggerTurns:
    """Starts a trigger's turn: a fresh session of its agent, an unattended turn."""

    def __init__(self, sessions: SessionsAccess, turns: TurnsAccess) -> None:
        self.sessions = sessions
        self.turns = turns

    async def __call__(self, trigger: HaTriggerConfig, event: HaEvent) -> str:
        """Queue the turn for `event` (again: the same turn, a no-op); its id."""
        turn = turn_id(trigger, event)
        session = await self.sessions.new_session(
            trigger.agent, origin=ORIGIN, session_id=session_id(turn)
        )
        reply_to = (
            ReplyTo(trigger.deliver, sender=f"homeassistant:{trigger.name}")
            if trigger.deliver
            else None
        )
        return await self.turns.submit(
            session.id,
            render_prompt(trigger, event),
            turn_id=turn,
            attended=False,
            reply_to=reply_to,
        )


class HaTriggers:
    """The follower of the bus for one home (start, stop), and what it has seen."""

    def __init__(
        self,
        section: HomeAssistantConfig,
        env: Environment | None,
        db: Database,
        owner: str,
        start_turn: StartTurn,
        *,
        lease_seconds: float = LEASE_SECONDS,
        backoff: Backoff = Backoff(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.section = section
        self.env = env
        self.leases = NamedLeases(db)
        self.owner = f"{owner}:homeassistant"
        self.start_turn = start_turn
        self.lease_seconds = lease_seconds
        self.backoff = backoff
        self.clock = clock
        self.state = "starting"  # standby, connecting, connected, backoff, stopped
        self.last_error = ""
        self.connections = 0  # how many times it authenticated and subscribed
        self.fired: list[str] = []  # the turns it started (or found started), in order
        self._quiet_until: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def event_types(self) -> list[str]:
        """Each event type a trigger listens for, once."""
        return list(dict.fromkeys(t.event_type for t in self.section.triggers.values()))

    def start(self) -> None:
        """Start holding the lease and, while held, following the bus."""
        if self._task is None:
            self._task = asyncio.create_task(self._hold(), name="homeassistant-triggers")

    async def stop(self) -> None:
        """Stop following and let the lease go."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.state = "stopped"

    async def _hold(self) -> None:
        await self.leases.ensure()
        follower: asyncio.Task[None] | None = None
        try:
            while True:
                try:
                    holder = await self.leases.acquire(LEASE_NAME, self.owner, self.lease_seconds)
                except Exception as exc:  # a busy database must not end the follower
                    log.warning("homeassistant: could not take the triggers' lease: %s", exc)
                    holder = "unknown (database busy)"
                if holder is None and (follower is None or follower.done()):
                    follower = asyncio.create_task(self._follow(), name="homeassistant-bus")
                elif holder is not None:
                    if follower is not None:
                        log.warning("homeassistant: lost the triggers' lease; standing by")
                        await _cancel(follower)
                        follower = None
                    self.state = "standby"
                await asyncio.sleep(self.lease_seconds / 3)
        finally:
            if follower is not None:
                await _cancel(follower)
            with contextlib.suppress(Exception):
                await self.leases.release(LEASE_NAME, self.owner)

    async def _follow(self) -> None:
        """Connect, follow, and reconnect with backoff, until cancelled."""
        attempt = 0
        while True:
            self.state = "connecting"
            began = self.clock()
            try:
                token = await read_token(self.env, self.section.token_env)
                await follow(
                    self.section.websocket_url,
                    token,
                    self.section.token_env,
                    self.event_types,
                    self._on_event,
                    on_connected=self._connected,
                )
                error: Exception = ConnectionError("the connection ended")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every way a connection ends: retried
                error = exc
            if self.state == "connected" and self.clock() - began >= self.backoff.healthy:
                attempt = 0
            attempt += 1
            refused = isinstance(error, HaAuthError)
            wait = (
                self.backoff.cap
                if refused
                else backoff_delay(attempt, base=self.backoff.first, cap=self.backoff.cap)
            )
            self.last_error = _why(error)
            self.state = "backoff"
            log.warning(
                "homeassistant: the event stream at %s stopped (%s); retrying in %.1fs",
                self.section.url,
                self.last_error,
                wait,
            )
            await asyncio.sleep(wait)

    def _connected(self) -> None:
        self.state = "connected"
        self.connections += 1
        log.info("homeassistant: following %s for %d trigger(s)", self.section.url,
                 len(self.section.triggers))  # fmt: skip

    async def _on_event(self, event: HaEvent) -> None:
        """Start the turn of every trigger `event` fires, past its cooldown."""
        for trigger in self.section.triggers.values():
            if not matches(trigger, event):
                continue
            now = self.clock()
            if now < self._quiet_until.get(trigger.name, float("-inf")):
                continue  # within its cooldown
            self._quiet_until[trigger.name] = now + trigger.cooldown_seconds
            try:
                self.fired.append(await self.start_turn(trigger, event))
            except Exception:
                log.exception("homeassistant: trigger %s could not start its turn", trigger.name)


def _why(error: BaseException) -> str:
    if isinstance(error, HaError):
        return str(error)
    return str(error) or type(error).__name__


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def start_triggers(
    section: HomeAssistantConfig | None,
    env: Environment | None,
    db: Database,
    owner: str,
    sessions: SessionsAccess,
    turns: TurnsAccess,
) -> HaTriggers | None:
    """The running follower of `habakkuk serve` (None without triggers configured)."""
    if section is None or not section.triggers:
        return None
    triggers = HaTriggers(section, env, db, owner, TriggerTurns(sessions, turns))
    triggers.start()
    return triggers
