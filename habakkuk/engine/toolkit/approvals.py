"""Approvers: who decides a call the policy says to ask about.

An approver answers allow once, allow for the session, or deny, within a
timeout. Unattended runs have no approver, and anything that needs approval is
denied. The terminal, the chat and the reviewer model each implement
`Approver`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from habakkuk.engine.events import ApprovalAnswered, ApprovalAsked, ApprovalWithdrawn
from habakkuk.engine.timeouts import wait_within

Answer = Literal["allow_once", "allow_session", "deny"]
# How a chat is told that someone answered its approval elsewhere ("... from the dashboard.").
APPROVAL_VERBS: dict[Answer, str] = {
    "allow_once": "Approved",
    "allow_session": "Approved for this session",
    "deny": "Denied",
}


@dataclass
class ApprovalRequest:
    """What an approver is shown."""

    agent: str
    session: str
    turn: str
    tool: str
    input: dict[str, Any]
    summary: str
    reason: str = ""  # why a reviewer was unsure, when it was
    id: str = ""
    call_id: str = ""  # the tool call it is about (a client pairs it with the call's card)


@dataclass
class ApprovalDecision:
    answer: Answer
    reason: str = ""
    by: str = "human"

    @property
    def allowed(self) -> bool:
        return self.answer != "deny"


class Approver(Protocol):
    """Decides one approval request; should time out to a deny on its own."""

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision: ...


@runtime_checkable
class ReviewedApprover(Protocol):
    """An approver that lets a reviewer model decide first (reviewer.ReviewerApprover)."""

    def human_behind(self) -> Approver | None:
        """The human it falls back to, None when no one attends."""
        ...


def human_of(approver: Approver | None) -> Approver | None:
    """Who asks a human for `approver`'s turn: a reviewer's fallback human (None when
    there is none), else the approver itself (the terminal, the chat, the dashboard)."""
    if isinstance(approver, ReviewedApprover):
        return approver.human_behind()
    return approver


@dataclass
class SessionGrants:
    """Tools a human allowed "for the session"; keyed by session id."""

    granted: dict[str, set[str]] = field(default_factory=dict)

    def allows(self, session: str, tool: str) -> bool:
        return tool in self.granted.get(session, set())

    def grant(self, session: str, tool: str) -> None:
        self.granted.setdefault(session, set()).add(tool)


class ApprovalHub:
    """Waiting approvals of this process, answerable by any client.

    The hub is an Approver: `approve` registers the request, publishes
    `approval.pending` on the bus and awaits a Future until a client (the
    terminal, the dashboard, a chat) calls `answer`, or the timeout denies it.
    A stopped turn's waiting requests are withdrawn (`approval.withdrawn`).
    """

    def __init__(self, bus: Any, *, timeout: float = 900.0):
        self.bus = bus
        self.timeout = timeout
        self._pending: dict[str, tuple[ApprovalRequest, asyncio.Future[ApprovalDecision]]] = {}
        self._since: dict[str, float] = {}  # waiting request id -> when it arrived (epoch)

    @property
    def pending(self) -> list[ApprovalRequest]:
        """Waiting requests, oldest first."""
        return [request for request, _ in self._pending.values()]

    def since(self, approval_id: str) -> float | None:
        """When a waiting request arrived (epoch seconds); None when it is not waiting."""
        return self._since.get(approval_id)

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        request.id = request.id or f"apr_{secrets.token_hex(6)}"
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._pending[request.id] = (request, future)
        self._since[request.id] = time.time()
        self.bus.publish(ApprovalAsked(session=request.session, id=request.id, request=request))
        try:
            return await wait_within(asyncio.shield(future), self.timeout)
        except TimeoutError:
            return ApprovalDecision("deny", "nobody answered in time", by="timeout")
        finally:
            self._pending.pop(request.id, None)
            self._since.pop(request.id, None)
            if not future.done():
                future.cancel()
                self.bus.publish(ApprovalWithdrawn(session=request.session, id=request.id))
            else:
                self.bus.publish(ApprovalAnswered(session=request.session, id=request.id))

    def answer(self, approval_id: str, answer: Answer, reason: str = "", by: str = "human") -> bool:
        """Answer a waiting request; False when it is no longer waiting."""
        entry = self._pending.get(approval_id)
        if entry is None or entry[1].done():
            return False
        entry[1].set_result(ApprovalDecision(answer, reason, by))
        return True
