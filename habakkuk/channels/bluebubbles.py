"""iMessage through a BlueBubbles server: its webhook calls
`/channels/<account>/<secret>`, replies go through its REST API
(habakkuk/channels/bluebubbles_wire.py).

- In: the server POSTs each event as JSON; only `new-message` events from others are
  messages (our own sends come back as new messages too, `isFromMe`). BlueBubbles signs
  nothing: the secret in the URL, compared in constant time, is the proof, and a request
  without it gets 403 and starts nothing. A chat is its guid (`iMessage;-;+1555...` one to
  one, `iMessage;+;chat...` a group); in a group a message is addressed when it names
  the bot (`nick`, "habakkuk" by default, as a word or @word) or is a command. The server
  resends an event whose request failed, and the gateway takes each message guid once.
- Out: plain text (iMessage has no markup) in chunks; approvals by a typed yes or no (no
  buttons); files as attachments. Each send carries a tempGuid derived from the delivery
  and its part. The server forgets a tempGuid once its send ends, so a part resumed after
  a crash first looks for itself among the chat's newest messages of ours and is not
  sent again when found.

Why no SDK: there is no maintained Python client of the BlueBubbles server; its API is
a handful of JSON calls aiohttp (already a dependency) makes directly.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from pathlib import Path
from typing import Any, Literal

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Address,
    Attachment,
    Button,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    SendError,
    Unsupported,
)
from .bluebubbles_setup import BLUEBUBBLES_SETUP
from .bluebubbles_wire import BlueBubblesApi, temp_guid
from .deliveries import SENDING
from .format import html_to_plain, markdown_chunks
from .platforms import AdapterContext
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

TEXT_LIMIT = 4000  # characters per message: iMessage takes more, phones show less
FILE_BYTES = 100 * 1024 * 1024  # what iMessage carries
SECRET_MIN = 16  # characters of the URL secret at least
_KINDS: dict[str, Literal["photo", "audio", "video", "document"]] = {
    "image": "photo",
    "audio": "audio",
    "video": "video",
}
_OBJECT = "\ufffc"  # iMessage's placeholder for an attachment inside the text


def bluebubbles_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks."""
    return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, TEXT_LIMIT)]


class BlueBubblesAdapter(WebhookAdapter):
    """The iMessage account of one BlueBubbles server."""

    type = "bluebubbles"
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = FILE_BYTES
    url_secret = True

    def __init__(self, config: ChannelConfig, door: WebhookDoor, password: str, secret: str):
        super().__init__(config, door)
        self.password = password
        self.secret = secret
        self.base_url = (config.base_url or "").rstrip("/")
        name = re.escape(config.nick or "habakkuk")
        self._named = re.compile(rf"(?<![\w@])@?{name}\b[,:]?", re.IGNORECASE)
        self._http: aiohttp.ClientSession | None = None

    @property
    def api(self) -> BlueBubblesApi:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))
        return BlueBubblesApi(self.base_url, self.password, self._http)

    async def connect(self) -> None:
        """The server answers and takes the password (a refused one is fatal)."""
        try:
            await self.api.info()
        except SendError as exc:
            raise ConnectionError(
                f"bluebubbles {self.account}: cannot reach the server: {exc}"
            ) from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        if request.method != "POST" or not request.secret:
            return False
        return hmac.compare_digest(request.secret.encode(), self.secret.encode())

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        try:
            event = json.loads(request.body)
        except (UnicodeDecodeError, ValueError):
            return WebhookReply(400, b"not JSON")
        if not isinstance(event, dict) or not isinstance(event.get("data"), dict | list):
            return WebhookReply(400, b"not a BlueBubbles event")
        if event.get("type") == "new-message" and isinstance(event["data"], dict):
            message = self._message(event["data"])
            if message is not None:
                await inbox(message)
        return WebhookReply(200, b'{"status":200}', "application/json")

    def _message(self, data: dict[str, Any]) -> InboundMessage | None:
        """A new message from someone else, or None (ours, or no chat)."""
        if data.get("isFromMe"):
            return None
        chats = data.get("chats") or []
        chat = chats[0] if chats and isinstance(chats[0], dict) else {}
        guid, chat_guid = str(data.get("guid", "")), str(chat.get("guid", ""))
        sender = str((data.get("handle") or {}).get("address", ""))
        if not guid or not chat_guid or not sender:
            return None
        group = ";+;" in chat_guid or chat.get("style") == 43
        text = str(data.get("text") or "").replace(_OBJECT, "").strip()
        named = bool(self._named.search(text)) if group else False
        if named:
            text = self._named.sub("", text, count=1).strip()
        attachments = []
        for item in data.get("attachments") or []:
            media_type = str(item.get("mimeType") or "application/octet-stream")
            kind = _KINDS.get(media_type.partition("/")[0], "document")
            name = str(item.get("transferName") or item.get("guid"))
            size = item.get("totalBytes")
            attachments.append(
                Attachment(
                    kind, str(item.get("guid")), name, media_type, int(size) if size else None
                )
            )
        return InboundMessage(
            channel=self.account,
            chat=chat_guid,
            message_id=guid,
            sender=sender,
            text=text,
            sender_name=str(chat.get("displayName") or "") if not group else "",
            is_group=group,
            addressed=not group or named or text.startswith("/"),
            attachments=attachments,
        )

    async def download(self, attachment: Attachment) -> bytes:
        return await self.api.download(attachment.file_id, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return bluebubbles_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        found = await self._already_sent(to, lambda row: row.get("text") == chunk)
        if found:
            return found
        try:
            return await self.api.send_text(to.chat, chunk, _guid("text", to))
        except FatalAdapterError as exc:  # a password changed mid-run: the run's check says so
            raise SendError(str(exc)) from None

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        name = name or path.name
        if path.stat().st_size > self.max_file_bytes:
            raise Unsupported(f"{name} is over iMessage's 100 MB limit")

        def named(row: dict[str, Any]) -> bool:
            return any(a.get("transferName") == name for a in row.get("attachments") or [])

        try:
            message_id = await self._already_sent(to, named)
            if not message_id:
                message_id = await self.api.send_file(to.chat, path, name, _guid("file", to))
            if caption:  # an attachment sent this way carries no text: the caption follows
                said = await self._already_sent(to, lambda row: row.get("text") == caption)
                if not said:
                    await self.api.send_text(to.chat, caption, _guid("caption", to))
        except FatalAdapterError as exc:
            raise SendError(str(exc)) from None
        return message_id

    async def _already_sent(self, to: Address, same: Any) -> str:
        """When this part was attempted before (a crash between the send and its record),
        the guid of our message in the chat since then that `same` recognises, else ""."""
        sending = SENDING.get()
        if sending is None or not sending.attempted:
            return ""
        since = int((sending.attempted - 60) * 1000)  # the Mac's clock may lag ours
        for row in await self.api.sent_since(to.chat, since):
            if same(row):
                log.info("bluebubbles %s: a resumed part was sent already", self.account)
                return str(row.get("guid", ""))
        return ""


def _guid(kind: str, to: Address) -> str:
    """The tempGuid of this send: from the delivery and its part, random outside one."""
    sending = SENDING.get()
    if sending is None:
        return temp_guid(f"{time.time_ns()}\x00{kind}\x00{to}")
    return temp_guid(f"{sending.job}\x00{kind}\x00{sending.chunk}\x00{to}")


def build(config: ChannelConfig, context: AdapterContext) -> BlueBubblesAdapter:
    """The adapter of one BlueBubbles server (habakkuk.channels.platforms)."""
    secret = context.secret(config, "secret_env")
    if len(secret) < SECRET_MIN:
        raise FatalAdapterError(
            f"channels.{config.name}.secret_env: the webhook secret is under {SECRET_MIN} "
            "characters (anyone could guess it)"
        )
    return BlueBubblesAdapter(config, context.door, context.secret(config, "password_env"), secret)


SETUP = BLUEBUBBLES_SETUP
