"""The web chat as a channel adapter (type `web`).

Messages come in through the HTTP server (POST /api/chat hands an
`InboundMessage` to the gateway), so `run` only keeps the account alive for
the supervisor. What the gateway and the delivery worker send is appended to
the conversation's log in web.db, which wakes the event streams open on it.

A web conversation id may hold any printable character but `/`; as an address
chat it is written with `%` and `:` escaped, since `:` separates an address.
Every append is deduped by its delivery job id, so a delivery retried after a
crash appends nothing twice; a turn's reply keeps the `reply:<turn>` key.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Protocol

from habakkuk.engine.config import ChannelConfig

from .adapter import Adapter, Address, Beat, Button, Capability, Inbox, SendError
from .deliveries import SENDING
from .delivery_types import ReplyDelivery

KEEPALIVE_SECONDS = 10.0
PROMPT_PREFIX = "prompt:"
QUESTION_PREFIX = "ask_"  # a clarify prompt (the gateway's ids); the rest are approvals


class WebLog(Protocol):
    """The part of web.db the adapter writes (habakkuk.server.webstore.WebStore)."""

    async def append(
        self,
        conversation: str,
        role: str,
        text: str,
        *,
        turn: str = "",
        session: str = "",
        agent: str = "",
        dedupe: str | None = None,
    ) -> tuple[Any, bool]: ...

    async def conversation(self, conversation: str) -> Any:
        """The conversation's binding (its `agent` and `session`), or None."""


def web_account(config: ChannelConfig | None, account: str) -> ChannelConfig:
    """The web chat's account: `channels.<account>` of type web, else one with defaults.

    The web chat keeps a conversation's session until /new (no idle timeout), and
    anyone the HTTP server let in may talk.
    """
    if config is not None and config.type == "web":
        return config
    made = ChannelConfig(type="web", allow_from="*", progress=False)
    made.name = account
    made.session_idle_seconds = float("inf")
    return made


def chat_of(conversation: str) -> str:
    """The address chat of a web conversation id."""
    return conversation.replace("%", "%25").replace(":", "%3A")


def conversation_of(address: Address) -> str:
    """The web conversation an address names."""
    return address.chat.replace("%3A", ":").replace("%25", "%")


def web_turn_id(scope: str, key: str) -> str:
    """A turn id derived from a client-chosen key, so a resend maps to the same turn."""
    digest = hashlib.sha256(f"{scope}\0{key}".encode()).hexdigest()[:24]
    return f"turn_{digest}"


def approval_dedupe(approval: str, conversation: str) -> str:
    """The dedupe key of the notice asking a conversation about an approval."""
    return f"approval:{approval}:{conversation}"


class WebAdapter(Adapter):
    """The web chat account: sends append to web.db."""

    type = "web"
    capabilities: frozenset[Capability] = frozenset({"buttons"})

    def __init__(self, config: ChannelConfig, log: WebLog):
        super().__init__(config.name)
        self.config = config
        self.log = log

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        """Nothing to receive (POST /api/chat hands messages to the gateway): stay alive."""
        while True:
            beat()
            await asyncio.sleep(KEEPALIVE_SECONDS)

    def render(self, markdown: str) -> list[str]:
        """The dashboard shows text as it is, so the Markdown goes; one chunk, any length."""
        from habakkuk.conversation.commands import plain

        return [plain(markdown) or markdown]

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        """Append the chunk to the conversation's log; returns the log's sequence number."""
        sending = SENDING.get()
        if sending is None:
            raise SendError("the web chat sends only delivery jobs (nothing to dedupe by)")
        conversation = conversation_of(to)
        role, turn, dedupe = "notice", "", sending.job
        if isinstance(sending.delivery, ReplyDelivery):
            turn = sending.delivery.turn
            role = "error" if sending.status == "failed" else "assistant"
        elif sending.job.startswith(PROMPT_PREFIX) and buttons:
            prompt = sending.job.removeprefix(PROMPT_PREFIX)
            if not prompt.startswith(QUESTION_PREFIX):
                # an approval's notice: the dashboard shows its Approve/Deny buttons
                dedupe = approval_dedupe(prompt, conversation)
        binding = await self.log.conversation(conversation)
        event, _ = await self.log.append(
            conversation, role, chunk, turn=turn, dedupe=dedupe,
            session=binding.session if binding else "", agent=binding.agent if binding else "",
        )  # fmt: skip
        return str(event.seq)
