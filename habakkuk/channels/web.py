"""The web chat as a channel adapter (type `web`).

Messages come in through the HTTP server (POST /api/chat hands an
`InboundMessage` to the gateway), so `run` only keeps the account alive for
the supervisor. What the gateway and the delivery worker send is appended to
the conversation's log in web.db, which wakes the event streams open on it.

A web conversation id may hold any printable character but `/`; as an address
chat it is written with `%` and `:` escaped, since `:` separates an address.
Every append is deduped by its delivery job id (and the part's index past the first:
a reply's voice note follows its text in the same delivery), so a delivery retried
after a crash appends nothing twice; a turn's reply keeps the `reply:<turn>` key.

A file (send_file) is appended as a file entry (role "file": its name, size, media
type and a new id; its caption is the entry's text) pointing at the delivery's copy
of the bytes, which the HTTP server serves under /api/chat/{conversation}/files/{id}.
"""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import Adapter, Address, Beat, Button, Capability, Inbox, SendError, Unsupported
from .deliveries import SENDING
from .delivery_types import ReplyDelivery

KEEPALIVE_SECONDS = 10.0
PROMPT_PREFIX = "prompt:"
QUESTION_PREFIX = "ask_"  # a clarify prompt (the gateway's ids); the rest are approvals
FILE_ROLE = "file"
# Images are told by their first bytes (a name says nothing about what a tool wrote).
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True)
class ChatFile:
    """A file in a conversation's log: what the dashboard shows and where the bytes are."""

    id: str
    name: str
    size: int
    media_type: str
    path: str  # the stored copy (a blob): never shown to a client

    def url(self, conversation: str) -> str:
        """Where the API serves it (with the API's token)."""
        from urllib.parse import quote

        return f"/api/chat/{quote(conversation, safe='')}/files/{self.id}"

    def columns(self) -> tuple[str, str, int, str, str]:
        """Its web.db columns (file_id, file_name, file_size, file_type, file_path)."""
        return (self.id, self.name, self.size, self.media_type, self.path)


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
        file: ChatFile | None = None,
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


def media_type_of(head: bytes, name: str) -> str:
    """A file's media type: JPEG, PNG, GIF and WebP from its first bytes, else from its
    name, else application/octet-stream."""
    for magic, media in _IMAGE_MAGIC:
        if head.startswith(magic):
            return media
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed is None or guessed.startswith("image/"):  # an image it does not look like
        return "application/octet-stream"
    return guessed


def _file_facts(path: Path, name: str) -> tuple[int, str]:
    """(size, media type) of a file about to be sent."""
    with path.open("rb") as handle:
        head = handle.read(16)
        size = handle.seek(0, 2)
    return size, media_type_of(head, name)


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


def part_dedupe(job: str, chunk: int) -> str:
    """The dedupe key of one part of a delivery: the job id for its first, the job and the
    part's index for the others (a reply's voice note goes in the reply's own delivery,
    after its text: keyed by the job alone, the log took it for the text sent again)."""
    return job if chunk == 0 else f"{job}#{chunk}"


def approval_dedupe(approval: str, conversation: str) -> str:
    """The dedupe key of the notice asking a conversation about an approval."""
    return f"approval:{approval}:{conversation}"


class WebAdapter(Adapter):
    """The web chat account: sends append to web.db."""

    type = "web"
    keyed_sends = True  # the log drops an entry whose delivery it holds (dedupe)
    capabilities: frozenset[Capability] = frozenset({"buttons", "files"})

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

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        """Append a file entry (its caption as text) to the conversation's log; returns
        the log's sequence number."""
        sending = SENDING.get()
        if sending is None:
            raise SendError("the web chat sends only delivery jobs (nothing to dedupe by)")
        name = name or path.name
        try:
            size, media_type = await asyncio.to_thread(_file_facts, path, name)
        except OSError as exc:
            raise Unsupported(f"{name} cannot be read ({exc.strerror or exc})") from None
        file = ChatFile(f"file_{secrets.token_hex(12)}", name, size, media_type, str(path))
        conversation = conversation_of(to)
        binding = await self.log.conversation(conversation)
        event, _ = await self.log.append(
            conversation, FILE_ROLE, caption, dedupe=part_dedupe(sending.job, sending.chunk),
            file=file,
            session=binding.session if binding else "", agent=binding.agent if binding else "",
        )  # fmt: skip
        return str(event.seq)
