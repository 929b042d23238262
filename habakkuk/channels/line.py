"""LINE through the Messaging API: LINE calls `/channels/<account>`, replies go through
its reply and push endpoints (habakkuk/channels/line_wire.py).

- In: LINE POSTs a JSON batch of events signed with X-Line-Signature (HMAC-SHA256 of
  the raw body with the channel secret); a request failing the check gets 403 and starts
  nothing. Messages (text, image, file, audio, video), postbacks (the approval buttons)
  and follows (a person adds the bot: `/start`, which pairs a stranger). A chat is the
  user, group or room id; in a group or room a message is addressed when it mentions the
  bot (LINE marks that mentionee `isSelf`) or is a command. LINE redelivers an event
  whose request failed (`deliveryContext.isRedelivery`) with the same ids, and the
  gateway takes each message id and each postback's webhookEventId once.
- Out: plain text (LINE has no markup) in chunks of 5000 characters. The first part of
  an answer uses the message's reply token while it is fresh (free, used once); the rest,
  and every part resumed after a crash, is pushed with an X-Line-Retry-Key derived from
  the delivery and the part, so LINE runs it once. Approvals come as a flex bubble with
  postback buttons. Images go by URL: LINE fetches them from a one-hour unguessable URL
  served from memory (habakkuk/channels/webhook.py). The Messaging API sends no other
  files (audio wants its length and m4a, video a preview image): those are refused with
  the reason, and the person is told.

Why not line-bot-sdk: version 3's generated client brings requests, pydantic, aenum,
future and Deprecated to make three calls and check one HMAC; aiohttp (already a
dependency) does both.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Address,
    Attachment,
    Button,
    Callback,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    SendError,
    Unsupported,
)
from .deliveries import SENDING
from .format import html_to_plain, markdown_chunks
from .line_setup import LINE_SETUP
from .line_wire import (
    API_URL,
    DATA_URL,
    TEXT_LIMIT,
    MessagingApi,
    StaleReplyToken,
    buttons_message,
    image_message,
    retry_key,
    signed,
    text_message,
)
from .platforms import AdapterContext
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

IMAGE_BYTES = 10 * 1024 * 1024  # LINE's limit for an image it fetches
CONTENT_BYTES = 200 * 1024 * 1024  # what a person can send (LINE's file limit)
REPLY_SECONDS = 50.0  # a reply token is good for about a minute: push after this
_KINDS: dict[str, Literal["photo", "audio", "video", "document"]] = {
    "image": "photo",
    "audio": "audio",
    "video": "video",
    "file": "document",
}
_IMAGES = frozenset({"image/jpeg", "image/png"})


def line_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks LINE accepts."""
    return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, TEXT_LIMIT)]


class LineAdapter(WebhookAdapter):
    """One LINE Official Account's Messaging API channel."""

    type = "line"
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download"})
    max_file_bytes = CONTENT_BYTES

    def __init__(self, config: ChannelConfig, door: WebhookDoor, token: str, secret: str):
        super().__init__(config, door)
        self.token = token
        self.secret = secret
        self.base_url = (config.base_url or API_URL).rstrip("/")
        self.data_url = (config.base_url or DATA_URL).rstrip("/")
        self.bot_id = ""  # our user id, filled by connect (mentions of the bot)
        # reply tokens of recent messages by message id, used once while fresh
        self._tokens: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._http: aiohttp.ClientSession | None = None

    @property
    def api(self) -> MessagingApi:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return MessagingApi(self.base_url, self.token, self._http, self.data_url)

    async def connect(self) -> None:
        """The token is the channel's (a refused one is fatal); learn our own user id."""
        try:
            self.bot_id = (await self.api.info()).user_id
        except SendError as exc:
            raise ConnectionError(f"line {self.account}: cannot reach LINE: {exc}") from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        given = request.headers.get("X-Line-Signature", "")
        if request.method != "POST" or not given:
            return False
        return signed(self.secret, request.body, given)

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        try:
            batch = json.loads(request.body)
        except (UnicodeDecodeError, ValueError):
            return WebhookReply(400, b"not JSON")
        events = batch.get("events") if isinstance(batch, dict) else None
        if not isinstance(events, list):
            return WebhookReply(400, b"no events")
        taken: list[InboundMessage] = []
        for event in events:  # an empty list is the console's "Verify" request
            message = self._message(event) if isinstance(event, dict) else None
            if message is None:
                continue
            if taken and _caption_of(taken[-1], message):
                # LINE has no captions: a text and the file right after it from the same
                # person in one request are one message (the same on a redelivery)
                message.text, message.addressed = taken[-1].text, taken.pop().addressed
            taken.append(message)
        for message in taken:
            await inbox(message)
        return WebhookReply(200, b"{}", "application/json")

    def _message(self, event: dict[str, Any]) -> InboundMessage | None:
        """One event as the gateway's message, or None for one we do not take."""
        if event.get("mode") == "standby":  # another module holds the chat
            return None
        source = event.get("source") or {}
        sender = str(source.get("userId", ""))
        kind = source.get("type")
        chat = str(source.get("groupId") or source.get("roomId") or sender)
        event_id = str(event.get("webhookEventId", ""))
        if not chat or not sender or not event_id:
            return None
        group = kind in ("group", "room")
        base = InboundMessage(self.account, chat, event_id, sender, is_group=group)
        token = str(event.get("replyToken", ""))
        if event.get("type") == "postback":
            data = str((event.get("postback") or {}).get("data", ""))
            base.callback = Callback(event_id, data, "")
            self._keep_token(event_id, token)
            return base
        if event.get("type") == "follow" and not group:
            base.text = "/start"
            self._keep_token(event_id, token)
            return base
        if event.get("type") != "message":
            return None
        message = event.get("message") or {}
        message_id = str(message.get("id", ""))
        if not message_id:
            return None
        base.message_id = message_id
        self._keep_token(message_id, token)
        text = str(message.get("text", "")) if message.get("type") == "text" else ""
        mentioned = False
        for mentionee in (message.get("mention") or {}).get("mentionees") or []:
            if mentionee.get("isSelf") or (self.bot_id and mentionee.get("userId") == self.bot_id):
                mentioned = True
                start, length = int(mentionee.get("index", 0)), int(mentionee.get("length", 0))
                text = (text[:start] + text[start + length :]).strip()
        base.text = text
        base.addressed = not group or mentioned or text.startswith("/")
        kind_of = _KINDS.get(str(message.get("type")))
        if kind_of is not None:
            name = str(message.get("fileName") or f"{message_id}{_suffix(kind_of)}")
            media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            size = message.get("fileSize")
            base.attachments.append(
                Attachment(kind_of, message_id, name, media_type, int(size) if size else None)
            )
        return base

    def _keep_token(self, message_id: str, token: str) -> None:
        if not token:
            return
        self._tokens[message_id] = (token, time.monotonic())
        while len(self._tokens) > 1000:
            self._tokens.popitem(last=False)

    def _reply_token(self, message_id: str | None) -> str:
        """The fresh, unused reply token of `message_id` (taken: it serves once), or ""."""
        found = self._tokens.pop(message_id, None) if message_id else None
        if found is None or time.monotonic() - found[1] > REPLY_SECONDS:
            return ""
        sending = SENDING.get()
        if sending is not None and sending.attempted:  # a resumed part may be out: push
            return ""
        return found[0]

    async def download(self, attachment: Attachment) -> bytes:
        return await self.api.content(attachment.file_id, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return line_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        message = buttons_message(chunk, buttons) if buttons else text_message(chunk)
        return await self._send(to, [message], reply_to, "text")

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        media_type = mimetypes.guess_type(name or path.name)[0] or ""
        if media_type not in _IMAGES:
            raise Unsupported(
                "LINE chats cannot receive files other than JPEG and PNG images "
                "through the Messaging API"
            )
        data = path.read_bytes()
        if len(data) > IMAGE_BYTES:
            raise Unsupported(f"{name or path.name} is over LINE's 10 MB image limit")
        messages = [image_message(self.media_url(data, media_type))]
        if caption:
            messages.append(text_message(caption))
        return await self._send(to, messages, None, "file")

    async def _send(
        self, to: Address, messages: list[dict[str, Any]], reply_to: str | None, kind: str
    ) -> str:
        try:
            token = self._reply_token(reply_to)
            if token:
                try:
                    return await self.api.reply(token, messages)
                except StaleReplyToken:
                    log.info("line %s: a stale reply token; pushing", self.account)
            return await self.api.push(to.chat, messages, _key(kind, to))
        except FatalAdapterError as exc:  # a token revoked mid-run: the run's check says so
            raise SendError(str(exc)) from None


def _caption_of(text: InboundMessage, file: InboundMessage) -> bool:
    """Whether `text` is the words that came with `file` (same person and chat)."""
    return (
        bool(file.attachments)
        and not file.text
        and not text.attachments
        and text.callback is None
        and bool(text.text)
        and not text.text.startswith("/")
        and (text.chat, text.sender) == (file.chat, file.sender)
    )


def _key(kind: str, to: Address) -> str:
    """The retry key of this send: from the delivery and its part (a retry repeats it),
    random outside a delivery."""
    sending = SENDING.get()
    if sending is None:
        import uuid

        return str(uuid.uuid4())
    return retry_key(f"{sending.job}\x00{kind}\x00{sending.chunk}\x00{to}")


def _suffix(kind: str) -> str:
    return {"photo": ".jpg", "audio": ".m4a", "video": ".mp4"}.get(kind, "")


def build(config: ChannelConfig, context: AdapterContext) -> LineAdapter:
    """The adapter of one LINE channel (habakkuk.channels.platforms)."""
    return LineAdapter(
        config,
        context.door,
        context.secret(config, "token_env"),
        context.secret(config, "secret_env"),
    )


SETUP = LINE_SETUP
