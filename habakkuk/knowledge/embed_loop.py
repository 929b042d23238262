"""Once a minute in long-lived processes: embed the notes that changed by hand.

Writes through Habakkuk embed their notes at once; a note edited in an editor is
noticed by the next reindex, and this loop is what embeds it when nobody searches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 60.0


class EmbedsNotes(Protocol):
    """What the loop needs of the memory service."""

    @property
    def embeddings_enabled(self) -> bool:
        """Whether `memory.embeddings` is configured."""
        ...

    async def embed_pending(self, agent: str) -> int:
        """Reindex the agent's notes and embed those without a vector; how many."""
        ...


async def embed_every_minute(
    memory: EmbedsNotes,
    agents: Callable[[], Iterable[str]],
    *,
    interval: float = INTERVAL_SECONDS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Embed every agent's pending notes now and then every `interval` seconds, until
    cancelled. One agent's failure is logged and does not stop the others."""
    if not memory.embeddings_enabled:
        return
    while True:
        for agent in list(agents()):
            try:
                count = await memory.embed_pending(agent)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("memory embeddings: the pass over agent %r failed", agent)
                continue
            if count:
                log.info("memory embeddings: %d note(s) of agent %r embedded", count, agent)
        await sleep(interval)
