"""What the work layer's runs use of the runtime's services, named once: the sessions
they open and the turns they queue (schedule runs, card runs, board notices, sub-agents'
notices). The runtime's own Sessions and Turns satisfy them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from habakkuk.engine.agent.requests import ReplyTo
from habakkuk.engine.llm.types import Block
from habakkuk.engine.sessions import Session


class SessionMaker(Protocol):
    async def new_session(
        self,
        agent: str | None = None,
        *,
        origin: str = "cli",
        session_id: str | None = None,
        chat: bool = False,
        workspace: Path | None = None,
    ) -> Session: ...


class SubmitsTurns(Protocol):
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


class TurnQueue(SubmitsTurns, Protocol):
    async def wait_turn(self, turn_id: str, *, poll: float = 0.5) -> Any: ...
