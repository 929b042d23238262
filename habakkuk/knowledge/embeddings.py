"""Turns texts into unit vectors through an OpenAI-compatible embeddings endpoint.

`memory.embeddings` names a provider of type openai (which covers local servers such as
ollama) and a model. The official SDK is used with the provider's base URL and key, the
same clients and keys the chat adapters use. Texts go out in batches of 64. Any error
pauses embedding for a minute (the clock is injectable): meanwhile `embed` answers None
at once and memory search ranks with FTS alone. Errors are logged by class and status
only, never with a key or the texts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from habakkuk.engine.config import Config, ModelRef, ProviderConfig
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Environment
from habakkuk.engine.llm.adapters import ClientCache, require_key
from habakkuk.engine.llm.adapters.errors import classify
from habakkuk.engine.llm.adapters.openai_chat import new_client
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.engine.presets import key_optional

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

BATCH_SIZE = 64
PAUSE_SECONDS = 60.0
# A background batch may take a while on a local CPU server; a search's query
# embedding waits much less, so a slow server costs a search little.
BATCH_TIMEOUT = 60.0
QUERY_TIMEOUT = 10.0

Vector = np.ndarray[Any, np.dtype[np.float32]]


class Embedder:
    """One embedding model of one provider, with the minute-long pause after an error."""

    def __init__(
        self,
        provider: ProviderConfig,
        model: str,
        key: Callable[[], str | None],
        *,
        clock: Callable[[], float] = time.monotonic,
        client_factory: Callable[[str | None, str], AsyncOpenAI] = new_client,
    ):
        if provider.type != "openai":
            raise ConfigError(
                f"memory.embeddings.provider: {provider.name!r} is of type "
                f"{provider.type!r}; embeddings need a provider of type openai"
            )
        if not model:
            raise ConfigError("memory.embeddings.model: name the embedding model")
        self.provider = provider
        self.model = model
        self._key = key
        self._clock = clock
        self._clients: ClientCache[AsyncOpenAI] = ClientCache(client_factory)
        self._paused_until = 0.0

    @property
    def paused(self) -> bool:
        """Whether an error less than a minute ago stops embedding for now."""
        return self._clock() < self._paused_until

    def pause(self) -> None:
        """Stop embedding for PAUSE_SECONDS from now."""
        self._paused_until = self._clock() + PAUSE_SECONDS

    async def embed(self, texts: Sequence[str], *, query: bool = False) -> list[Vector] | None:
        """Unit-length float32 vectors for `texts`, in order, or None when embedding is
        paused or a batch failed (which pauses it). `query` uses the shorter timeout."""
        if not texts:
            return []
        if self.paused:
            return None
        vectors: list[Vector] = []
        for start in range(0, len(texts), BATCH_SIZE):
            batch = list(texts[start : start + BATCH_SIZE])
            try:
                vectors.extend(await self._batch(batch, QUERY_TIMEOUT if query else BATCH_TIMEOUT))
            except Exception as exc:  # any failure: pause, and let search fall back to FTS
                self._failed(exc)
                return None
        return vectors

    async def _batch(self, texts: list[str], timeout: float) -> list[Vector]:
        key = require_key(self._key(), self.provider.name, key_optional(self.provider))
        client = self._clients.get(self.provider.base_url, key)
        result = await client.embeddings.create(model=self.model, input=texts, timeout=timeout)
        by_index = {item.index: item.embedding for item in result.data}
        if sorted(by_index) != list(range(len(texts))):
            raise ValueError(f"{len(result.data)} embeddings for {len(texts)} texts")
        out = []
        for index in range(len(texts)):
            vector = np.asarray(by_index[index], dtype=np.float32)
            norm = float(np.linalg.norm(vector))
            if vector.ndim != 1 or not vector.size or not np.isfinite(norm) or norm == 0.0:
                raise ValueError(f"embedding {index} is not a usable vector")
            out.append((vector / norm).astype(np.float32))
        return out

    def _failed(self, exc: BaseException) -> None:
        self.pause()
        mapped = classify(exc, self.provider.name)
        # The class and status only: SDK messages can quote a (masked) key or the input.
        if mapped is not None:
            status = f", HTTP {mapped.status}" if mapped.status else ""
            what = f"{mapped.error_class}{status}"
        else:
            what = type(exc).__name__
        log.warning(
            "memory embeddings (%s, %s): paused for %d s after an error (%s); "
            "search uses full-text ranking meanwhile",
            self.provider.name,
            self.model,
            int(PAUSE_SECONDS),
            what,
        )

    async def aclose(self) -> None:
        """Close the SDK clients' connection pools."""
        await self._clients.aclose()


def build_embedder(
    config: Config,
    provider_name: str,
    model: str,
    env: Environment,
    home_root: Path,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Embedder:
    """The embedder `memory.embeddings` configures, its key found as the chat adapters'
    are (environment, HOME/.env, then the OS keyring)."""
    provider = config.providers.get(provider_name)
    if provider is None:
        raise ConfigError(
            f"memory.embeddings.provider: {provider_name!r} is not one of the configured providers"
        )
    hub = ProviderHub(config, env, home_root)
    ref = ModelRef(provider_name, model)
    return Embedder(provider, model, lambda: hub.key(ref), clock=clock)
