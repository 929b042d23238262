"""Starting the memory review in a long-lived process: the runtime's one call.

`memory_review_pool(...)` builds the jobs' dependencies from the config and the memory
service: a one-worker pool that also runs the once-a-minute scan (see review_schedule).
It lives here so runtime.py only adds the returned pool to its own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from habakkuk.engine.config import Config
from habakkuk.engine.home import Home
from habakkuk.engine.jobs import JobQueue
from habakkuk.engine.llm.router import Router
from habakkuk.engine.pools import FinishedCallback, Pool
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.store import Database

from .review import ReviewDeps, ReviewSettings
from .review_schedule import ReviewPool
from .review_store import ReviewStore

log = logging.getLogger(__name__)


def review_settings(config: Config) -> ReviewSettings:
    """The review's view of `memory:` (and the config's timezone)."""
    memory = config.memory
    return ReviewSettings(
        review=memory.review,
        idle_seconds=memory.review_idle_seconds,
        model=memory.review_chain[0] if memory.review_chain else None,
        budget=memory.review_budget,
        nightly=None if memory.nightly == "off" else memory.nightly,
        stale_days=memory.stale_days,
        timezone=config.timezone,
    )


def review_deps(
    memory: Any,
    home: Home,
    config: Config,
    transcripts: TranscriptStore,
    router: Router,
) -> ReviewDeps:
    """The jobs' dependencies on the real memory service (`runtime.memory`)."""
    database: Callable[[str], Awaitable[Database]] = memory.database

    async def store_for(agent: str) -> ReviewStore:
        return ReviewStore(await database(agent))

    async def read_state(agent: str) -> dict[str, str | None]:
        rows = await (await database(agent)).fetchall("SELECT slug, read_at FROM notes")
        return {row[0]: row[1] for row in rows}

    async def vectors(agent: str) -> dict[str, Any]:
        embeddings = config.memory.embeddings
        if embeddings is None:
            return {}
        import numpy as np  # only with embeddings: numpy costs ~14 MB of a process

        rows = await (await database(agent)).fetchall(
            "SELECT n.slug, e.vector FROM notes n JOIN embeddings e"
            " ON e.hash = n.text_hash AND e.model = ?",
            (embeddings.model,),
        )
        return {row[0]: np.frombuffer(row[1], dtype="<f4") for row in rows}

    def untrusted_origin(origin: str) -> bool:
        """Sessions of an email channel are untrusted as a whole (spec: email inbox)."""
        kind, _, name = origin.partition(":")
        channel = config.channels.get(name) if kind == "channel" else None
        return channel is not None and str(channel.type) == "email"

    return ReviewDeps(
        memory=memory,
        store_for=store_for,
        memory_dir=lambda agent: home.agent_dir(agent) / "memory",
        transcripts=transcripts,
        router=router,
        chain_for=lambda agent: config.agent(agent).chain,
        settings=lambda: review_settings(config),
        read_state=read_state,
        vectors=vectors,
        secret_in=memory.secret_in,
        untrusted_origin=untrusted_origin,
    )


class ReviewHost(Protocol):
    """What the review takes from the process that runs it (the runtime)."""

    queue: JobQueue
    memory: Any  # the memory service: MemoryAccess plus `database(agent)`
    home: Home
    config: Config
    transcripts: TranscriptStore
    router: Router


def memory_review_pool(host: ReviewHost, *, on_finished: FinishedCallback | None = None) -> Pool:
    """The review's one-worker pool (with its scan), for the runtime's list of pools."""
    deps = review_deps(host.memory, host.home, host.config, host.transcripts, host.router)
    config = host.config
    return ReviewPool(host.queue, deps, lambda: list(config.agents), on_finished=on_finished)
