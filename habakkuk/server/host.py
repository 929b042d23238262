"""What the HTTP server uses of the runtime: a narrow Protocol, so server/ never imports it.

`habakkuk.runtime.Runtime` provides it; the server is started by the runtime's HTTP
listener (`habakkuk.server.listener`) and is handed the runtime as a `ServerHost`. It
composes the services' own Protocols, each declared once beside its service (or in the
engine, where the layers below the services use it too): what the MCP endpoint
(McpHost) and the chat commands (Services) use, the approvals and the control room.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from habakkuk.conversation.commands import Services
from habakkuk.protocols.mcp.server import McpHost

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.home import Environment, Home
    from habakkuk.engine.jobs import JobQueue
    from habakkuk.engine.llm.router import Router
    from habakkuk.engine.storage import Storage
    from habakkuk.engine.store import BlobStore
    from habakkuk.engine.toolkit.waiting import ApprovalsAccess
    from habakkuk.protocols.nodes.hub import NodeHub
    from habakkuk.services.overview import ControlAccess


class ServerHost(McpHost, Services, Protocol):
    """The runtime as the server sees it: sessions, turns, approvals, usage and state."""

    config: Config
    env: Environment
    home: Home
    bus: EventBus
    blobs: BlobStore
    queue: JobQueue
    router: Router  # its observers see each model request attempt (/metrics)
    storage: Storage  # where the home's databases are (web.db opens there too)
    devices: NodeHub | None  # device nodes (None without a nodes: section)

    def channel_service(self) -> Any:
        """The chat channels (habakkuk.channels.service.ChannelService), made on first use."""
        ...

    @property
    def approvals(self) -> ApprovalsAccess:
        """This process's approval hub and the one answer path (services.approvals)."""
        ...

    @property
    def control(self) -> ControlAccess:
        """The control room's reads (services.overview)."""
        ...
