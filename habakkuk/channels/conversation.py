"""A channel conversation as the chat commands see it (habakkuk.conversation).

The gateway builds one per command message: the conversation's session is its
binding in control.db, a fresh session rebinds it, a turn is queued as the
gateway queues any message, and /export's file goes out as a delivery job.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from habakkuk.conversation.commands import Reply, Services, Surface
from habakkuk.engine.i18n import t

from .health import chat_line, one_health

if TYPE_CHECKING:
    from habakkuk.engine.agent.requests import ReplyTo
    from habakkuk.engine.channel_config import ChannelConfig
    from habakkuk.engine.config import Config
    from habakkuk.engine.sessions import Session

    from .adapter import InboundMessage
    from .facade import RuntimeFacade
    from .outbox import Outbox
    from .store import ChannelStore


class ConversationGateway(Protocol):
    """What a channel conversation uses of the gateway (habakkuk.channels.gateway.Gateway),
    so this module does not import the gateway that imports it."""

    runtime: RuntimeFacade
    config: Config
    store: ChannelStore
    outbox: Outbox

    def route_agent(self, config: ChannelConfig, msg: InboundMessage) -> str:
        """The agent a conversation is routed to by the channel's routes."""
        ...

    async def session_for(
        self, config: ChannelConfig, msg: InboundMessage, *, fresh: bool = ..., create: bool = ...
    ) -> Session | None:
        """The conversation's session (a new one bound here when `create`)."""
        ...

    async def start_turn(self, config: ChannelConfig, msg: InboundMessage, text: str) -> str | None:
        """Queue `text` as a turn of the conversation `msg` belongs to."""
        ...

    def reply_to(self, msg: InboundMessage) -> ReplyTo:
        """Where a turn's reply (and its approvals) go."""
        ...

    def say_id(self, msg: InboundMessage, suffix: str = "") -> str:
        """The delivery id of a reply to `msg`."""
        ...


class ChannelConversation:
    """The conversation `msg` belongs to, on its channel."""

    surface: Surface = "chat"

    def __init__(
        self, gateway: ConversationGateway, config: ChannelConfig, msg: InboundMessage, how: str
    ):
        self.gateway = gateway
        self.config = config
        self.msg = msg
        self.how = how
        self.services: Services = gateway.runtime
        self.turn: str | None = None  # a turn the command queued (/retry, /queue, /compact)

    async def session(self, *, create: bool = False) -> Session | None:
        return await self.gateway.session_for(self.config, self.msg, create=create)

    async def agent(self) -> str:
        binding = await self.gateway.store.binding(self.msg.address.conversation)
        agent = (binding.agent_override if binding else "") or self.default_agent()
        return agent if agent in self.gateway.config.agents else self.default_agent()

    def default_agent(self) -> str:
        return self.gateway.route_agent(self.config, self.msg)

    async def start_fresh(self, agent: str | None = None) -> None:
        if agent is None:
            await self.gateway.session_for(self.config, self.msg, fresh=True, create=True)
            return
        chosen = agent or self.default_agent()
        session = await self.gateway.runtime.sessions.new_session(
            chosen, origin=f"channel:{self.msg.channel}", chat=not self.msg.is_group
        )
        await self.gateway.store.bind(
            self.msg.address.conversation, session.id, agent_override=agent
        )

    async def continue_in(self, session: Session) -> None:
        binding = await self.gateway.store.binding(self.msg.address.conversation)
        override = binding.agent_override if binding else ""
        await self.gateway.store.bind(
            self.msg.address.conversation, session.id, agent_override=override
        )

    async def start_turn(self, text: str) -> str | None:
        self.turn = await self.gateway.start_turn(self.config, self.msg, text)
        return self.turn

    async def compact(self, session_id: str) -> Reply:
        """Queued as a turn of the session: its outcome comes back as the turn's reply."""
        msg = self.msg
        self.turn = await self.gateway.runtime.turns.compact_session(
            session_id,
            job_id=f"compact:{msg.channel}:{msg.chat}:{msg.message_id}",
            reply_to=self.gateway.reply_to(msg),
        )
        await self.gateway.store.touch(msg.address.conversation)
        return Reply()

    async def ask_aside(self, session: Session, question: str) -> Reply:
        """Queued beside the conversation's turn; its answer comes back as the aside turn's
        reply, to this chat (its id derives from the message: a redelivery asks once)."""
        msg = self.msg
        self.turn = await self.gateway.runtime.turns.ask_aside(
            session.id,
            question,
            turn_id=f"btw:{msg.channel}:{msg.chat}:{msg.message_id}",
            attended=True,
            reply_to=self.gateway.reply_to(msg),
        )
        return Reply()

    async def send_file(self, data: bytes, name: str, caption: str) -> bool:
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        blob = await self.gateway.runtime.blobs.put(data, suffix)
        return await self.gateway.outbox.send_file(
            self.gateway.say_id(self.msg), self.msg.address, blob, name, caption
        )

    def about(self) -> list[str]:
        msg = self.msg
        names = ", ".join([msg.sender, *msg.sender_aliases])
        thread = t("chat.about.thread", thread=msg.thread) if msg.thread else ""
        return [
            t("chat.about.you", name=msg.sender_name or msg.sender, names=names),
            t("chat.about.allowed_by", how=self.how),
            t("chat.about.channel", channel=msg.channel, type=self.config.type, chat=msg.chat)
            + thread,
        ]

    async def state(self) -> str | None:
        """The channel's health, as `habakkuk channels` judges it (channels/health.py)."""
        store = self.gateway.store
        statuses, holders = await store.statuses(), await store.live_holders()
        health = one_health(
            self.config, statuses.get(self.msg.channel), holders.get(self.msg.channel), time.time()
        )
        return chat_line(health, time.time())
