"""Traces: spans of each turn run exported as OTLP/HTTP (spec 000 "Operations": Traces).

Off unless `telemetry.otlp_endpoint` is set; then the OpenTelemetry SDK (the optional
`telemetry` extra, imported here only) batches spans every 5 s from one thread into a
bounded queue (2048) that drops rather than grows. Nothing in the turn loop knows about
it: the spans are made from the bus (turn start and end, tool start and end) and from
the router's attempt observers (each model request), matched by session because a
session runs one turn at a time. A delegate's child turns are children of the turn that
delegated them, in its trace (when that turn ran in this process). With no telemetry
section nothing subscribes and no attempt is timed, so a turn costs what it did.

Spans carry names, ids, sizes and outcomes; with `include_content: true` they also carry
the user message, the reply, tool input and output, each cut to 4 KB and passed
through the secret redactor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .events import (
    DelegateStarted,
    EventBus,
    EventPayload,
    Subscription,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from .llm.router import ModelAttempt, Router
from .redact import MARK, REDACTOR, SHORTEST_VALUE
from .telemetry_config import TelemetryConfig

log = logging.getLogger(__name__)

CONTENT_LIMIT = 4096
MAX_QUEUE = 2048
SCHEDULE_SECONDS = 5.0
FAILURE_LOG_EVERY = 60.0
EXPORT_TIMEOUT = 10.0
TRACED = (TurnStarted, TurnEnded, ToolStarted, ToolEnded, DelegateStarted)
PARENTS_KEPT = 10_000  # child sessions whose parent span is remembered (the oldest forgotten)
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk._shared_internal",
)

CostOf = Callable[[str, dict[str, int]], float | None]


class TelemetryMissing(Exception):
    """The `telemetry` extra is not installed."""


def redact(text: str, values: Mapping[str, str] = {}) -> str:  # never mutated
    """`text` cut to 4 KB through the process's one redactor (engine/redact.py: the home's
    secret values and the token shapes), with any of `values` (variable -> secret) it
    holds replaced too: the same [REDACTED] mark as the log and the transcripts."""
    text = REDACTOR.text(text[:CONTENT_LIMIT])
    for value in values.values():
        if len(value) >= SHORTEST_VALUE:
            text = text.replace(value, MARK)
    return text


class FailureLog:
    """Logs a failing collector at most once a minute (not once per batch)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.last: float | None = None
        self.missed = 0

    def failed(self, url: str, why: str) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < FAILURE_LOG_EVERY:
            self.missed += 1
            return
        more = f" ({self.missed} more failures since the last report)" if self.missed else ""
        log.warning("traces: the collector at %s failed: %s%s", url, why, more)
        self.last, self.missed = now, 0


def _exporter(url: str, headers: dict[str, str], failures: FailureLog) -> Any:
    """The SDK's OTLP/HTTP exporter, wrapped so a failure is logged at most once a minute."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    # The SDK logs each failed batch itself; ours says it once a minute instead.
    for name in _SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    inner = OTLPSpanExporter(endpoint=url, headers=headers or None, timeout=EXPORT_TIMEOUT)

    class Limited(SpanExporter):
        def export(self, spans: Sequence[Any]) -> Any:
            try:
                result = inner.export(spans)
            except Exception as exc:  # a collector must never take the thread down
                failures.failed(url, f"{type(exc).__name__}: {exc}")
                return SpanExportResult.FAILURE
            if result != SpanExportResult.SUCCESS:
                failures.failed(url, f"{len(spans)} spans not accepted")
            return result

        def shutdown(self) -> None:
            inner.shutdown()  # type: ignore[no-untyped-call]  # reason: untyped in the SDK

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return Limited()


@dataclass
class _Turn:
    span: Any
    turn: str
    user_message: bool = False  # set once content holds the user's words


class Tracing:
    """Makes spans from the bus and the router and hands them to a batch processor."""

    def __init__(
        self,
        config: TelemetryConfig,
        bus: EventBus,
        router: Router,
        *,
        headers: Mapping[str, str] | None = None,
        cost: CostOf | None = None,
        secrets: Mapping[str, str] | None = None,
        exporter: Any = None,
        max_queue: int = MAX_QUEUE,
        schedule_seconds: float = SCHEDULE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise TelemetryMissing(str(exc)) from None
        self.config = config
        self.bus = bus
        self.router = router
        self.cost = cost
        self.secrets = dict(secrets or {})
        self.failures = FailureLog(clock)
        exporter = exporter or _exporter(config.traces_url, dict(headers or {}), self.failures)
        self.processor = BatchSpanProcessor(
            exporter,
            max_queue_size=max_queue,
            schedule_delay_millis=int(schedule_seconds * 1000),
            max_export_batch_size=min(512, max_queue),
        )
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": config.service_name})
        )
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("habakkuk")
        self._turns: dict[str, _Turn] = {}  # session -> its running turn
        self._tools: dict[str, tuple[int, dict[str, Any]]] = {}  # call id -> (start, input)
        # A delegate's child session -> (the parent's session, its turn span's context): the
        # child's turns join the parent's trace, under the turn that delegated them, even
        # when that turn has ended (a background delegation).
        self._parents: dict[str, tuple[str, Any]] = {}
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Follow the bus and the router (on the event loop)."""
        self._subscription = self.bus.subscribe(lambda e: isinstance(e, TRACED), maxsize=8192)
        self._task = asyncio.create_task(self._follow(), name="tracing")
        self.router.observers.append(self.attempt)

    async def stop(self) -> None:
        """Stop following, export what is queued (bounded) and shut the exporter."""
        if self.attempt in self.router.observers:
            self.router.observers.remove(self.attempt)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._drain()
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None
        for turn in self._turns.values():  # turns cut short by the stop
            turn.span.set_attribute("habakkuk.turn.status", "stopped")
            turn.span.end()
        self._turns.clear()
        await asyncio.to_thread(self.provider.shutdown)

    def flush(self, timeout: float = 10.0) -> bool:
        """Export what is queued now (blocking: tests and shutdown)."""
        self._drain()
        return bool(self.provider.force_flush(int(timeout * 1000)))

    async def _follow(self) -> None:
        assert self._subscription is not None
        async for event in self._subscription:
            self._handle(event)

    def _drain(self) -> None:
        while self._subscription is not None and (event := self._subscription.get_nowait()):
            self._handle(event)

    def _handle(self, event: EventPayload) -> None:
        try:
            self.observe(event)
        except Exception:  # a span must never take the server down
            log.exception("traces: could not record %s", event.kind)

    def _content(self, text: str) -> str:
        return redact(text, self.secrets)

    def observe(self, event: EventPayload) -> None:
        """Turn one bus event into span work."""
        from opentelemetry.trace import Status, StatusCode

        match event:
            case TurnStarted(compact=False):
                attributes = {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": event.agent,
                    "habakkuk.session": event.session,
                    "habakkuk.turn": event.turn,
                }
                parent_session, context = self._parents.get(event.session, ("", None))
                if parent_session:
                    attributes["habakkuk.parent_session"] = parent_session
                span = self.tracer.start_span(
                    f"invoke_agent {event.agent}",
                    context=context,
                    start_time=_ns(event.at),
                    attributes=attributes,
                )
                self._turns[event.session] = _Turn(span, event.turn)
            case DelegateStarted():
                self._delegated(event)
            case TurnEnded():
                turn = self._turns.get(event.session)
                if turn is None or turn.turn != event.turn:
                    return
                del self._turns[event.session]
                turn.span.set_attribute("habakkuk.turn.status", event.status)
                turn.span.set_attribute("habakkuk.reply.size", len(event.reply))
                if self.config.include_content and event.reply:
                    turn.span.set_attribute("habakkuk.reply", self._content(event.reply))
                if event.status == "failed":
                    turn.span.set_status(Status(StatusCode.ERROR, event.error[:200]))
                turn.span.end(end_time=_ns(event.at))
            case ToolStarted():
                self._tools[event.call_id] = (_ns(event.at), event.input)
                if len(self._tools) > 10_000:  # calls whose end never reached us
                    self._tools.pop(next(iter(self._tools)))
            case ToolEnded():
                self._tool(event)

    def _delegated(self, event: DelegateStarted) -> None:
        """Remember the delegating turn's span for the child session's turns."""
        from opentelemetry.trace import NonRecordingSpan, set_span_in_context

        turn = self._turns.get(event.session)
        if turn is None or turn.turn != event.turn:
            return  # the parent's turn is not traced here (another process ran it)
        parent = NonRecordingSpan(turn.span.get_span_context())
        self._parents[event.child_session] = (event.session, set_span_in_context(parent))
        if len(self._parents) > PARENTS_KEPT:
            self._parents.pop(next(iter(self._parents)))

    def _tool(self, event: ToolEnded) -> None:
        from opentelemetry.trace import Status, StatusCode, set_span_in_context

        started, tool_input = self._tools.pop(event.call_id, (_ns(event.at), {}))
        turn = self._turns.get(event.session)
        context = set_span_in_context(turn.span) if turn is not None else None
        arguments = json.dumps(tool_input, ensure_ascii=False, default=str)
        span = self.tracer.start_span(
            f"execute_tool {event.tool}",
            context=context,
            start_time=started,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.tool,
                "gen_ai.tool.call.id": event.call_id,
                "habakkuk.tool.outcome": event.status,
                "habakkuk.tool.seconds": event.seconds or 0.0,
                "habakkuk.tool.input.size": len(arguments),
                "habakkuk.tool.output.size": len(event.preview),
            },
        )
        if self.config.include_content:
            span.set_attribute("gen_ai.tool.call.arguments", self._content(arguments))
            span.set_attribute("gen_ai.tool.call.result", self._content(event.preview))
        if event.is_error:
            span.set_status(Status(StatusCode.ERROR, event.status))
        span.end(end_time=_ns(event.at))

    def attempt(self, attempt: ModelAttempt) -> None:
        """One model request attempt (a router observer): a client span under its turn."""
        from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

        self._drain()  # the turn's start may still wait in the subscription
        ended = time.time()
        ref = attempt.ref
        turn = self._turns.get(attempt.caller.session)
        context = set_span_in_context(turn.span) if turn is not None else None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": ref.provider,
            "gen_ai.request.model": ref.model,
            "habakkuk.purpose": attempt.caller.purpose,
            "habakkuk.outcome": attempt.outcome,
        }
        usage = attempt.usage
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            attributes["habakkuk.usage.cache_read_tokens"] = usage.cache_read_tokens
            cost = self.cost(str(ref), dict(usage.__dict__)) if self.cost else None
            if cost is not None:
                attributes["habakkuk.cost_usd"] = cost
        if attempt.reply is not None:
            attributes["habakkuk.reply.size"] = len(attempt.reply.text)
        else:
            attributes["error.type"] = attempt.outcome
        span = self.tracer.start_span(
            f"chat {ref.model}",
            context=context,
            kind=SpanKind.CLIENT,
            start_time=_ns(ended - attempt.seconds),
            attributes=attributes,
        )
        if self.config.include_content:
            asked = _last_user_text(attempt.request.messages)
            if asked:
                span.set_attribute("gen_ai.prompt", self._content(asked))
                if turn is not None and not turn.user_message:
                    turn.span.set_attribute("habakkuk.user_message", self._content(asked))
                    turn.user_message = True
            if attempt.reply is not None and attempt.reply.text:
                span.set_attribute("gen_ai.completion", self._content(attempt.reply.text))
        if attempt.reply is None:
            span.set_status(Status(StatusCode.ERROR, attempt.outcome))
        span.end(end_time=_ns(ended))


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _last_user_text(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if message.role == "user" and message.text:
            return str(message.text)
    return ""


def open_tracing(
    config: Any, env: Any, bus: EventBus, router: Router, cost: CostOf | None = None
) -> Tracing | None:
    """Start tracing when `telemetry:` is configured (None otherwise, or when the
    `telemetry` extra is missing, which is logged)."""
    telemetry: TelemetryConfig | None = config.telemetry
    if telemetry is None:
        return None
    from .i18n import t
    from .secret_shapes import secret_variables
    from .telemetry_config import parse_headers

    headers = parse_headers(env.get(telemetry.headers_env) or "") if telemetry.headers_env else {}
    secrets = secret_variables(config, env, {}) if telemetry.include_content else {}
    try:
        tracing = Tracing(telemetry, bus, router, headers=headers, cost=cost, secrets=secrets)
    except TelemetryMissing as exc:
        log.warning("%s", t("telemetry.missing", reason=str(exc)))
        return None
    tracing.start()
    log.info("traces go to %s", telemetry.traces_url)
    return tracing
