"""WeCom (WeChat Work): a self-built app's callback calls `/channels/<account>`, replies go
out through /cgi-bin/message/send with the app's access token
(habakkuk/channels/wecom_wire.py, the token cached by habakkuk/channels/apptoken.py).

- In: every request carries msg_signature (SHA-1 of the sorted Token, timestamp, nonce
  and encrypted text); the text is AES-256-CBC under the EncodingAESKey and names the
  receiver, which must be our corp id. A request failing either, or whose timestamp is
  more than an hour off, gets 403 and starts nothing. The GET that verifies the URL is
  answered with its decrypted echostr. A member's message to the app is a one-to-one
  chat (the member's userid); images, voice notes and videos come with it (fetched by
  their MediaId). WeCom retries a callback it got no answer to, and the gateway takes
  each MsgId once.
- Out: plain text in chunks; files uploaded as temporary media and sent as file
  messages (20 MB). Approvals and questions come as template cards with buttons
  (habakkuk/channels/wecom_cards.py): a press comes back on the same verified callback as
  a template_card_event, and the card is greyed with the gateway's notice; a typed yes or
  no answers too. WeCom has no idempotency key: a crash between its answer and our record
  sends that part again (the delivery worker's record of each send's start bounds it to
  that part).

Why not a WeCom SDK: wechatpy (the best kept) is synchronous over requests and brings its
own crypto choice; gettoken, message/send and the media calls are plain JSON over aiohttp,
and `cryptography` does the AES.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.i18n import t

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
from .format import html_to_plain, markdown_chunks
from .platforms import AdapterContext
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest
from .wecom_cards import BUTTON_CHARS, SentCards, card_parts, fits, press
from .wecom_setup import WECOM_SETUP
from .wecom_wire import WECOM_URL, WeComApi, aes_key, decrypt, signed, xml_fields

log = logging.getLogger(__name__)

TEXT_LIMIT = 2000  # characters per text message (WeCom takes 2048 bytes... of UTF-8: see send)
TEXT_BYTES = 2048  # WeCom's limit for a text message's content
FILE_BYTES = 20 * 1024 * 1024  # a temporary file is 20 MB at most
MAX_SKEW = 3600.0
_KINDS = {"image": "photo", "voice": "voice", "video": "video"}
_SUFFIX = {"image": ".jpg", "voice": ".amr", "video": ".mp4"}
_TYPES = {"image": "image/jpeg", "voice": "audio/amr", "video": "video/mp4"}


def wecom_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks within WeCom's 2048 bytes a text message."""
    chunks: list[str] = []
    for chunk in markdown_chunks(markdown, TEXT_LIMIT):
        text = html_to_plain(chunk)
        while len(text.encode()) > TEXT_BYTES:  # CJK text: three bytes a character
            cut = len(text.encode()[:TEXT_BYTES].decode(errors="ignore"))
            chunks.append(text[:cut])
            text = text[cut:]
        chunks.append(text)
    return [chunk for chunk in chunks if chunk] or [""]


class WeComAdapter(WebhookAdapter):
    """One WeCom self-built app."""

    type = "wecom"
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download"})
    max_file_bytes = FILE_BYTES

    def __init__(
        self, config: ChannelConfig, door: WebhookDoor, *, secret: str, token: str, key: bytes
    ):
        super().__init__(config, door)
        self.corp_id = config.corp_id or ""
        self.agent_id = int(config.agent_id or "0")
        self.secret, self.token, self.key = secret, token, key
        self.base_url = (config.base_url or WECOM_URL).rstrip("/")
        self._http: aiohttp.ClientSession | None = None
        self._api: WeComApi | None = None
        self._verified: tuple[WebhookRequest, bytes] | None = None
        self._cards = SentCards()

    @property
    def api(self) -> WeComApi:
        if self._api is None or self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
            self._api = WeComApi(self.base_url, self.corp_id, self.secret, self._http)
        return self._api

    async def connect(self) -> None:
        """The app's access token (a refused corp id or secret is fatal)."""
        try:
            await self.api.tokens.get()
        except SendError as exc:
            raise ConnectionError(f"wecom {self.account}: cannot reach WeCom: {exc}") from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = self._api = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        self._verified = None
        query = dict(parse_qsl(urlsplit(request.url).query))
        stamp, nonce = query.get("timestamp", ""), query.get("nonce", "")
        given = query.get("msg_signature", "")
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > MAX_SKEW or not given:
            return False
        if request.method == "GET":
            encrypted = query.get("echostr", "")
        elif request.method == "POST":
            try:
                encrypted = xml_fields(request.body).get("Encrypt", "")
            except ValueError:
                return False
        else:
            return False
        if not encrypted or not signed(self.token, stamp, nonce, encrypted, given):
            return False
        try:
            plain = decrypt(self.key, encrypted, self.corp_id)
        except ValueError:
            return False
        self._verified = (request, plain)
        return True

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        verified, self._verified = self._verified, None
        if verified is None or verified[0] is not request:
            return WebhookReply(400, b"not a verified callback")
        if request.method == "GET":  # the URL's verification: the echostr, decrypted
            return WebhookReply(200, verified[1])
        try:
            fields = xml_fields(verified[1])
        except ValueError:
            return WebhookReply(400, b"not a WeCom message")
        message = self._message(fields)
        if message is not None and message.callback is not None:
            self._cards.pressed(message.callback.message_id, message.sender, fields["ResponseCode"])
        if message is not None:
            await inbox(message)
        return WebhookReply(200, b"")

    def _message(self, fields: dict[str, str]) -> InboundMessage | None:
        kind, sender = fields.get("MsgType", ""), fields.get("FromUserName", "")
        msg_id = fields.get("MsgId", "")
        if fields.get("AgentID") and fields["AgentID"] != str(self.agent_id):
            return None  # another app's message on a shared URL
        if kind == "event":  # a card's button pressed; entering the app, menu clicks: nothing
            return press(fields, self.account) if fields.get("ResponseCode") else None
        if not sender or not msg_id:
            return None
        attachments: list[Attachment] = []
        if kind in _KINDS and fields.get("MediaId"):
            attachments.append(
                Attachment(
                    _KINDS[kind],  # type: ignore[arg-type]  # _KINDS holds Attachment kinds only
                    fields["MediaId"],
                    f"{msg_id}{_SUFFIX[kind]}",
                    _TYPES[kind],
                )
            )
        created = fields.get("CreateTime", "")
        return InboundMessage(
            channel=self.account,
            chat=sender,
            message_id=msg_id,
            sender=sender,
            text=fields.get("Content", "") if kind == "text" else "",
            attachments=attachments,
            at=int(created) if created.isdigit() else time.time(),
        )

    async def download(self, attachment: Attachment) -> bytes:
        return await self.api.media(attachment.file_id, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return wecom_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        if not buttons or not fits(buttons):
            return await self.api.send(self.agent_id, to.chat, "text", {"content": chunk})
        parts = card_parts(chunk, buttons)
        if parts.before:
            await self.api.send(self.agent_id, to.chat, "text", {"content": parts.before})
        sent = await self.api.send_answer(self.agent_id, to.chat, "template_card", parts.card)
        # The card's id is its task_id: what a press names, and what strip_buttons greys.
        task_id = str(parts.card["task_id"])
        self._cards.sent(task_id, to.chat, sent["response_code"])
        return task_id

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        # WeCom shows no notice for a press: the greyed button says it (strip_buttons).
        self._cards.noticed(callback.message_id, text)

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        card = self._cards.take(message_id)
        if card is not None:
            name = (card.notice or t("chat.button.closed"))[:BUTTON_CHARS]
            await self.api.update_card_button(self.agent_id, card.user, card.code, name)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = path.read_bytes()
        shown = name or path.name
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{shown} is over WeCom's 20 MB file limit")
        media = await self.api.upload(shown, data, "file")
        message_id = await self.api.send(self.agent_id, to.chat, "file", {"media_id": media})
        if caption:
            await self.api.send(self.agent_id, to.chat, "text", {"content": caption})
        return message_id


def build(config: ChannelConfig, context: AdapterContext) -> WeComAdapter:
    """The adapter of one WeCom app (habakkuk.channels.platforms)."""
    if not config.corp_id or not (config.agent_id or "").isdigit():
        raise FatalAdapterError(f"channels.{config.name}: a wecom channel needs corp_id, agent_id")
    try:
        key = aes_key(context.secret(config, "aes_key_env"))
    except ValueError as exc:
        raise FatalAdapterError(f"channels.{config.name}.aes_key_env: {exc}") from None
    return WeComAdapter(
        config,
        context.door,
        secret=context.secret(config, "app_secret_env"),
        token=context.secret(config, "token_env"),
        key=key,
    )


SETUP = WECOM_SETUP
