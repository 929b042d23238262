"""Feishu/Lark: the app's event subscription calls `/channels/<account>`, replies go out
through the Open API with the app's tenant_access_token (habakkuk/channels/feishu_wire.py,
the token cached by habakkuk/channels/apptoken.py).

- In: every event is encrypted with the Encrypt Key (AES-256-CBC) and signed
  (X-Lark-Signature over timestamp, nonce, key and body), and names the Verification
  Token; a request failing any of these, or signed more than an hour ago, gets 403 and
  starts nothing. The url_verification challenge is answered (it carries no signature:
  its token and its encryption prove it). im.message.receive_v1 brings messages: a
  private (p2p) chat is always addressed; in a group only a message that @mentions the
  bot, whose mention is taken out of the text. card.action.trigger brings a press of an
  approval card's button; its answer carries the toast. Feishu retries an event whose
  request failed, and the gateway takes each message id once.
- Out: plain text (Feishu's text messages have no markup) in chunks; approvals as an
  interactive card with buttons, which lose their buttons once answered; files uploaded
  (/open-apis/im/v1/files, 30 MB) and sent as file messages. Every send carries a `uuid`
  derived from the delivery and its part, so a send repeated after a crash posts once.

Why not lark-oapi: its client pulls requests, requests-toolbelt and pycryptodome and is
synchronous (a thread per call); the dozen calls here are plain JSON over aiohttp, and
`cryptography` (already installed) does the AES.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

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
from .feishu_setup import FEISHU_SETUP
from .feishu_wire import FEISHU_URL, FeishuApi, decrypt, signed
from .format import html_to_plain, markdown_chunks
from .platforms import AdapterContext
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

TEXT_LIMIT = 4000  # characters per text message (Feishu takes 150 KB; long ones read badly)
FILE_BYTES = 30 * 1024 * 1024  # /open-apis/im/v1/files takes 30 MB at most
MAX_SKEW = 3600.0  # seconds a request's timestamp may be off
_CARDS = 256  # approval cards remembered, to take their buttons away once answered
_JSON = "application/json"


def feishu_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks of a text message."""
    return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, TEXT_LIMIT)]


def send_uuid(kind: str) -> str:
    """The send's uuid: derived from the delivery job and its part (a retry repeats it,
    and Feishu posts once per uuid within an hour); none outside a delivery."""
    sending = SENDING.get()
    if sending is None:
        return ""
    digest = hashlib.sha256(f"{sending.job}\x00{kind}\x00{sending.chunk}".encode()).hexdigest()
    return digest[:50]  # Feishu's uuid is at most 50 characters


def card(text: str, buttons: list[list[Button]] | None) -> dict[str, Any]:
    """An interactive card: the text, and a row of buttons per row given."""
    elements: list[dict[str, Any]] = [
        {"tag": "div", "text": {"tag": "plain_text", "content": text}}
    ]
    for row in buttons or []:
        elements.append(
            {
                "tag": "action",
                "actions": [
                    {
                        "tag": "button",
                        "text": {"tag": "plain_text", "content": button.text},
                        "type": "primary" if button.text.startswith("✅") else "default",
                        "value": {"data": button.data},
                    }
                    for button in row
                ],
            }
        )
    return {"config": {"wide_screen_mode": True}, "elements": elements}


class FeishuAdapter(WebhookAdapter):
    """One Feishu/Lark app's bot."""

    type = "feishu"
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download"})
    max_file_bytes = FILE_BYTES
    keyed_sends = True  # every send carries a uuid derived from the delivery (send_uuid)

    def __init__(
        self,
        config: ChannelConfig,
        door: WebhookDoor,
        *,
        secret: str,
        encrypt_key: str,
        verification_token: str,
    ):
        super().__init__(config, door)
        self.app_id = config.app_id or ""
        self.secret = secret
        self.encrypt_key = encrypt_key
        self.verification_token = verification_token
        self.base_url = (config.base_url or FEISHU_URL).rstrip("/")
        self.bot_open_id = ""
        self._http: aiohttp.ClientSession | None = None
        self._api: FeishuApi | None = None
        self._verified: tuple[WebhookRequest, dict[str, Any]] | None = None
        self._cards: OrderedDict[str, str] = OrderedDict()  # message id -> its text
        self._toasts: dict[str, str] = {}

    @property
    def api(self) -> FeishuApi:
        if self._api is None or self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
            self._api = FeishuApi(self.base_url, self.app_id, self.secret, self._http)
        return self._api

    async def connect(self) -> None:
        """The app's token and its bot (a refused secret is fatal)."""
        try:
            self.bot_open_id = (await self.api.bot()).open_id
        except SendError as exc:
            raise ConnectionError(f"feishu {self.account}: cannot reach Feishu: {exc}") from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = self._api = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        self._verified = None
        if request.method != "POST":
            return False
        try:
            body = json.loads(request.body)
            event = decrypt(self.encrypt_key, str(body.get("encrypt", "")))
        except (ValueError, AttributeError, UnicodeDecodeError):
            return False
        header = event.get("header") if isinstance(event.get("header"), dict) else {}
        assert isinstance(header, dict)
        token = str(header.get("token") or event.get("token") or "")
        if not hmac.compare_digest(token.encode(), self.verification_token.encode()):
            return False
        if event.get("type") != "url_verification":
            # Every event but the challenge is signed, and recently.
            headers = {k.lower(): v for k, v in request.headers.items()}
            stamp = headers.get("x-lark-request-timestamp", "")
            nonce = headers.get("x-lark-request-nonce", "")
            given = headers.get("x-lark-signature", "")
            if not stamp.isdigit() or not given or abs(time.time() - int(stamp)) > MAX_SKEW:
                return False
            if not signed(stamp, nonce, self.encrypt_key, request.body, given):
                return False
        self._verified = (request, event)
        return True

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        verified, self._verified = self._verified, None
        if verified is None or verified[0] is not request:
            return WebhookReply(400, b"not a verified event")
        event = verified[1]
        if event.get("type") == "url_verification":
            answer = {"challenge": str(event.get("challenge", ""))}
            return WebhookReply(200, json.dumps(answer).encode(), _JSON)
        header = event.get("header") or {}
        body = event.get("event") or {}
        if not isinstance(header, dict) or not isinstance(body, dict):
            return WebhookReply(400, b"not a Feishu event")
        if header.get("app_id") not in (None, "", self.app_id):
            return WebhookReply(400, b"an event of another app")
        kind = header.get("event_type")
        if kind == "im.message.receive_v1":
            message = self._message(body)
            if message is not None:
                await inbox(message)
        elif kind == "card.action.trigger":
            pressed = self._press(body, str(header.get("event_id", "")))
            if pressed is not None:
                await inbox(pressed)
                assert pressed.callback is not None
                toast = self._toasts.pop(pressed.callback.id, "")
                if toast:
                    toasted = {"toast": {"type": "info", "content": toast}}
                    return WebhookReply(200, json.dumps(toasted).encode(), _JSON)
        return WebhookReply(200, b"{}", _JSON)

    def _message(self, body: dict[str, Any]) -> InboundMessage | None:
        sender = body.get("sender") or {}
        message = body.get("message") or {}
        if not isinstance(sender, dict) or not isinstance(message, dict):
            return None
        if sender.get("sender_type") not in (None, "user"):
            return None  # bots and the app itself
        ids = sender.get("sender_id") or {}
        ids = ids if isinstance(ids, dict) else {}
        open_id = str(ids.get("open_id", ""))
        chat, message_id = str(message.get("chat_id", "")), str(message.get("message_id", ""))
        if not open_id or not chat or not message_id:
            return None
        try:
            content = json.loads(str(message.get("content") or "{}"))
        except ValueError:
            content = {}
        content = content if isinstance(content, dict) else {}
        kind = str(message.get("message_type", ""))
        mentions = [m for m in message.get("mentions") or [] if isinstance(m, dict)]
        addressed_bot = any(
            isinstance(m.get("id"), dict) and m["id"].get("open_id") == self.bot_open_id
            for m in mentions
        )
        text, attachments = _content(kind, content, message_id)
        for mention in mentions:
            ours = isinstance(mention.get("id"), dict) and (
                mention["id"].get("open_id") == self.bot_open_id
            )
            key = str(mention.get("key", ""))
            if key:
                text = text.replace(key, "" if ours else f"@{mention.get('name', '')}")
        group = message.get("chat_type") != "p2p"
        aliases = [str(ids[k]) for k in ("user_id", "union_id") if ids.get(k)]
        return InboundMessage(
            channel=self.account,
            chat=chat,
            message_id=message_id,
            sender=open_id,
            sender_aliases=aliases,
            text=" ".join(text.split()) if group else text.strip(),
            is_group=group,
            addressed=not group or addressed_bot,
            attachments=attachments,
            at=_seconds(message.get("create_time")),
        )

    def _press(self, body: dict[str, Any], event_id: str) -> InboundMessage | None:
        operator = body.get("operator") or {}
        action = body.get("action") or {}
        context = body.get("context") or {}
        if not all(isinstance(x, dict) for x in (operator, action, context)):
            return None
        value = action.get("value") or {}
        data = str(value.get("data", "")) if isinstance(value, dict) else ""
        open_id = str(operator.get("open_id", ""))
        chat = str(context.get("open_chat_id", ""))
        message_id = str(context.get("open_message_id", ""))
        if not (data and open_id and chat and event_id):
            return None
        return InboundMessage(
            channel=self.account,
            chat=chat,
            message_id=message_id,
            sender=open_id,
            callback=Callback(event_id, data, message_id),
        )

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        # The toast rides on the answer to the card.action.trigger request (take).
        if text:
            self._toasts[callback.id] = text

    async def download(self, attachment: Attachment) -> bytes:
        message_id, _, rest = attachment.file_id.partition("|")
        key, _, kind = rest.partition("|")
        if not message_id or not key:
            raise SendError(f"feishu {self.account}: not a Feishu file reference")
        return await self.api.resource(message_id, key, kind or "file", self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return feishu_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        if not buttons:
            return await self.api.send(to.chat, "text", {"text": chunk}, send_uuid("text"))
        message_id = await self.api.send(
            to.chat, "interactive", card(chunk, buttons), send_uuid("card")
        )
        self._cards[message_id] = chunk
        while len(self._cards) > _CARDS:
            self._cards.popitem(last=False)
        return message_id

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        text = self._cards.pop(message_id, None)
        if text is not None:
            await self.api.update_card(message_id, card(text, None))

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = path.read_bytes()
        shown = name or path.name
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{shown} is over Feishu's 30 MB file limit")
        key = await self.api.upload(shown, data, "stream")
        message_id = await self.api.send(to.chat, "file", {"file_key": key}, send_uuid("file"))
        if caption:
            await self.api.send(to.chat, "text", {"text": caption}, send_uuid("caption"))
        return message_id


def _content(kind: str, content: dict[str, Any], message_id: str) -> tuple[str, list[Attachment]]:
    """A message's text and files by its type (text, post, file, image, audio, media)."""
    if kind == "text":
        return str(content.get("text", "")), []
    if kind == "post":
        return _post_text(content), []
    if kind in ("file", "audio", "media") and content.get("file_key"):
        key = str(content["file_key"])
        name = str(content.get("file_name") or f"{key}{'.opus' if kind == 'audio' else ''}")
        what = {"file": "document", "audio": "voice", "media": "video"}[kind]
        media_type = "audio/ogg" if kind == "audio" else _media_type(name)
        ref = f"{message_id}|{key}|file"
        return "", [Attachment(what, ref, name, media_type)]  # type: ignore[arg-type]  # what is one of Attachment's kinds
    if kind == "image" and content.get("image_key"):
        key = str(content["image_key"])
        return "", [Attachment("photo", f"{message_id}|{key}|image", f"{key}.png", "image/png")]
    return "", []


def _post_text(content: dict[str, Any]) -> str:
    """A rich-text (post) message's words: its title and text, links and mentions."""
    post = content
    if "content" not in post:  # {"zh_cn": {...}} as events deliver some posts
        post = next((v for v in post.values() if isinstance(v, dict)), {})
    lines = [str(post.get("title", ""))] if post.get("title") else []
    for paragraph in post.get("content") or []:
        if isinstance(paragraph, list):
            words = [
                str(item.get("text") or item.get("user_name") or item.get("key") or "")
                for item in paragraph
                if isinstance(item, dict) and item.get("tag") in ("text", "a", "at")
            ]
            lines.append("".join(words))
    return "\n".join(lines)


def _seconds(value: Any) -> float:
    text = str(value or "")
    return int(text) / 1000 if text.isdigit() else time.time()


def _media_type(name: str) -> str:
    import mimetypes

    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def build(config: ChannelConfig, context: AdapterContext) -> FeishuAdapter:
    """The adapter of one Feishu/Lark app (habakkuk.channels.platforms)."""
    if not config.app_id:
        raise FatalAdapterError(f"channels.{config.name}: a feishu channel needs app_id")
    return FeishuAdapter(
        config,
        context.door,
        secret=context.secret(config, "app_secret_env"),
        encrypt_key=context.secret(config, "encrypt_key_env"),
        verification_token=context.secret(config, "verification_token_env"),
    )


SETUP = FEISHU_SETUP
