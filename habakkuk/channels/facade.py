"""What the channels use of the runtime: `RuntimeFacade`, a narrow Protocol.

The composition root (habakkuk.runtime.Runtime) implements it; the gateway, the channel
service and a channel conversation are typed by it, never by the runtime. It lives apart
from the gateway so the modules the gateway imports can name it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from habakkuk.conversation.commands import CommandSessions, CommandTurns, Services

if TYPE_CHECKING:
    from collections.abc import Sequence

    from habakkuk.engine.agent.requests import ReplyTo
    from habakkuk.engine.config import Config
    from habakkuk.engine.events import EventBus
    from habakkuk.engine.home import Environment
    from habakkuk.engine.hook_events import HookFirer
    from habakkuk.engine.jobs import Job, JobQueue
    from habakkuk.engine.llm.types import Block
    from habakkuk.engine.sessions import Session, TranscriptStore
    from habakkuk.engine.store import BlobStore
    from habakkuk.engine.toolkit.approvals import Answer, ApprovalDecision, ApprovalRequest


class ChatApprovals(Protocol):
    """What the gateway uses of the approvals service (habakkuk.services.approvals)."""

    timeout: float

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Register `request` as waiting and wait for its answer."""
        ...

    def answer(self, approval_id: str, answer: Answer, reason: str = "", by: str = "human") -> bool:
        """Answer a request of this process's hub."""
        ...

    async def respond(
        self, approval_id: str, answer: Answer, by: str, *, notify: bool = True
    ) -> bool:
        """The one answer path: answer a waiting approval wherever it waits."""
        ...


class GatewaySessions(CommandSessions, Protocol):
    """What the gateway uses of the sessions service (the commands' part included)."""

    async def new_session(
        self, agent: str | None = None, *, origin: str = "cli", chat: bool = False
    ) -> Session: ...


class GatewayTurns(CommandTurns, Protocol):
    """What the gateway uses of the turns service (the commands' part included)."""

    async def submit(
        self,
        session_id: str,
        text: str,
        *,
        turn_id: str | None = None,
        attended: bool = False,
        reply_to: ReplyTo | None = None,
        blocks: Sequence[Block] = (),
    ) -> str: ...

    async def compact_session(
        self,
        session_id: str,
        *,
        job_id: str | None = None,
        reply_to: ReplyTo | None = None,
    ) -> str: ...


class RuntimeFacade(Services, Protocol):
    """What the gateway needs from the runtime (the composition root implements it);
    the chat commands' services included."""

    config: Config
    queue: JobQueue
    transcripts: TranscriptStore
    bus: EventBus
    blobs: BlobStore
    env: Environment

    @property
    def approvals(self) -> ChatApprovals: ...

    @property
    def hooks(self) -> HookFirer:
        """The configured hooks: message_in and message_out fire through them."""
        ...

    @property
    def sessions(self) -> GatewaySessions: ...

    @property
    def turns(self) -> GatewayTurns: ...

    def job_settled(self, job: Job) -> None: ...
