"""The channels as one service the runtime starts and stops.

`ChannelService` wires the store, gateway, delivery worker and supervisor for
the configured channel accounts, queues a reply delivery when a channel turn
finishes (and sweeps for replies a crash left unqueued), gives channel turns
their chat approver, and is what the send_file and poll tools talk to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from habakkuk.engine.agent.requests import TURN_KIND, TurnRequest, turn_request
from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.i18n import t
from habakkuk.engine.jobs import Job
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.engine.tts_config import TtsConfig
from habakkuk.voice.speech import Secrets

from .adapter import Adapter, FatalAdapterError
from .deliveries import DeliveryWorker, enqueue_reply
from .facade import RuntimeFacade
from .gateway import ChatApprover, Gateway
from .health import ActivityLog
from .outbox import Outbox
from .platforms import AdapterContext, build_adapter
from .store import ChannelStore
from .supervisor import Backoff, Supervisor
from .sweep import ReplySweep
from .tasks import cancel_and_wait
from .tools import OutboxOf, Poll, SendFile, Speak
from .voice_replies import ReplySpeaker
from .web import WebLog
from .webhook import WebhookDoor

log = logging.getLogger(__name__)

SWEEP_EVERY_SECONDS = 60.0


def register_tools(
    registry: ToolRegistry,
    outbox: OutboxOf,
    tts: TtsConfig | None = None,
    secrets: Secrets | None = None,
) -> None:
    """send_file and poll, in toolset core, on the channel service `outbox` returns (call
    when any chat runs: a configured channel or the HTTP server's web chat); speak, in
    toolset media, when `tts:` is configured (its key read from `secrets`)."""
    registry.register(SendFile(outbox), "core")
    registry.register(Poll(outbox), "core")
    if tts is not None:
        from habakkuk.voice.speech import build_synthesizer

        synthesizer = build_synthesizer(tts, secrets if secrets is not None else {})
        registry.register(Speak(outbox, tts, synthesizer), "media")


def _reply_speaker(runtime: RuntimeFacade) -> ReplySpeaker | None:
    """What speaks voice replies: the `tts:` provider, when one is configured."""
    tts = runtime.config.tts
    return ReplySpeaker(tts, runtime.env, runtime.blobs) if tts is not None else None


class ChannelService(Outbox):
    """Every configured channel account of one runtime (and its outbox: `send`, ...)."""

    def __init__(
        self,
        runtime: RuntimeFacade,
        *,
        backoff: Backoff | None = None,
        lease_seconds: float | None = None,
    ):
        super().__init__(runtime.queue)
        self.runtime = runtime
        self.store = store = ChannelStore(runtime.queue.db)
        # what every account did, noted by the gateway and deliveries, written by the supervisor
        self.activity = ActivityLog()
        self.gateway = Gateway(runtime, store, self._adapter, activity=self.activity)
        self.deliveries = DeliveryWorker(
            runtime.queue,
            store,
            self._wait_adapter,
            lambda error: t("chat.failed", error=error),
            self.gateway.settled,
            runtime.hooks,
            runtime.blobs,
            self.activity,
            speaker=_reply_speaker(runtime),
            language_of=runtime.config.language_of,
        )
        # The web chat's account is supervised while the HTTP server runs (`attach_web`),
        # so only the process serving HTTP holds it.
        self.supervisor = Supervisor(
            {n: c for n, c in runtime.config.channels.items() if c.type != "web"},
            self.make_adapter,
            store,
            runtime.queue,
            self.gateway.handle,
            self.deliveries,
            backoff=backoff,
            lease_seconds=lease_seconds or runtime.queue.lease_seconds,
            on_settled=runtime.job_settled,
            activity=self.activity,
        )
        self._starting: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.sweep = ReplySweep(runtime.queue, TURN_KIND, store)
        self._pending: set[asyncio.Task[Any]] = set()
        self._web_log: WebLog | None = None
        self._context = AdapterContext(runtime.env, store, runtime.home.channels_dir)
        self._supervise = False

    @property
    def webhook_door(self) -> WebhookDoor:
        """What the HTTP server opens while it serves the webhook platforms' requests."""
        return self._context.door

    def make_adapter(self, config: ChannelConfig) -> Adapter:
        """A fresh adapter for one account (the supervisor makes one per run)."""
        if config.type == "web":
            if self._web_log is None:
                raise FatalAdapterError(f"channels.{config.name}: the HTTP server is not running")
            from .web import WebAdapter

            return WebAdapter(config, self._web_log)
        return build_adapter(config, self._context)

    def _adapter(self, account: str) -> Adapter | None:
        return self.supervisor.adapter(account)

    async def _wait_adapter(self, account: str) -> Adapter | None:
        return await self.supervisor.wait_adapter(account, timeout=10.0)

    # -- lifecycle -------------------------------------------------------------------

    def start(self, *, supervise: bool = True) -> None:
        """Start the gateway's event follower, the reply sweeper and (`supervise`) the
        configured accounts; the HTTP server starts it for the web chat alone."""
        if supervise:
            self._supervise = True
            if self._starting is not None and self._starting.done():
                self.supervisor.start()  # idempotent per account
        if self._starting is None:
            self._starting = asyncio.create_task(self._start(), name="channels:start")

    async def _start(self) -> None:
        await self.store.ensure()
        self.gateway.start()
        if self._supervise:
            self.supervisor.start()
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="channels:sweep")

    async def started(self) -> None:
        """Wait until the channel tables exist and the supervisor runs."""
        if self._starting is not None:
            await asyncio.shield(self._starting)

    async def stop(self) -> None:
        """Stop the supervisor (adapters, delivery pools, leases) and the gateway."""
        if self._starting is not None and not self._starting.done():
            await cancel_and_wait(self._starting)
        await cancel_and_wait(self._sweeper)
        self._sweeper = None
        for task in list(self._pending):
            with contextlib.suppress(Exception):
                await task
        await self.gateway.stop()
        await self.supervisor.stop()

    def attach_web(self, account: str, log: WebLog) -> ChannelConfig:
        """Run the web chat's account (`account`, or the `channels:` entry of type web by
        that name), its sends appending to `log`; returns its config."""
        from .web import web_account

        config = web_account(self.runtime.config.channels.get(account), account)
        self._web_log = log
        self.gateway.channels[config.name] = config
        self.supervisor.add(config)
        return config

    async def detach_web(self, account: str) -> None:
        """Stop the web chat's account (the HTTP server stops): deliveries wait queued."""
        await self.supervisor.remove(account)
        self.gateway.channels.pop(account, None)
        self._web_log = None

    async def _sweep_loop(self) -> None:
        while True:
            try:
                swept = await self.sweep.run()
                if swept.queued:
                    log.info("queued %d reply deliveries a crash had left out", swept.queued)
            except Exception:
                log.exception("reply sweep failed")
            await asyncio.sleep(SWEEP_EVERY_SECONDS)

    # -- hooks the runtime calls ---------------------------------------------------------

    def turn_finished(self, job: Job) -> None:
        """A turn job finished in this process: queue its reply (if it came from a chat)."""
        request = turn_request(job) if job.finished else None
        if request is None or request.reply_to is None:
            return
        task = asyncio.get_running_loop().create_task(enqueue_reply(self.queue, job))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def approver_for(self, request: TurnRequest) -> ChatApprover | None:
        """The approver of a channel turn: the chat it came from."""
        return self.gateway.approver_for(request)

    # -- the tools' outbox -------------------------------------------------------------

    async def chat_of(self, turn: str, session: str) -> str | None:
        """The chat a turn answers to, else the chat its session is bound to."""
        job = await self.queue.get(turn)
        request = turn_request(job) if job is not None else None
        if request is not None and request.reply_to is not None and request.reply_to.to:
            return request.reply_to.to
        return await self.store.conversation_of(session)
