"""Facebook Messenger through a Page: Meta calls `/channels/<account>`, replies go through
the Send API (POST /me/messages with the Page access token) on the shared Graph client
(habakkuk/channels/metagraph.py). Instagram (habakkuk/channels/instagram.py) is the same
Send API with its own webhook object.

- In: the Page's `messages` and `messaging_postbacks` webhooks (X-Hub-Signature-256, the
  hub.challenge handshake). The chat is the person's page-scoped id (PSID); a Page
  conversation has no groups, so every message is addressed. Echoes of our own messages,
  deliveries and reads are skipped. Meta retries an event it got no 200 for, and the
  gateway takes each message id (mid) once; a quick reply or postback is a Callback keyed
  by its own mid.
- Out: plain text (Messenger shows no markup) in chunks under its 2000 characters;
  approvals as quick replies under the prompt; files uploaded with the message
  (multipart `filedata`); the typing indicator as a sender action.
- The 24-hour standard messaging window: a send outside it is answered with code 10,
  subcode 2018278 (WindowClosed), and the delivery fails saying so.
- The Send API has no idempotency key: a crash between its answer and our record sends
  that part again (the delivery worker's record of each send's start bounds it).

Why no SDK: Meta publishes none for Python; aiohttp (a core dependency) makes the few JSON
calls.
"""

from __future__ import annotations

import json
import logging
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Address,
    Attachment,
    Button,
    Callback,
    Capability,
    InboundMessage,
    Inbox,
    SendError,
    Unsupported,
)
from .format import html_to_plain, markdown_chunks
from .messenger_setup import MESSENGER_SETUP
from .metagraph import GraphClient
from .metagraph_hook import GraphWebhookAdapter, media_host_ok
from .platforms import AdapterContext
from .webhook import WebhookDoor

log = logging.getLogger(__name__)

MESSENGER_LIMIT = 2000  # a message's longest text
FILE_BYTES = 25 * 1024 * 1024  # the Send API's attachment limit
QUICK_REPLIES = 13  # the most quick replies one message carries
QUICK_TITLE = 20  # a quick reply's longest title
_KINDS = {"image": "photo", "video": "video", "audio": "audio", "file": "document"}
_SEND_KINDS = {"image": "image", "video": "video", "audio": "audio"}


def messenger_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks the Send API accepts."""
    # Telegram's HTML is never shorter than its plain text, so each chunk fits.
    return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, MESSENGER_LIMIT)]


class MessengerAdapter(GraphWebhookAdapter):
    """One Facebook Page's conversations."""

    type = "messenger"
    webhook_object = "page"  # the `object` of the events this platform posts
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download", "typing"})
    max_file_bytes = FILE_BYTES

    def __init__(
        self, config: ChannelConfig, door: WebhookDoor, graph: GraphClient, secrets: tuple[str, str]
    ):
        super().__init__(config, door, graph, *secrets)
        self.page_id = ""

    async def connect(self) -> None:
        """Check the token and learn our own id (echoes come from it)."""
        found = await self.graph.get("me", {"fields": "id,name"})
        self.page_id = str(found.get("id", ""))

    # -- in -------------------------------------------------------------------------

    async def take_event(self, payload: dict[str, Any], inbox: Inbox) -> None:
        if payload.get("object") != self.webhook_object:
            return
        for entry in _dicts(payload.get("entry")):
            for event in _dicts(entry.get("messaging")):
                message = self.convert(event)
                if message is not None:
                    await inbox(message)

    def convert(self, event: dict[str, Any]) -> InboundMessage | None:
        """One messaging event in the gateway's terms (None for echoes, reads, ...)."""
        sender = str((event.get("sender") or {}).get("id", ""))
        if not sender or sender == self.page_id:
            return None
        stamp = event.get("timestamp")
        at = {"at": stamp / 1000.0} if isinstance(stamp, int | float) else {}
        postback = event.get("postback")
        if isinstance(postback, dict):
            mid = str(postback.get("mid", ""))
            callback = Callback(mid, str(postback.get("payload", "")), "")
            return self._message(sender, mid, callback=callback, **at)
        raw = event.get("message")
        if not isinstance(raw, dict) or raw.get("is_echo"):
            return None
        mid = str(raw.get("mid", ""))
        if not mid:
            return None
        quick = raw.get("quick_reply")
        if isinstance(quick, dict):
            callback = Callback(mid, str(quick.get("payload", "")), "")
            return self._message(sender, mid, callback=callback, **at)
        attachments = [
            found
            for item in _dicts(raw.get("attachments"))
            if (found := self._attachment(item, mid)) is not None
        ]
        text = str(raw.get("text", ""))
        if not text and not attachments:
            return None
        return self._message(sender, mid, text=text, attachments=attachments, **at)

    def _message(self, sender: str, mid: str, **rest: Any) -> InboundMessage:
        return InboundMessage(
            channel=self.account, chat=sender, message_id=mid, sender=sender, **rest
        )

    def _attachment(self, item: dict[str, Any], mid: str) -> Attachment | None:
        kind = _KINDS.get(str(item.get("type", "")))
        url = str((item.get("payload") or {}).get("url", ""))
        if kind is None or not url:
            return None  # a sticker's like, a location, a shared post: nothing to save
        last = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])
        guessed = mimetypes.guess_type(last)[0]
        if guessed is None:  # no file name in the URL: the message id and the kind's suffix
            guessed = {"photo": "image/jpeg", "video": "video/mp4", "audio": "audio/mpeg"}.get(
                kind, "application/octet-stream"
            )
            last = mid.replace(".", "_")[-24:] + (mimetypes.guess_extension(guessed) or "")
        return Attachment(kind, url, last, guessed)  # type: ignore[arg-type]  # one of Attachment's kinds

    async def download(self, attachment: Attachment) -> bytes:
        if not media_host_ok(attachment.file_id, self.graph.root):
            raise SendError(f"{self.type} {self.account}: a media URL not on Meta's hosts")
        # the CDN's URL is signed itself: the token is not sent there
        return await self.graph.download(attachment.file_id, self.max_file_bytes, token=False)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return messenger_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        message: dict[str, Any] = {"text": chunk}
        flat = [button for row in buttons or [] for button in row][:QUICK_REPLIES]
        if flat:
            message["quick_replies"] = [
                {"content_type": "text", "title": b.text[:QUICK_TITLE], "payload": b.data}
                for b in flat
            ]
        return await self._send(to, {"message": message})

    async def typing(self, to: Address) -> None:
        await self.call(
            "typing",
            self.graph.post(
                "me/messages", {"recipient": {"id": to.chat}, "sender_action": "typing_on"}
            ),
        )

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        name = name or path.name
        data = path.read_bytes()
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{name} is over {self.type}'s 25 MB limit")
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        found = await self.send_attachment(to, name, data, media_type)
        if caption:
            await self.send_text(to, caption)
        return found

    async def send_attachment(self, to: Address, name: str, data: bytes, media_type: str) -> str:
        """The file uploaded with its message (multipart `filedata`)."""
        kind = _SEND_KINDS.get(media_type.partition("/")[0], "file")
        form = aiohttp.FormData()
        form.add_field("recipient", json.dumps({"id": to.chat}))
        form.add_field("messaging_type", "RESPONSE")
        attachment = {"type": kind, "payload": {"is_reusable": False}}
        form.add_field("message", json.dumps({"attachment": attachment}))
        form.add_field("filedata", data, filename=name, content_type=media_type)
        found = await self.call("upload", self.graph.call("POST", "me/messages", form=form))
        return str(found.get("message_id", ""))

    async def _send(self, to: Address, body: dict[str, Any]) -> str:
        request = {"recipient": {"id": to.chat}, "messaging_type": "RESPONSE"} | body
        found = await self.call("send", self.graph.post("me/messages", request))
        return str(found.get("message_id", ""))


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def secrets_of(config: ChannelConfig, context: AdapterContext) -> tuple[str, str]:
    """The app secret and the verify token the account's settings name."""
    return (context.secret(config, "app_secret_env"), context.secret(config, "verify_token_env"))


def build(config: ChannelConfig, context: AdapterContext) -> MessengerAdapter:
    """The adapter of one Page (habakkuk.channels.platforms)."""
    graph = GraphClient(context.secret(config, "token_env"), config.base_url or "")
    return MessengerAdapter(config, context.door, graph, secrets_of(config, context))


SETUP = MESSENGER_SETUP
