"""Every approval waiting on a home, whichever process waits for it.

A call waits for a human in one of two places: this process's `ApprovalHub`
(turns run here by the terminal, the dashboard's web chat, and chat turns, whose
requests the gateway also puts in the hub), or a chat prompt recorded in
control.db by a turn of another process (a `--serve` holding the Telegram
account while the user looks at the terminal). `merge_waiting` makes one list of
both; the runtime feeds it and answers through the hub for local ones, through
control.db for the others. `ApprovalsAccess` is the approvals service's Protocol (the hub
of habakkuk.services.approvals with this list and its one answer path), declared here so
the channels, the server and the terminal share it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .approvals import Answer, ApprovalRequest, Approver

TERMINAL = "terminal"


@dataclass
class WaitingApproval:
    """One call waiting for allow or deny, wherever it waits."""

    id: str
    tool: str
    summary: str
    reason: str  # a reviewer's doubt, when it had one
    agent: str
    session: str
    turn: str
    since: float  # epoch seconds
    # Where it was asked: "terminal", "web", or a chat conversation such as "telegram:42".
    where: str
    # True when this process's hub holds it (answered at once, without control.db).
    local: bool
    # The call's arguments; only a local request carries them (chat prompts keep the summary).
    input: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The call on one line: its summary, else its arguments as compact JSON."""
        raw = self.summary or (json.dumps(self.input, ensure_ascii=False) if self.input else "")
        return " ".join(raw.split())


def merge_waiting(
    local: Iterable[ApprovalRequest],
    chat: Iterable[WaitingApproval],
    *,
    since: Callable[[str], float | None],
    where: Mapping[str, str] | None = None,
    now: float,
) -> list[WaitingApproval]:
    """The union of this process's hub requests and control.db's chat approvals.

    A chat approval of a turn running here is in both: it is listed once, local,
    with the chat as its origin and the prompt's time. `since(id)` is when a hub
    request arrived (`now` when unknown); `where` names the origin of hub requests
    that are not chat prompts (default "terminal"). Oldest first.
    """
    prompts = {approval.id: approval for approval in chat}
    merged: dict[str, WaitingApproval] = {}
    for request in local:
        prompt = prompts.get(request.id)
        merged[request.id] = WaitingApproval(
            id=request.id,
            tool=request.tool,
            summary=request.summary,
            reason=request.reason,
            agent=request.agent,
            session=request.session,
            turn=request.turn,
            since=prompt.since if prompt is not None else (since(request.id) or now),
            where=prompt.where if prompt is not None else (where or {}).get(request.id, TERMINAL),
            local=True,
            input=dict(request.input),
        )
    for approval in prompts.values():
        if approval.id not in merged:
            merged[approval.id] = approval
    return sorted(merged.values(), key=lambda a: (a.since, a.id))


class ApprovalsAccess(Approver, Protocol):
    """The approvals service (habakkuk.services.approvals.Approvals): this process's hub,
    the home's waiting list and the one answer path. As an Approver, `approve` registers
    a request as waiting and waits for its answer (a deny after `timeout` seconds)."""

    timeout: float

    @property
    def pending(self) -> list[ApprovalRequest]:
        """This process's waiting requests, oldest first."""
        ...

    def answer(self, approval_id: str, answer: Answer, reason: str = "", by: str = "human") -> bool:
        """Answer a request of this process's hub; False when it no longer waits."""
        ...

    async def waiting(self) -> list[WaitingApproval]:
        """Every call waiting for approval on this home, oldest first."""
        ...

    async def respond(
        self, approval_id: str, answer: Answer, by: str, *, notify: bool = True
    ) -> bool:
        """The one answer path: answer a waiting approval wherever it waits; False when it
        no longer waits (`notify`: tell its chat who answered)."""
        ...
