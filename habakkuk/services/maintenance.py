"""The background loops of a process that runs maintenance (`--serve` and the terminal
app, not a one-shot `run`): retention, embeddings, the skills curator, the schedules'
ticker, this node's heartbeat and the hot reload of config.yaml and hand-edited notes.

Imported only by such a process: the loops' modules are imported here, when started.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from habakkuk.engine.blobs import BlobStore
from habakkuk.engine.config import Config
from habakkuk.engine.events import EventBus
from habakkuk.engine.home import Home
from habakkuk.engine.hooks import Hooks
from habakkuk.engine.jobs import JobQueue, Lease
from habakkuk.engine.llm.usage import UsageStore
from habakkuk.engine.nodes import NodeRegistry
from habakkuk.engine.pools import FinishedCallback, Pool
from habakkuk.engine.retention import RETENTION_KIND, queue_sweeps, sweep_with
from habakkuk.engine.sessions import TranscriptStore
from habakkuk.engine.state import StateStore
from habakkuk.knowledge.service import Memory
from habakkuk.services.hot_reload import start_hot_reload
from habakkuk.services.overview import ControlRoom
from habakkuk.services.schedules import start_ticker
from habakkuk.work.service import Schedules


class MaintenanceHost(Protocol):
    """What the loops need of the runtime that starts them."""

    home: Home
    queue: JobQueue
    memory: Memory
    schedules: Schedules
    nodes: NodeRegistry
    hooks: Hooks  # replaced in place by the hot reload
    bus: EventBus
    control: ControlRoom
    transcripts: TranscriptStore  # what retention prunes, with the queue, state and blobs
    blobs: BlobStore
    state: StateStore
    usage: UsageStore

    @property
    def config(self) -> Config: ...


def start_maintenance(host: MaintenanceHost) -> list[asyncio.Task[None]]:
    """Start the maintenance loops as tasks; the caller cancels them at close. The config
    is read from `host` at each use, so a reload reaches the loops."""
    from habakkuk.knowledge.embed_loop import embed_every_minute
    from habakkuk.knowledge.skills.curator_loop import curate_when_due

    return [
        asyncio.create_task(queue_sweeps(host.queue), name="retention"),
        asyncio.create_task(embed_every_minute(host.memory, lambda: host.config.agents)),
        asyncio.create_task(curate_when_due(host.home, lambda: host.config, host.memory)),
        start_ticker(host.schedules),
        asyncio.create_task(host.nodes.run(), name="node"),  # registered, beating
        start_hot_reload(host),  # config.yaml followed from here on
    ]


def retention_pool(host: MaintenanceHost, on_finished: FinishedCallback) -> Pool:
    """The pool that runs the retention job (the sweep `queue_sweeps` queues): one at a
    time, under the config of the moment."""

    async def sweep(lease: Lease) -> dict[str, Any]:
        return await sweep_with(
            host.queue,
            host.transcripts,
            host.blobs.root,
            host.config.retention,
            state=host.state,
            usage=host.usage,
            blobs=host.blobs,
        )

    return Pool(host.queue, [RETENTION_KIND], sweep, concurrency=1, on_finished=on_finished)
