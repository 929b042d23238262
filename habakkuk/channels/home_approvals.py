"""Terminal and web approvals recorded in control.db, so every process of the home sees them.

A turn that waits for the terminal or the web chat waits in its own process's
approval hub, which no other process can see. `RecordedApprover` also writes the
request to the shared prompt table (as a chat approval is), so a second terminal
or a `--serve` lists it (`Runtime.approvals.waiting`, /api/approvals) and can
answer it there; the answer is picked up from control.db. The first answer wins,
whichever process gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from typing import TYPE_CHECKING, Protocol

from habakkuk.channels.store import ChannelStore, Prompt
from habakkuk.conversation.answers import ANSWERS, answer_named

if TYPE_CHECKING:
    from habakkuk.engine.toolkit.approvals import Answer, ApprovalDecision, ApprovalRequest
    from habakkuk.tools.clarify import ClarifyRequest

# How often control.db is read for an answer given in another process.
POLL_SECONDS = 0.5


class AskingHub(Protocol):
    """What the approver uses of this process's hub (services.approvals.Approvals): it
    waits for and takes answers, and puts clarify questions to the attached terminal."""

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision: ...

    def answer(
        self, approval_id: str, answer: Answer, reason: str = "", by: str = "human"
    ) -> bool: ...

    async def ask(self, request: ClarifyRequest) -> str | None: ...


class RecordedApprover:
    """The hub as approver, with the request mirrored in control.db while it waits."""

    def __init__(self, hub: AskingHub, store: ChannelStore, where: str):
        self.hub = hub
        self.store = store
        self.where = where  # "terminal" or "web": the origin other processes show

    async def approve(self, request: ApprovalRequest) -> ApprovalDecision:
        """Wait in the hub; an answer recorded in control.db by another process answers it."""
        request.id = request.id or f"apr_{secrets.token_hex(6)}"
        await self.store.ensure()
        prompt = Prompt(
            request.id, "approval", self.where, request.turn, secrets.token_hex(4),
            list(ANSWERS), None, "", time.time(), tool=request.tool, summary=request.summary,
            reason=request.reason, agent=request.agent, session=request.session,
        )  # fmt: skip
        await self.store.open_prompt(prompt)
        watcher = asyncio.create_task(self._watch(request.id))
        try:
            return await self.hub.approve(request)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            with contextlib.suppress(Exception):  # the row only lists it; a leftover is unlisted
                await self.store.close_prompt(request.id)

    async def ask(self, request: ClarifyRequest) -> str | None:
        """Clarify questions go to the hub's attached asker (the terminal), as before."""
        return await self.hub.ask(request)

    async def _watch(self, request_id: str) -> None:
        """Hand an answer another process wrote in control.db to the hub."""
        while True:
            found = await self.store.prompt_answer(request_id)
            if found is not None:
                answer = answer_named(found[0])
                if answer is not None:
                    self.hub.answer(request_id, answer, by=found[1])
                return
            await asyncio.sleep(POLL_SECONDS)
