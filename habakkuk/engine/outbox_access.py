"""The channels' outbox as the layers below the channels use it, declared once.

The outbox (habakkuk.channels.outbox.Outbox, and the running ChannelService that is one)
queues deliveries to chats as durable jobs. The work layer's runs and tools and the MCP
server send through it but sit below the channels (or beside them), so its Protocols
live here.
"""

from __future__ import annotations

from typing import Protocol


class TextOutbox(Protocol):
    """Queues one text message to a chat as a durable delivery."""

    async def send_text(self, job_id: str, to: str, text: str) -> bool:
        """Queue `text` to `to` (CHANNEL:CHAT[:THREAD]) as the job `job_id` (True when it
        was new); ValueError when `to` is malformed."""
        ...


class TurnChats(Protocol):
    """What a tool needs of the running channels to answer a turn's chat."""

    async def chat_of(self, turn: str, session: str) -> str | None:
        """The chat a turn answers to, else the chat its session is bound to."""
        ...
