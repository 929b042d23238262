"""WhatsApp agents: an agent on Meta's agent platform, long-polling its updates with the
agent's key on the shared Graph client (habakkuk/channels/metagraph.py).

The wire, as this adapter reads spec 000 "WhatsApp agents":

- In: `GET <graph>/<version>/updates?offset=N&timeout=20` holds up to 20 seconds and
  answers `{"updates": [...], "next_offset": M}`, or 204 with no body when nothing came.
  Each update is `{"update_id", "created_at" (unix seconds), "message": {"id", "from":
  "user:<id>", "text", "attachments": [{"id", "url", "mime_type", "name"}]}}`. Polls
  start at least 4.3 seconds apart (the platform allows 15 a minute). Updates stay on the
  platform for 30 days and polling does not consume them: `next_offset` is saved in
  `channels/whatsappagent-<account>.json` (0600, replaced whole) after the batch is handed
  to the gateway, so a crash in between only re-reads messages the gateway drops as
  redeliveries. The first start reads from offset 0 and skips messages older than ten
  minutes before it.
- Participant ids are `user:<id>`; the chat is the id without the prefix (addresses use
  colons). A beta agent may message only the person who wrote last in a conversation,
  so a reply goes to the chat's own `user:<id>`.
- Out: `POST <graph>/<version>/messages` `{"to": "user:<id>", "text": ...}`, answered
  with the message's id or 204. Plain text; approvals by a typed yes or no; no files out.
- A 409 (another poller took the key) and an invalid key are fatal. Media is fetched
  with the key, only from Meta's media hosts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import write_private_file

from .adapter import (
    Adapter,
    Address,
    Attachment,
    Beat,
    Button,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    SendError,
)
from .format import html_to_plain, markdown_chunks
from .metagraph import Conflict, GraphClient, GraphFatal
from .metagraph_hook import media_host_ok
from .platforms import AdapterContext
from .whatsappagent_setup import WHATSAPPAGENT_SETUP

log = logging.getLogger(__name__)

HOLD_SECONDS = 20  # how long the platform holds a poll open
POLL_SPACING = 4.3  # seconds between poll starts: under the platform's 15 a minute
FIRST_START_SKIP = 600.0  # the first start skips messages older than this before it
TEXT_LIMIT = 4000
_KINDS = {"image": "photo", "audio": "audio", "video": "video"}


@dataclass
class AgentState:
    """What the platform cannot give back: the offset of the next update to read."""

    path: Path
    next_offset: int | None = None  # None: never started

    @classmethod
    def load(cls, path: Path) -> AgentState:
        """The state in `path` (a first start when there is none or it cannot be read)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        found = data.get("next_offset") if isinstance(data, dict) else None
        return cls(path, found if isinstance(found, int) else None)

    def save(self, next_offset: int) -> None:
        """Keep `next_offset` (written whole or not at all, 0600)."""
        self.next_offset = next_offset
        write_private_file(self.path, json.dumps({"next_offset": next_offset}) + "\n")


class WhatsAppAgentAdapter(Adapter):
    """One agent on the WhatsApp agent platform."""

    type = "whatsappagent"
    capabilities: frozenset[Capability] = frozenset({"download"})

    def __init__(self, config: ChannelConfig, graph: GraphClient, state: AgentState):
        super().__init__(config.name)
        self.graph = graph
        self.state = state
        self.spacing = POLL_SPACING
        # the first start skips what is older than this (None once started before)
        self._since = time.time() - FIRST_START_SKIP if state.next_offset is None else None

    async def close(self) -> None:
        await self.graph.close()

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        offset = self.state.next_offset or 0
        loop = asyncio.get_running_loop()
        hold = 0  # the first poll answers at once: the key is checked, the account is up
        while True:
            started = loop.time()
            found = await self._poll(offset, hold)
            hold = HOLD_SECONDS
            beat()
            for update in _dicts(found.get("updates")):
                message = self.convert(update)
                if message is not None:
                    await inbox(message)
            next_offset = found.get("next_offset")
            if isinstance(next_offset, int) and next_offset != offset:
                self.state.save(next_offset)  # after the whole batch is the gateway's
                offset = next_offset
            await asyncio.sleep(max(0.0, started + self.spacing - loop.time()))

    async def _poll(self, offset: int, hold: int) -> dict[str, Any]:
        params = {"offset": str(offset), "timeout": str(hold)}
        try:
            return await self.graph.get("updates", params)
        except GraphFatal as exc:
            raise FatalAdapterError(f"whatsappagent {self.account}: {exc}") from None
        except Conflict as exc:
            raise FatalAdapterError(
                f"whatsappagent {self.account}: another poller holds this agent's key ({exc})"
            ) from None
        except SendError as exc:
            raise ConnectionError(f"whatsappagent {self.account}: {exc}") from None

    def convert(self, update: dict[str, Any]) -> InboundMessage | None:
        """One update in the gateway's terms (None for what is skipped)."""
        raw = update.get("message")
        if not isinstance(raw, dict):
            return None
        created = update.get("created_at")
        at = float(created) if isinstance(created, int | float) else time.time()
        if self._since is not None and at < self._since:
            return None  # from before the first start's ten minutes
        sender = str(raw.get("from", ""))
        message_id = str(raw.get("id", ""))
        if not sender.startswith("user:") or not message_id:
            return None
        who = sender.removeprefix("user:")
        attachments = []
        for item in _dicts(raw.get("attachments")):
            media_type = str(item.get("mime_type", "application/octet-stream"))
            kind = _KINDS.get(media_type.partition("/")[0], "document")
            name = str(item.get("name") or item.get("id") or "file")
            attachments.append(Attachment(kind, str(item.get("url", "")), name, media_type))  # type: ignore[arg-type]  # one of Attachment's kinds
        return InboundMessage(
            channel=self.account,
            chat=who,
            message_id=message_id,
            sender=who,
            sender_aliases=[sender],
            text=str(raw.get("text", "")),
            attachments=attachments,
            at=at,
        )

    async def download(self, attachment: Attachment) -> bytes:
        if not media_host_ok(attachment.file_id, self.graph.root):
            raise SendError(f"whatsappagent {self.account}: a media URL not on Meta's hosts")
        return await self.graph.download(attachment.file_id, self.max_file_bytes)

    def render(self, markdown: str) -> list[str]:
        return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, TEXT_LIMIT)]

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        try:
            found = await self.graph.post("messages", {"to": f"user:{to.chat}", "text": chunk})
        except GraphFatal as exc:  # the run's next poll says so; this send retries later
            raise SendError(str(exc)) from None
        return str(found.get("id", ""))


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def build(config: ChannelConfig, context: AdapterContext) -> WhatsAppAgentAdapter:
    """The adapter of one agent (habakkuk.channels.platforms)."""
    graph = GraphClient(context.secret(config, "token_env"), config.base_url or "", 60.0)
    return WhatsAppAgentAdapter(config, graph, AgentState.load(context.state_path(config)))


SETUP = WHATSAPPAGENT_SETUP
