"""GET /metrics: Prometheus text, behind the API token unless `http.metrics.public`.

Counters follow the events bus from the moment the server starts (a restart
starts them at zero, which Prometheus handles); queue depth is read from
control.db at scrape time. Each server has its own CollectorRegistry, so two
runtimes in one process (tests) never share a counter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from habakkuk import __version__
from habakkuk.engine.events import (
    EventPayload,
    JobFinished,
    ModelReplied,
    Subscription,
    ToolEnded,
    TurnEnded,
    TurnStarted,
)

from .served import server_of

if TYPE_CHECKING:
    from habakkuk.engine.llm.router import ModelAttempt
    from habakkuk.engine.overview import ChannelHealth

    from .host import ServerHost

log = logging.getLogger(__name__)

COUNTED = (TurnStarted, TurnEnded, ModelReplied, ToolEnded, JobFinished)
# A pool settles a job as done, failed or cancelled, or puts it back ("queued") to retry.
JOB_OUTCOMES = {"queued": "retry", "running": "lost"}
DELIVERY_PREFIX = "delivery:"
DELIVERY_OUTCOMES = {"done": "sent", "queued": "retry"}
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


class Metrics:
    """The metric families of one server, fed by the bus."""

    def __init__(self, runtime: ServerHost):
        self.runtime = runtime
        self.registry: Any = None
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._turns: dict[str, tuple[str, float]] = {}  # turn -> (agent, started)

    def start(self) -> None:
        """Create the families (prometheus_client is imported here) and follow the bus."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        registry = CollectorRegistry(auto_describe=True)
        self.registry = registry
        self.turns_started = Counter(
            "habakkuk_turns_started", "Turns started", ["agent"], registry=registry
        )
        self.turns_finished = Counter(
            "habakkuk_turns_finished",
            "Turns that ended (done or stopped)",
            ["agent"],
            registry=registry,
        )
        self.turns_failed = Counter(
            "habakkuk_turns_failed", "Turns that failed", ["agent"], registry=registry
        )
        self.turn_duration = Histogram(
            "habakkuk_turn_duration_seconds",
            "Turn run time",
            buckets=(1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=registry,
        )
        self.model_calls = Counter(
            "habakkuk_model_calls",
            "Model calls",
            ["provider", "model", "outcome"],
            registry=registry,
        )
        self.model_call_duration = Histogram(
            "habakkuk_model_call_duration_seconds",
            "Model request attempt time",
            ["provider", "model", "outcome"],
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300),
            registry=registry,
        )
        self.model_tokens = Counter(
            "habakkuk_model_tokens",
            "Model tokens",
            ["provider", "model", "kind"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "habakkuk_tool_calls", "Tool calls", ["tool", "outcome"], registry=registry
        )
        self.tool_duration = Histogram(
            "habakkuk_tool_call_duration_seconds",
            "Tool call run time",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 120, 600),
            registry=registry,
        )
        self.jobs = Counter("habakkuk_jobs", "Jobs settled", ["kind", "outcome"], registry=registry)
        self.job_retries = Counter(
            "habakkuk_job_retries", "Jobs put back for a retry", ["kind"], registry=registry
        )
        self.model_cost = Counter(
            "habakkuk_model_cost_usd", "Model cost in US dollars (priced calls)", registry=registry
        )
        self.deliveries = Counter(
            "habakkuk_deliveries",
            "Chat deliveries settled",
            ["channel", "outcome"],
            registry=registry,
        )
        self.channels = _ChannelCollector()
        registry.register(self.channels)
        self.queue_depth = Gauge(
            "habakkuk_queue_depth",
            "Jobs queued or running",
            ["kind", "status"],
            registry=registry,
        )
        build = Gauge("habakkuk_build_info", "Build", ["version"], registry=registry)
        build.labels(version=__version__).set(1)
        # Which engine holds the home's databases: sqlite, or postgres shared by nodes.
        storage = Gauge("habakkuk_storage_info", "Storage backend", ["backend"], registry=registry)
        storage.labels(backend=self.runtime.queue.db.dialect).set(1)
        start = Gauge("habakkuk_start_time_seconds", "Server start time", registry=registry)
        start.set(time.time())
        self._subscription = self.runtime.bus.subscribe(
            lambda e: isinstance(e, COUNTED), maxsize=8192
        )
        self._task = asyncio.create_task(self._follow(), name="metrics")
        self.runtime.router.observers.append(self._attempt)

    def stop(self) -> None:
        if self._attempt in self.runtime.router.observers:
            self.runtime.router.observers.remove(self._attempt)
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    async def _follow(self) -> None:
        assert self._subscription is not None
        async for event in self._subscription:
            try:
                self.observe(event)
            except Exception:  # a metric must never take the server down
                log.exception("metrics: could not record %s", event.kind)

    def observe(self, event: EventPayload) -> None:
        """Count one bus event."""
        match event:
            case TurnStarted():
                self._turns[event.turn] = (event.agent, time.monotonic())
                self.turns_started.labels(agent=event.agent).inc()
                if len(self._turns) > 10_000:  # turns whose end never reached us
                    self._turns.pop(next(iter(self._turns)))
            case TurnEnded():
                agent, started = self._turns.pop(event.turn, ("", time.monotonic()))
                if event.status == "failed":
                    self.turns_failed.labels(agent=agent).inc()
                else:
                    self.turns_finished.labels(agent=agent).inc()
                self.turn_duration.observe(time.monotonic() - started)
            case ModelReplied():
                self._model_call(event)
            case ToolEnded():
                outcome = event.status or ("error" if event.is_error else "ok")
                self.tool_calls.labels(tool=event.tool, outcome=outcome).inc()
                self.tool_duration.observe(event.seconds or 0.0)
            case JobFinished():
                self._job(event)

    def _attempt(self, attempt: ModelAttempt) -> None:
        """Time one model request attempt (the router tells us of each, failed ones too)."""
        ref = attempt.ref
        self.model_call_duration.labels(
            provider=ref.provider, model=ref.model, outcome=attempt.outcome
        ).observe(attempt.seconds)

    def _model_call(self, event: ModelReplied) -> None:
        provider, _, model = event.model.partition("/")
        self.model_calls.labels(provider=provider, model=model, outcome="ok").inc()
        for kind in TOKEN_KINDS:
            count = event.usage.get(kind) or 0
            if count:
                label = kind.removesuffix("_tokens")
                self.model_tokens.labels(provider=provider, model=model, kind=label).inc(count)
        cost = self.runtime.ledger.call_cost(event.model, event.usage)
        if cost:
            self.model_cost.inc(cost)

    def _job(self, event: JobFinished) -> None:
        kind, status = event.job_kind, event.status
        outcome = JOB_OUTCOMES.get(status, status)
        self.jobs.labels(kind=kind, outcome=outcome).inc()
        if outcome == "retry":
            self.job_retries.labels(kind=kind).inc()
        if kind.startswith(DELIVERY_PREFIX):
            channel = kind.removeprefix(DELIVERY_PREFIX)
            sent = DELIVERY_OUTCOMES.get(status, status)
            self.deliveries.labels(channel=channel, outcome=sent).inc()

    async def render(self) -> bytes:
        """The exposition text, with queue depth read now."""
        from prometheus_client import generate_latest

        # Count what the bus already holds, so a scrape never lags the events.
        while self._subscription is not None and (event := self._subscription.get_nowait()):
            self.observe(event)
        self.channels.states = await self.runtime.control.channel_states()
        depth = await self.runtime.turns.queue_depth()
        self.queue_depth.clear()
        for (kind, status), count in depth.items():
            self.queue_depth.labels(kind=kind, status=status).set(count)
        return bytes(generate_latest(self.registry))


class _ChannelCollector:
    """Channel health read from control.db at scrape time (whichever process runs them)."""

    def __init__(self) -> None:
        self.states: list[ChannelHealth] = []

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        connected = GaugeMetricFamily(
            "habakkuk_channel_connected", "1 while the channel is connected", labels=["channel"]
        )
        restarts = CounterMetricFamily(
            "habakkuk_channel_reconnects", "Adapter restarts", labels=["channel"]
        )
        for health in self.states:
            # "connected" in truth: a silent adapter is not (channels/health.py)
            connected.add_metric([health.account], 1.0 if health.state == "connected" else 0.0)
            restarts.add_metric([health.account], float(health.restarts))
        yield connected
        yield restarts


async def metrics(request: web.Request) -> web.Response:
    """GET /metrics"""
    body = await server_of(request).metrics.render()
    return web.Response(
        body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    )


def setup(app: web.Application) -> None:
    """Register /metrics."""
    app.router.add_get("/metrics", metrics)
