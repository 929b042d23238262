"""The channel supervisor: one live adapter per channel account, across processes.

For each configured account the supervisor

- holds the named lease `channel:<account>` in control.db, so only one process
  of the home polls a bot; the others stand by and take over when the holder
  dies or lets go;
- while the adapter is connected, runs the account's delivery pool
  (`delivery:<account>`), so deliveries wait queued while it is down;
- runs the adapter and restarts it whenever it stops, with exponential backoff
  (1 s doubling to 5 min, back to 1 s after a healthy minute);
- tears down an adapter that stays connected but silent (no message and no
  keepalive beat) past the channel's `silent_limit`;
- records every state change in `channel_status` (what `habakkuk channels` shows),
  with why the adapter stopped as its last error, and keeps the last state in memory
  (`states()`, what /healthz reports without a query); while connected it writes the
  last beat and the activity the gateway and deliveries noted (channels/health.py) in
  one statement every few seconds. Standing by is kept in memory only: the row is the
  holder's to write, so a standby process never hides the holder's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.jobs import Job, JobQueue
from habakkuk.engine.overview import NEVER_STARTED
from habakkuk.engine.pools import Pool
from habakkuk.engine.timeouts import wait_within

from .adapter import Adapter, FatalAdapterError, Inbox
from .deliveries import DeliveryWorker, delivery_kind
from .health import ActivityLog, record_every
from .store import ChannelStore
from .tasks import cancel_and_wait, raise_if_cancelling

log = logging.getLogger(__name__)

AdapterMaker = Callable[[ChannelConfig], Adapter]


@dataclass
class Backoff:
    """Restart delays: `first` doubling to `cap`, reset after `healthy` seconds up."""

    first: float = 1.0
    cap: float = 300.0
    healthy: float = 60.0


class Silent(Exception):
    """Why a run ended: no message or keepalive from the platform within silent_limit."""


class _Account:
    """The supervisor's state for one channel account."""

    def __init__(self, config: ChannelConfig):
        self.config = config
        self.adapter: Adapter | None = None
        self.up = asyncio.Event()
        self.last_beat = 0.0
        self.task: asyncio.Task[None] | None = None
        self.state = NEVER_STARTED  # the last state recorded, kept for /healthz
        # True once this process wrote the account's row as its holder (until it stands
        # by): only then does its stopping write "stopped" there.
        self.wrote = False


class Supervisor:
    """Keeps every configured channel adapter running (in whichever process holds it)."""

    def __init__(
        self,
        channels: dict[str, ChannelConfig],
        make_adapter: AdapterMaker,
        store: ChannelStore,
        queue: JobQueue,
        inbox: Inbox,
        deliveries: DeliveryWorker,
        *,
        backoff: Backoff | None = None,
        lease_seconds: float = 30.0,
        delivery_concurrency: int = 4,
        on_settled: Callable[[Job], None] | None = None,
        activity: ActivityLog | None = None,
    ):
        self.make_adapter = make_adapter
        self.store = store
        self.queue = queue
        self.inbox = inbox
        self.deliveries = deliveries
        self.backoff = backoff or Backoff()
        self.lease_seconds = lease_seconds
        self.delivery_concurrency = delivery_concurrency
        self.on_settled = on_settled  # each finished delivery job (for metrics)
        # what the gateway and the deliveries noted of each account, written with its beat
        self.activity = activity or ActivityLog()
        self.owner = str(queue.owner)
        self._accounts = {name: _Account(config) for name, config in channels.items()}
        self._stopping = False

    def start(self) -> None:
        """Start one supervising task per account on the running loop."""
        for name, account in self._accounts.items():
            if account.task is None:
                account.task = asyncio.create_task(self._hold(account), name=f"channel:{name}")

    def add(self, config: ChannelConfig) -> None:
        """Supervise one more account (the web chat's, while the HTTP server runs)."""
        if config.name in self._accounts:
            return
        account = self._accounts[config.name] = _Account(config)
        if not self._stopping:
            name = config.name
            account.task = asyncio.create_task(self._hold(account), name=f"channel:{name}")

    async def remove(self, name: str) -> None:
        """Stop supervising an account: its adapter and deliveries stop, its lease goes."""
        account = self._accounts.pop(name, None)
        if account is not None and account.task is not None:
            await cancel_and_wait(account.task)

    async def stop(self) -> None:
        """Stop every adapter and delivery pool, and let the leases go."""
        self._stopping = True
        tasks = [a.task for a in self._accounts.values() if a.task is not None]
        for task in tasks:
            await cancel_and_wait(task)
        for account in self._accounts.values():
            account.task = None

    def states(self) -> dict[str, str]:
        """Each supervised account's last recorded state, from memory (no query)."""
        return {name: account.state for name, account in self._accounts.items()}

    def adapter(self, name: str) -> Adapter | None:
        """The account's connected adapter in this process, if any."""
        account = self._accounts.get(name)
        if account is None or not account.up.is_set():
            return None
        return account.adapter

    async def wait_adapter(self, name: str, timeout: float = 10.0) -> Adapter | None:
        """The account's adapter once connected, or None after `timeout` seconds."""
        account = self._accounts.get(name)
        if account is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_within(account.up.wait(), timeout)
        return self.adapter(name)

    # -- the lease -------------------------------------------------------------------

    async def _hold(self, account: _Account) -> None:
        name = account.config.name
        lease = f"channel:{name}"
        try:
            while not self._stopping:
                holder = await self._safe_acquire(lease)
                if holder is not None:
                    await self._record(
                        account,
                        "standby",
                        holder=holder,
                        detail="another process holds this channel",
                    )
                    await asyncio.sleep(self.lease_seconds / 3)
                    continue
                await self._while_held(account, lease)
                raise_if_cancelling()
        finally:
            with contextlib.suppress(Exception):
                await self.store.release_lease(lease, self.owner)
            with contextlib.suppress(Exception):
                await self._record(account, "stopped")

    async def _record(
        self,
        account: _Account,
        state: str,
        *,
        holder: str = "",
        detail: str = "",
        restarted: bool = False,
        error: str = "",
    ) -> None:
        """Keep `state` in memory (at once), then record it in `channel_status` (with
        `error` as the last error), unless it is a standby's or this process never held
        the account."""
        account.state = state
        if state == "standby" or (state == "stopped" and not account.wrote):
            account.wrote = False
            return
        account.wrote = True
        config = account.config
        await self.store.set_status(
            config.name,
            config.type,
            state,
            holder=holder,
            detail=detail,
            restarted=restarted,
            error=error,
        )

    async def _safe_acquire(self, lease: str) -> str | None:
        try:
            return await self.store.acquire_lease(lease, self.owner, self.lease_seconds)
        except Exception as exc:  # a locked database must not kill the supervisor
            log.warning("could not take lease %s: %s", lease, exc)
            return "unknown (database busy)"

    async def _while_held(self, account: _Account, lease: str) -> None:
        """Run the adapter (and, while it is connected, its deliveries) until the lease is lost."""
        runner = asyncio.create_task(self._run_adapter(account), name=f"adapter:{lease}")
        try:
            while not runner.done():
                done, _ = await asyncio.wait({runner}, timeout=self.lease_seconds / 3)
                if done:
                    break
                if await self._safe_acquire(lease) is not None:
                    log.warning("lost the lease on %s; standing by", lease)
                    break
        finally:
            await cancel_and_wait(runner)

    # -- the adapter -------------------------------------------------------------------

    async def _run_adapter(self, account: _Account) -> None:
        config = account.config
        delay = self.backoff.first
        while True:
            started = time.monotonic()
            error = await self._one_run(account)
            raise_if_cancelling()
            healthy = time.monotonic() - started >= self.backoff.healthy
            if healthy:
                delay = self.backoff.first
            wait = self.backoff.cap if isinstance(error, FatalAdapterError) else delay
            state = "fatal" if isinstance(error, FatalAdapterError) else "backoff"
            if isinstance(error, Silent):
                state = "silent"  # what it is until the restart connects it again
            await self._record(
                account,
                state,
                holder=self.owner,
                detail=f"{error or 'stopped'}; restarting in {wait:.0f}s",
                restarted=True,
                error=_why(error),
            )
            log.warning("channel %s stopped (%s); restarting in %.0fs", config.name, error, wait)
            await asyncio.sleep(wait)
            delay = min(self.backoff.cap, delay * 2)

    async def _one_run(self, account: _Account) -> BaseException | str | None:
        """Run the adapter once; returns why it stopped."""
        config = account.config
        await self._record(account, "starting", holder=self.owner)
        try:
            adapter = self.make_adapter(config)
        except FatalAdapterError as exc:
            return exc
        account.adapter = adapter
        account.last_beat = time.monotonic()
        connected = False
        # Deliveries are claimed only while connected: a bot that is down for an hour
        # does not burn its replies' attempts, they wait queued.
        pool = Pool(
            self.queue,
            [delivery_kind(config.name)],
            self.deliveries.run,
            concurrency=self.delivery_concurrency,
            on_finished=self.on_settled,
        )

        def beat() -> None:
            nonlocal connected
            account.last_beat = time.monotonic()
            if not connected:
                connected = True
                account.up.set()
                pool.start()
                asyncio.get_running_loop().create_task(
                    self._record(account, "connected", holder=self.owner)
                )

        task = asyncio.create_task(adapter.run(self.inbox, beat), name=f"run:{config.name}")
        last_recorded = 0.0
        reason: BaseException | str | None = None
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=record_every(config))
                if done:
                    if task.cancelled():
                        reason = "the adapter was cancelled"
                        break
                    failure = task.exception()
                    reason = failure if failure is not None else "the connection ended"
                    break
                now = time.monotonic()
                if now - account.last_beat > config.silent_limit_seconds:
                    silence = f"no message or keepalive for {config.silent_limit_seconds:g}s"
                    reason = Silent(silence)
                    break
                beat_at: float | None = None
                if connected and account.last_beat > last_recorded:
                    last_recorded = account.last_beat
                    beat_at = time.time() - (now - account.last_beat)  # when, on the clock
                await self._write_activity(account, beat_at)
        finally:
            account.up.clear()
            try:
                await pool.stop()
                await cancel_and_wait(task)
            finally:
                # Closed on every path: when this task is being stopped, cancel_and_wait
                # re-raises that stop once the adapter's task has ended, and the close
                # must still run (its HTTP session was left open, "Unclosed client session").
                with contextlib.suppress(Exception):
                    await adapter.close()
                account.adapter = None
            raise_if_cancelling()  # pool.stop may have swallowed ours
        await self._write_activity(account)  # what the last moments noted
        return reason

    async def _write_activity(self, account: _Account, beat: float | None = None) -> None:
        """Write the account's beat and what was noted of it since, if anything."""
        name = account.config.name
        activity = self.activity.take(name, beat=beat)
        if activity is not None:
            with contextlib.suppress(Exception):  # a busy database must not stop the adapter
                await self.store.record(name, activity)


def _why(error: BaseException | str | None) -> str:
    """Why a run ended, in one line (an exception without a message by its type)."""
    if error is None:
        return "the adapter stopped"
    text = " ".join(str(error).split())
    return text or type(error).__name__
