"""The stream skeleton every model adapter shares.

An adapter (a `StreamingProvider`) checks its key, builds its request's
parameters, says how its SDK opens the stream, and brings an assembler that
maps the SDK's raw events to provider-neutral deltas and builds the final
message. `StreamingProvider.stream` does the rest the same way for every
API: parameters built on a worker thread when blobs must be read, SDK and
transport errors mapped through `errors.classify` (programming errors
propagate as they are), the stream closed however it ends, and the
assembler's StreamDone last (a stream cut before its end is the assembler's
error, raised there, unmapped).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from ...config import ProviderConfig
from ...presets import key_optional
from ..provider import ProviderError
from ..types import ModelRequest, StreamDone, StreamEvent
from . import ClientCache, has_media, require_key
from .errors import classify

log = logging.getLogger(__name__)

C = TypeVar("C")


class Assembler(Protocol):
    """One API's event mapping: raw SDK events in, deltas out, the message at the end."""

    def feed(self, raw: Any) -> Iterable[StreamEvent]:
        """The deltas one raw event carries, in order (often none)."""
        ...

    def done(self) -> StreamDone:
        """The final event; raises ProviderError when the stream ended too early."""
        ...


class StreamingProvider(ABC):
    """The base of the SDK adapters: `stream` is the one skeleton, each API fills in its steps.

    `stream` is itself the async generator the router iterates (no nested
    generator), so closing it closes the SDK stream at once.
    """

    name: str

    @abstractmethod
    def prepare(self, request: ModelRequest) -> Any:
        """What opening the stream needs (the SDK client), after checking the key."""

    @abstractmethod
    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The SDK call's keyword arguments for `request`."""

    @abstractmethod
    def open_stream(self, prepared: Any, params: dict[str, Any]) -> Awaitable[Any]:
        """Start the SDK's streamed call; awaiting it gives the async iterable of raw events."""

    @abstractmethod
    def assembler(self) -> Assembler:
        """A fresh event mapping for one call."""

    def explain(self, error: ProviderError, request: ModelRequest) -> ProviderError:
        """`error` as the user should read it (an adapter adds what its request offered)."""
        return error

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield the call's deltas as they arrive, then StreamDone."""
        prepared = self.prepare(request)
        if has_media(request.messages):
            # Media blocks read their blobs from disk: keep that off the event loop.
            params = await asyncio.to_thread(self.params, request)
        else:
            params = self.params(request)
        assembler = self.assembler()
        stream = None
        try:
            stream = await self.open_stream(prepared, params)
            async for raw in stream:
                for event in assembler.feed(raw):
                    yield event
        except Exception as exc:
            mapped = classify(exc, self.name)
            if mapped is None:
                raise
            raise self.explain(mapped, request) from exc
        finally:
            if stream is not None:
                await close_quietly(stream)
        yield assembler.done()


class ClientStreamingProvider(StreamingProvider, Generic[C]):
    """A StreamingProvider over an official SDK, its clients cached by (base URL, key)."""

    def __init__(
        self,
        config: ProviderConfig,
        default_name: str,
        new_client: Callable[[str | None, str], C],
    ):
        self.name = config.name or default_name
        self.base_url = config.base_url
        self.keyless_ok = key_optional(config)
        self.clients: ClientCache[C] = ClientCache(new_client)

    def prepare(self, request: ModelRequest) -> C:
        """The SDK client for the request's key (a ProviderError when none is set)."""
        return self._client(request.api_key)

    def warm(self, api_key: str | None) -> None:
        """Make the SDK client a call with `api_key` will use, now. Importing the SDK and
        making its client are most of a first call's cost (a third of a second for
        openai), so a worker thread does it while the caller prepares the turn
        (ProviderHub.warm). Blocking; a missing key raises as the call would."""
        self._client(api_key)

    def _client(self, api_key: str | None) -> C:
        key = require_key(api_key, self.name, self.keyless_ok)
        return self.clients.get(self.base_url, key)

    async def aclose(self) -> None:
        """Close the SDK clients."""
        await self.clients.aclose()


async def close_quietly(stream: Any) -> None:
    """Close an SDK stream whose connection may already be gone."""
    close = getattr(stream, "close", None) or getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        result = close()
        if hasattr(result, "__await__"):
            await result
    except Exception as exc:
        log.debug("closing a stream failed: %s", exc)
