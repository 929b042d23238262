"""A runtime's device nodes, made only where the config has a `nodes:` section.

The hub (hub.py: the live connections, the pairing store) is imported only then; the
node_invoke job kind (relay.py) is declared either way, so any process takes back an
interrupted node call as a serving one would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import relay as _relay  # noqa: F401  # the node_invoke job kind

if TYPE_CHECKING:
    from habakkuk.engine.device_config import NodesConfig
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.storage import Storage

    from .hub import NodeHub


def build_devices(
    config: NodesConfig | None,
    storage: Storage,
    queue: JobQueue | None = None,
    bus: EventBus | None = None,
) -> NodeHub | None:
    """The device nodes of a runtime: None without a `nodes:` section."""
    if config is None:
        return None
    from .hub import NodeHub

    return NodeHub(config, storage, queue, bus)
