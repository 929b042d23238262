"""The router owns all model-call policy: retries, key choice, fallback down the chain.

Adapters never retry. For each model of the chain (the session's choice first,
then the agent's model and fallbacks) the router tries the call, retries
transient errors with jittered backoff (honouring retry-after), and moves to
the next model on errors another model can fix. Bad requests stop at once, but for
one: a model that refuses images or documents is tried again at once text-only, and
stays text-only for the life of the router (media.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ..config import ModelRef
from .credentials import resolve_key
from .media import has_media, rejects_media, text_only
from .provider import FALLBACK, Provider, ProviderError
from .types import Message, ModelRequest, StreamDone, StreamEvent, Usage

log = logging.getLogger(__name__)

# Errors that belong to the key: another key of the provider is tried at once.
KEY_ERRORS = frozenset({"rate_limit", "auth", "billing"})

EventSink = Callable[[StreamEvent, ModelRef], None]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Caller:
    """Who a call is for, so usage can be attributed."""

    agent: str = ""
    session: str = ""
    purpose: str = "turn"
    turn: str = ""  # the turn the call is part of, when it is one's (per-turn limits)


@dataclass
class RouterResult:
    message: Message
    usage: Usage
    model: ModelRef
    stop_reason: str


class RetryReset(Exception):
    """Sent to the sink's owner: output streamed so far is void (the call is retried)."""


class ProviderSource(Protocol):
    """Hands the router a provider and a key for one model reference."""

    def provider(self, ref: ModelRef) -> Provider: ...

    def key(self, ref: ModelRef) -> str | None: ...

    def report(self, ref: ModelRef, key: str | None, error: ProviderError | None) -> None: ...


UsageHook = Callable[[ModelRef, Caller, Usage], Awaitable[None]]
# Run before each attempt (llm/budget.py): it may refuse the call by raising, and returns
# what settles it: called with the usage reported, or None when the attempt failed.
Settle = Callable[[Usage | None], None]
PreCallHook = Callable[[ModelRef, Caller, ModelRequest], Awaitable[Settle]]


@dataclass(frozen=True)
class ModelAttempt:
    """One request attempt, as the router's observers see it (metrics, traces)."""

    ref: ModelRef
    caller: Caller
    seconds: float
    outcome: str  # "ok" or the error class
    usage: Usage | None
    request: ModelRequest
    reply: Message | None


AttemptHook = Callable[[ModelAttempt], None]


class Router:
    """Runs one logical model call down a chain of models."""

    def __init__(
        self,
        source: ProviderSource,
        *,
        max_retries: int = 2,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        on_usage: UsageHook | None = None,
        rng: random.Random | None = None,
        before_call: PreCallHook | None = None,
    ):
        self.source = source
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.on_usage = on_usage
        self.rng = rng or random.Random()
        self.before_call = before_call
        # The longest retry-after worth waiting for before moving down the chain.
        self.max_wait = max_delay * 4
        # Models that refused images or documents: sent text-only from then on.
        self.text_only: set[ModelRef] = set()
        # Told of every attempt (the /metrics duration, traces); none: nothing is timed.
        self.observers: list[AttemptHook] = []

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Backoff before retry `attempt` (1-based); retry-after wins when given."""
        if retry_after is not None and retry_after >= 0:
            return float(min(retry_after, self.max_wait))
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)

    async def complete(
        self,
        chain: list[ModelRef],
        request: ModelRequest,
        *,
        caller: Caller = Caller(),
        on_event: EventSink | None = None,
        on_reset: Callable[[], object] | None = None,
    ) -> RouterResult:
        """Stream `request` through the first model of `chain` that answers."""
        if not chain:
            raise ProviderError("bad_request", "no model configured")
        last: ProviderError | None = None
        for ref in chain:
            attempt = 0
            tried_keys: set[str | None] = set()
            while True:
                key = self.source.key(ref)
                tried_keys.add(key)
                sent = request
                if ref in self.text_only and has_media(request):
                    sent = text_only(request, str(ref))
                # Outside the try: a refusal ends the call, it is no model's failure.
                settle = await self.before_call(ref, caller, sent) if self.before_call else None
                started = time.monotonic() if self.observers else 0.0
                try:
                    provider = self.source.provider(ref)
                    api_key = await resolve_key(self.source, ref, key)  # a login's token
                    result = await self._one_call(provider, ref, sent, api_key, on_event, on_reset)
                except BaseException as exc:
                    if settle is not None:
                        settle(None)
                    if not isinstance(exc, ProviderError):
                        raise
                    exc.provider = exc.provider or ref.provider
                    if self.observers:
                        self._observe(ref, caller, started, exc.error_class, sent, None)
                    if sent is request and has_media(request) and rejects_media(exc):
                        # Not the key's fault nor the model's health: the same call, text-only.
                        log.warning("%s refuses images or documents; going on text-only", ref)
                        self.text_only.add(ref)
                        continue
                    self.source.report(ref, key, exc)
                    last = exc
                    log.warning("model call %s failed: %s", ref, exc)
                    if exc.error_class in KEY_ERRORS and self.source.key(ref) not in tried_keys:
                        continue  # another key of the same provider, at once
                    attempt += 1
                    if exc.transient and attempt <= self.max_retries:
                        wait = self.delay(attempt, exc.retry_after)
                        # A long retry-after is better spent on the next model.
                        if exc.retry_after is None or exc.retry_after <= self.max_wait:
                            await self.sleep(wait)
                            tried_keys.clear()
                            continue
                    if exc.error_class in FALLBACK:
                        break  # next model of the chain
                    raise
                self.source.report(ref, key, None)
                if self.observers:
                    self._observe(ref, caller, started, "ok", sent, result)
                if self.on_usage is not None:
                    try:
                        await self.on_usage(ref, caller, result.usage)
                    except Exception as exc:  # accounting must never cost the user a reply
                        log.warning("recording usage of %s failed: %s", ref, exc)
                if settle is not None:  # after the row is written (services/budget.py)
                    settle(result.usage)
                return result
        assert last is not None
        raise last

    def _observe(
        self,
        ref: ModelRef,
        caller: Caller,
        started: float,
        outcome: str,
        request: ModelRequest,
        result: RouterResult | None,
    ) -> None:
        attempt = ModelAttempt(
            ref,
            caller,
            time.monotonic() - started,
            outcome,
            result.usage if result is not None else None,
            request,
            result.message if result is not None else None,
        )
        for observer in list(self.observers):
            try:
                observer(attempt)
            except Exception:  # an observer must never cost the user a reply
                log.exception("observing a model call failed")

    async def _one_call(
        self,
        provider: Provider,
        ref: ModelRef,
        request: ModelRequest,
        key: str | None,
        on_event: EventSink | None,
        on_reset: Callable[[], object] | None,
    ) -> RouterResult:
        call = replace(request, model=ref.model, api_key=key)
        streamed = False
        try:
            async for event in provider.stream(call):
                if isinstance(event, StreamDone):
                    event.message.model = str(ref)
                    return RouterResult(event.message, event.usage, ref, event.stop_reason)
                streamed = True
                if on_event is not None:
                    on_event(event, ref)
        except ProviderError:
            if streamed and on_reset is not None:
                on_reset()
            raise
        except (TimeoutError, OSError) as exc:
            if streamed and on_reset is not None:
                on_reset()
            raise ProviderError("network", str(exc) or type(exc).__name__) from exc
        if streamed and on_reset is not None:
            on_reset()
        raise ProviderError("network", "the stream ended without a final message")
