"""Approvers: who decides a call the policy says to ask about.

An approver answers allow once, allow for the session, or deny, within a
timeout. Unattended runs have no approver, and anything that needs approval is
denied. The terminal, the chat and the reviewer model each implement
`Approver`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Answer = Literal["allow_once", "allow_session", "deny"]


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


@dataclass
class SessionGrants:
    """Tools a human allowed "for the session"; keyed by session id."""

    granted: dict[str, set[str]] = field(default_factory=dict)

    def allows(self, session: str, tool: str) -> bool:
        return tool in self.granted.get(session, set())

    def grant(self, session: str, tool: str) -> None:
        self.granted.setdefault(session, set()).add(tool)
