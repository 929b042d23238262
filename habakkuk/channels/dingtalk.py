"""DingTalk: the app's robot posts each message to `/channels/<account>` (HTTP mode),
replies go back by the message's session webhook while it is valid, else through the
robot OpenAPI with the app's access token (habakkuk/channels/dingtalk_wire.py, the token
cached by habakkuk/channels/apptoken.py).

- In: every request is signed (`sign`: HMAC-SHA256 of the timestamp and the AppSecret);
  an unsigned or wrongly signed one, or one whose timestamp is more than an hour off,
  gets 403 and starts nothing. A one-to-one chat is the sender's staff id; a group is its
  conversation id (DingTalk's start with "cid"), where the robot only hears messages
  that @mention it, so each is addressed. The gateway takes each msgId once.
- Out: plain text in chunks. Approvals and questions in a one-to-one chat come as an
  ActionCard whose buttons send their answer into the chat as the person
  (habakkuk/channels/dingtalk_cards.py says why this kind); a typed yes or no answers
  too, and is the way in groups. Files are uploaded (the legacy /media/upload, 20 MB)
  and sent as the robot's sampleFile message; a person's file comes with its
  downloadCode, exchanged through the robot API for a download URL.
  DingTalk has no idempotency key: a crash between its answer and our record sends that
  part again (the delivery worker's record of each send's start bounds it to that part).

Why not the dingtalk SDKs: alibabacloud-dingtalk is a generated synchronous client of
hundreds of APIs (Tea, darabonba) and dingtalk-stream needs the Stream mode's socket;
three JSON POSTs and one HMAC are done here over aiohttp.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import time
from collections import OrderedDict
from pathlib import Path
from urllib.parse import urlsplit

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
from .dingtalk_cards import fits, pressed, robot_card, session_card
from .dingtalk_setup import DINGTALK_SETUP
from .dingtalk_wire import API_URL, OAPI_URL, SESSION_URL, DingTalkApi, signed
from .format import html_to_plain, markdown_chunks
from .platforms import AdapterContext
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

TEXT_LIMIT = 4000  # characters per message (DingTalk takes ~20 KB; long ones read badly)
_SESSIONS = 1024  # chats whose session webhook is remembered
_OK = b'{"msgtype":"empty"}'  # an answer that posts nothing back
_JSON = "application/json"


def dingtalk_chunks(markdown: str) -> list[str]:
    """Markdown as plain text in chunks of a text message."""
    return [html_to_plain(chunk) for chunk in markdown_chunks(markdown, TEXT_LIMIT)]


class DingTalkAdapter(WebhookAdapter):
    """One DingTalk app's robot."""

    type = "dingtalk"
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download"})
    max_file_bytes = 20 * 1024 * 1024  # /media/upload's file limit

    def __init__(self, config: ChannelConfig, door: WebhookDoor, secret: str):
        super().__init__(config, door)
        self.app_key = config.app_id or ""
        self.robot = config.robot_code or self.app_key
        self.secret = secret
        self.base_url = (config.base_url or API_URL).rstrip("/")
        # session webhooks are trusted only on DingTalk's own host (or the configured one)
        session_root = f"{self.base_url}/" if config.base_url else SESSION_URL
        self._session_origin = urlsplit(session_root)[:2]
        self._sessions: OrderedDict[str, tuple[str, float]] = OrderedDict()  # chat -> (url, until)
        self._http: aiohttp.ClientSession | None = None
        self._api: DingTalkApi | None = None
        self._notices: dict[str, str] = {}  # a press's msgId -> what the gateway answered

    @property
    def api(self) -> DingTalkApi:
        if self._api is None or self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
            oapi = self.base_url if self.config.base_url else OAPI_URL
            self._api = DingTalkApi(self.base_url, self.app_key, self.secret, self._http, oapi)
        return self._api

    async def connect(self) -> None:
        """The app's access token (a refused key or secret is fatal)."""
        try:
            await self.api.tokens.get()
        except SendError as exc:
            raise ConnectionError(
                f"dingtalk {self.account}: cannot reach DingTalk: {exc}"
            ) from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = self._api = None

    # -- in -------------------------------------------------------------------------

    def verify(self, request: WebhookRequest) -> bool:
        if request.method != "POST":
            return False
        headers = {k.lower(): v for k, v in request.headers.items()}
        return signed(
            headers.get("timestamp", ""),
            self.secret,
            headers.get("sign", ""),
            int(time.time() * 1000),
        )

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            return WebhookReply(400, b"not JSON")
        if not isinstance(body, dict):
            return WebhookReply(400, b"not a DingTalk message")
        group = str(body.get("conversationType", "1")) == "2"
        staff = str(body.get("senderStaffId", ""))
        conversation = str(body.get("conversationId", ""))
        msg_id = str(body.get("msgId", ""))
        chat = conversation if group else staff
        if not msg_id or not chat or not staff:
            return WebhookReply(400, b"not a DingTalk message")
        self._remember_session(chat, body)
        aliases = [str(body["senderId"])] if body.get("senderId") else []
        text = _text(body).strip()
        # A card's button sends its answer as the person's message: a press, once per msgId.
        data = pressed(text) if not group else None
        message = InboundMessage(
            channel=self.account,
            chat=chat,
            message_id=msg_id,
            sender=staff,
            sender_aliases=aliases,
            sender_name=str(body.get("senderNick", "")),
            text="" if data else text,
            attachments=_files(body),
            callback=Callback(msg_id, data, "") if data else None,
            is_group=group,
            addressed=True,  # a group's robot hears only the messages that @mention it
            at=_seconds(body.get("createAt")),
        )
        await inbox(message)
        notice = self._notices.pop(msg_id, "") if data else ""
        if notice:  # the press's answer rides on the answer to its message, as a text
            said = {"msgtype": "text", "text": {"content": notice}}
            return WebhookReply(200, json.dumps(said, ensure_ascii=False).encode(), _JSON)
        return WebhookReply(200, _OK, _JSON)

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        # Said back in the answer to the press's message (take): "Approved", or that an
        # old card's prompt has expired.
        if text:
            self._notices[callback.id] = text

    def _remember_session(self, chat: str, body: dict[str, object]) -> None:
        url = str(body.get("sessionWebhook", ""))
        until = body.get("sessionWebhookExpiredTime")
        parts = urlsplit(url)
        if not isinstance(until, int) or (parts.scheme, parts.netloc) != self._session_origin:
            return
        self._sessions[chat] = (url, until / 1000)
        self._sessions.move_to_end(chat)
        while len(self._sessions) > _SESSIONS:
            self._sessions.popitem(last=False)

    async def download(self, attachment: Attachment) -> bytes:
        return await self.api.download(self.robot, attachment.file_id, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return dingtalk_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        group = to.chat.startswith("cid")
        # Buttons only where their message reaches the robot: one-to-one (see dingtalk_cards).
        card = buttons if buttons and not group and fits(buttons) else None
        session = self._sessions.get(to.chat)
        # A minute's margin: a session about to lapse is not worth the try.
        if session is not None and time.time() < session[1] - 60:
            body = session_card(chunk, card) if card else None
            if await self.api.send_by_session(session[0], chunk, body):
                return ""
            self._sessions.pop(to.chat, None)
        if group:
            return await self.api.send_to_group(self.robot, to.chat, chunk)
        if card:
            key, param = robot_card(chunk, card)
            return await self.api.send_to_person(self.robot, to.chat, "", key=key, param=param)
        return await self.api.send_to_person(self.robot, to.chat, chunk)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = path.read_bytes()
        shown = name or path.name
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{shown} is over DingTalk's 20 MB file limit")
        media = await self.api.upload(shown, data)
        suffix = shown.rsplit(".", 1)[-1].lower() if "." in shown else "file"
        param = {"mediaId": media, "fileName": shown, "fileType": suffix}
        if to.chat.startswith("cid"):
            sent = await self.api.send_to_group(
                self.robot, to.chat, "", key="sampleFile", param=param
            )
        else:
            sent = await self.api.send_to_person(
                self.robot, to.chat, "", key="sampleFile", param=param
            )
        if caption:
            await self.send_text(to, caption)
        return sent


def _files(body: dict[str, object]) -> list[Attachment]:
    """A file or picture message's download code, as an attachment."""
    content = body.get("content")
    if not isinstance(content, dict) or not content.get("downloadCode"):
        return []
    code = str(content["downloadCode"])
    if body.get("msgtype") == "picture":
        return [Attachment("photo", code, "picture.png", "image/png")]
    name = str(content.get("fileName") or "file")
    media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return [Attachment("document", code, name, media_type)]


def _text(body: dict[str, object]) -> str:
    """A message's words: text, or the text parts of a rich text."""
    text = body.get("text")
    if isinstance(text, dict):
        return str(text.get("content", ""))
    content = body.get("content")
    if isinstance(content, dict) and isinstance(content.get("richText"), list):
        return "".join(
            str(part.get("text", "")) for part in content["richText"] if isinstance(part, dict)
        )
    return ""


def _seconds(value: object) -> float:
    return value / 1000 if isinstance(value, int) else time.time()


def build(config: ChannelConfig, context: AdapterContext) -> DingTalkAdapter:
    """The adapter of one DingTalk app's robot (habakkuk.channels.platforms)."""
    if not config.app_id:
        raise FatalAdapterError(f"channels.{config.name}: a dingtalk channel needs app_id")
    return DingTalkAdapter(config, context.door, context.secret(config, "app_secret_env"))


SETUP = DINGTALK_SETUP
