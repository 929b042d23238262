"""SMS and MMS through Twilio: Twilio calls `/channels/<account>`, replies go through its
Messages REST API (habakkuk/channels/sms_wire.py).

- In: Twilio POSTs each message as a form, signed with X-Twilio-Signature over the URL it
  called (`http.public_url` plus the path behind a proxy) and the sorted form; a request
  that fails the check gets 403 and starts nothing. The chat is the sender's number; an
  SMS conversation has no groups, so every message is addressed. Twilio retries a message
  whose request failed, and the gateway takes each MessageSid once.
- Out: plain text (SMS has no markup) in chunks under Twilio's 1600 characters; approvals
  by a typed yes or no (no buttons); files as MMS, offered to Twilio under a one-hour
  URL from memory (habakkuk/channels/webhook.py). Twilio has no idempotency key: a crash
  between its answer and our record sends that part again (the delivery worker's record
  of each send's start bounds it to that part).

Why not the twilio package: it drags in requests and a generated client for hundreds of
resources to make one POST and check one HMAC; aiohttp (already a dependency) does both.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlsplit

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
from .format import html_to_plain, markdown_chunks
from .platforms import AdapterContext
from .sms_setup import SMS_SETUP
from .sms_wire import DEFAULT_BASE_URL, MessagesApi, form_params, signed
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

SMS_LIMIT = 1600  # Twilio's longest message body
MMS_BYTES = 5 * 1024 * 1024  # Twilio's MMS media limit
TWIML_EMPTY = b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
_KINDS = {"image": "photo", "audio": "audio", "video": "video"}


def sms_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks Twilio accepts."""
    # Telegram's HTML is never shorter than its plain text, so each chunk fits.
    return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, SMS_LIMIT)]


class SmsAdapter(WebhookAdapter):
    """One Twilio number (`from`) of one Twilio account."""

    type = "sms"
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = MMS_BYTES

    def __init__(self, config: ChannelConfig, door: WebhookDoor, token: str):
        super().__init__(config, door)
        self.sid = config.account_sid or ""
        self.sender = config.from_ or ""
        self.token = token
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        self._http: aiohttp.ClientSession | None = None

    @property
    def api(self) -> MessagesApi:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return MessagesApi(self.base_url, self.sid, self.token, self._http)

    async def connect(self) -> None:
        """The account and token are Twilio's (a refused one is fatal)."""
        try:
            await self.api.account()
        except SendError as exc:
            raise ConnectionError(f"sms {self.account}: cannot reach Twilio: {exc}") from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        given = request.headers.get("X-Twilio-Signature", "")
        if request.method != "POST" or not given:
            return False
        try:
            params = form_params(request.body)
        except (UnicodeDecodeError, ValueError):
            return False
        return signed(self.token, request.url, params, given)

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        params = dict(form_params(request.body))
        sid = params.get("MessageSid") or params.get("SmsSid") or ""
        sender = params.get("From", "")
        if not sid or not sender or params.get("AccountSid") != self.sid:
            return WebhookReply(400, b"not a Twilio message")
        if params.get("To") and params["To"] != self.sender:
            log.info("sms %s: a message to %s, not our number", self.account, params["To"])
            return WebhookReply(200, TWIML_EMPTY, "text/xml")
        attachments: list[Attachment] = []
        for i in range(min(10, _int(params.get("NumMedia")))):
            url = params.get(f"MediaUrl{i}", "")
            media_type = params.get(f"MediaContentType{i}", "application/octet-stream")
            if url:
                kind = _KINDS.get(media_type.partition("/")[0], "document")
                name = url.rstrip("/").rsplit("/", 1)[-1] + _suffix(media_type)
                attachments.append(Attachment(kind, url, name, media_type))  # type: ignore[arg-type]  # _KINDS holds Attachment kinds only
        message = InboundMessage(
            channel=self.account,
            chat=sender,
            message_id=sid,
            sender=sender,
            text=params.get("Body", ""),
            attachments=attachments,
        )
        await inbox(message)
        return WebhookReply(200, TWIML_EMPTY, "text/xml")

    async def download(self, attachment: Attachment) -> bytes:
        # Only Twilio's own media URLs of this account get our credentials.
        ours = urlsplit(self.base_url + f"/2010-04-01/Accounts/{self.sid}/")
        url = urlsplit(attachment.file_id)
        if (url.scheme, url.netloc) != (ours.scheme, ours.netloc) or not url.path.startswith(
            ours.path
        ):
            raise SendError(f"sms {self.account}: a media URL that is not Twilio's")
        return await self.api.download(attachment.file_id, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return sms_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        return await self.api.send(self.sender, to.chat, chunk)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = path.read_bytes()
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{name or path.name} is over Twilio's 5 MB MMS limit")
        url = self.media_url(data, _media_type(name or path.name))
        return await self.api.send(self.sender, to.chat, caption, [url])


def _int(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _suffix(media_type: str) -> str:
    import mimetypes

    return mimetypes.guess_extension(media_type) or ""


def _media_type(name: str) -> str:
    import mimetypes

    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def build(config: ChannelConfig, context: AdapterContext) -> SmsAdapter:
    """The adapter of one Twilio number (habakkuk.channels.platforms)."""
    if not config.account_sid or not config.from_:
        raise FatalAdapterError(
            f"channels.{config.name}: an sms channel needs account_sid and from"
        )
    return SmsAdapter(config, context.door, context.secret(config, "token_env"))


SETUP = SMS_SETUP
