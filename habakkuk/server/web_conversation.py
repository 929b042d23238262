"""A web chat conversation as the chat commands see it (habakkuk.conversation).

The conversation's session is its binding in web.db; a fresh session rebinds
it; a queued turn (/retry, /queue) or compaction is recorded as pending so the
web channel appends its outcome to the conversation when it finishes.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from habakkuk.conversation.commands import Reply, Services, Surface

if TYPE_CHECKING:
    from habakkuk.engine.sessions import Session

    from .chat import WebChannel
    from .webstore import Conversation, WebStore


class WebConversation:
    """One conversation of the web chat (POST /api/chat)."""

    surface: Surface = "web"

    def __init__(
        self,
        channel: WebChannel,
        conversation: str,
        binding: Conversation | None,
        agent: str | None,
        key: str | None,
    ):
        self.channel = channel
        self.conversation = conversation
        self.binding = binding
        self.requested = agent  # the agent the message named, if any
        self.key = key  # the client's message id: what job ids derive from
        self.services: Services = channel.runtime
        self.turn: str | None = None  # a turn the command queued

    @property
    def store(self) -> WebStore:
        return self.channel.store

    async def session(self, *, create: bool = False) -> Session | None:
        if self.binding is not None:
            return await self.channel.runtime.session(self.binding.session)
        if not create:
            return None
        await self._bind(self.requested)
        assert self.binding is not None
        return await self.channel.runtime.session(self.binding.session)

    async def agent(self) -> str:
        return self.binding.agent if self.binding is not None else self.default_agent()

    def default_agent(self) -> str:
        return self.channel.runtime.config.agent(self.requested).name

    async def _bind(self, agent: str | None) -> None:
        session = await self.channel.runtime.new_session(agent, origin="web")
        self.binding = await self.store.bind(self.conversation, session.agent, session.id)

    async def start_fresh(self, agent: str | None = None) -> None:
        if agent is None:
            agent = self.requested or (self.binding.agent if self.binding else None)
        await self._bind(agent or self.default_agent())

    async def continue_in(self, session: Session) -> None:
        self.binding = await self.store.bind(self.conversation, session.agent, session.id)

    def _job_id(self, what: str) -> str:
        from .chat import turn_id_for

        if self.key:
            return turn_id_for(self.conversation, f"{self.key}\0{what}")
        return f"turn_{secrets.token_hex(8)}"

    async def start_turn(self, text: str) -> str | None:
        session = await self.session(create=True)
        assert session is not None and self.binding is not None
        turn = self._job_id("turn")
        await self.store.append(
            self.conversation, "user", text, turn=turn, session=session.id,
            agent=self.binding.agent, dedupe=f"turn:{turn}", pending=True,
        )  # fmt: skip
        self.turn = await self.channel.runtime.submit(session.id, text, turn_id=turn, attended=True)
        return self.turn

    async def compact(self, session_id: str) -> Reply:
        """Queued as a turn of the session; its outcome is appended when it ends."""
        job = self._job_id("compact")
        await self.store.add_pending(job, self.conversation, session_id)
        self.turn = await self.channel.runtime.compact_session(session_id, job_id=job)
        return Reply()

    async def send_file(self, data: bytes, name: str, caption: str) -> bool:
        return False  # the web chat gets the export's path instead

    def about(self) -> list[str]:
        return [
            "**You** the web chat (your token let you in)",
            "**Allowed by** token",
            f"**Channel** web, conversation {self.conversation}",
        ]

    async def state(self) -> str | None:
        return "**Channel** web: connected"
