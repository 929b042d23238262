"""What the channels use of the runtime: `RuntimeFacade`, a narrow Protocol.

The composition root (habakkuk.runtime.Runtime) implements it; the gateway, the channel
service and a channel conversation are typed by it, never by the runtime. It lives apart
from the gateway so the modules the gateway imports can name it too. The services in it
are typed by their own Protocols, declared once below the channels (the commands'
`Services` brings sessions, turns and the rest; engine.toolkit.approvals.ApprovalsAccess
the approvals).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from habakkuk.conversation.commands import Services

if TYPE_CHECKING:
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.home import Environment, Home
    from habakkuk.engine.hook_events import HookFirer
    from habakkuk.engine.jobs import Job, JobQueue
    from habakkuk.engine.sessions import TranscriptStore
    from habakkuk.engine.store import BlobStore
    from habakkuk.engine.toolkit.waiting import ApprovalsAccess


class RuntimeFacade(Services, Protocol):
    """What the gateway needs from the runtime (the composition root implements it);
    the chat commands' services included."""

    config: Config
    queue: JobQueue
    transcripts: TranscriptStore
    bus: EventBus
    blobs: BlobStore
    env: Environment
    home: Home

    @property
    def approvals(self) -> ApprovalsAccess: ...

    @property
    def hooks(self) -> HookFirer:
        """The configured hooks: message_in and message_out fire through them."""
        ...

    def job_settled(self, job: Job) -> None: ...
