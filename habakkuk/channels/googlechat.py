"""Google Chat as an HTTP endpoint app: Google Chat calls `/channels/<account>`, replies
go through the Chat REST API as the app's service account
(habakkuk/channels/googlechat_wire.py).

- In: every interaction event comes with a Google-signed RS256 token, checked against
  Google's published keys (habakkuk/channels/jwks.py) for the app's audience (its project
  number or its endpoint URL); one that fails gets 403 and starts nothing. A message's
  id is its resource name's last part, so a redelivered event starts no second turn.
- Chats: a space is a chat (`spaces/AAAA` is `AAAA`); a direct message is always
  addressed, a space message when the app is @mentioned (Google Chat sends the app no
  other). In a threaded space each thread is its own conversation.
- Out: Google Chat's text formatting (*bold*, _italic_, `code`) in chunks; approvals as a
  card whose buttons come back as CARD_CLICKED events; a message id derived from the
  delivery and its part, so a resend after a crash makes no second message. Chat lets an
  app upload no file (media.upload needs a user's own authorization), so a file to a
  person becomes a notice saying so; files people send are downloaded with media.download.
Sender ids are the number of `users/<number>`; the person's email is an alias.

Why not google-api-python-client and google-auth: they bring httplib2, the discovery
documents and requests-based transports for one POST, one GET and two JWTs that PyJWT
(a core dependency) signs and checks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
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
)
from .chunking import chunks
from .deliveries import SENDING
from .discord_format import DISCORD_MARKDOWN
from .googlechat_setup import GOOGLECHAT_SETUP, key_path
from .googlechat_wire import (
    API_ROOT,
    AppToken,
    ChatApi,
    ServiceAccountKey,
    from_chat,
    keys_url,
    token_rules,
)
from .jwks import KeySet, bearer
from .platforms import AdapterContext
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

CHAT_LIMIT = 4000  # Google Chat takes 4,096 characters of text in a message
FUNCTION = "habakkuk"  # the card buttons' action function
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_KINDS = {"image": "photo", "audio": "audio", "video": "video"}
EMPTY = WebhookReply(200, b"{}", "application/json")


def chat_chunks(markdown: str) -> list[str]:
    """Markdown in Google Chat's formatting (bold is one star), in chunks it takes."""
    return [_BOLD.sub(r"*\1*", chunk) for chunk in chunks(markdown, CHAT_LIMIT, DISCORD_MARKDOWN)]


def card_of(buttons: list[list[Button]]) -> dict[str, Any]:
    """A card (cardsV2) holding the buttons; a press calls FUNCTION with their data."""
    listed = [
        {
            "text": b.text,
            "onClick": {
                "action": {"function": FUNCTION, "parameters": [{"key": "data", "value": b.data}]}
            },
        }
        for row in buttons
        for b in row
    ]
    return {
        "cardId": "buttons",
        "card": {"sections": [{"widgets": [{"buttonList": {"buttons": listed}}]}]},
    }


class GoogleChatAdapter(WebhookAdapter):
    """One Google Chat app (its service account)."""

    type = "googlechat"
    capabilities: frozenset[Capability] = frozenset({"buttons", "download"})
    max_file_bytes = 25 * 1024 * 1024
    keyed_sends = True

    def __init__(self, config: ChannelConfig, door: WebhookDoor, key: ServiceAccountKey):
        super().__init__(config, door)
        self.audience = config.audience or ""
        self.keys = KeySet(jwks_url=keys_url(self.audience, config.base_url))
        self.rules = token_rules(self.audience)
        self.token = AppToken(key, self._session)
        self.api = ChatApi(config.base_url or API_ROOT, self.token, self._session)
        self._http: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._http

    async def connect(self) -> None:
        """Google's keys can be read and the service account gets a token (a refused key
        is fatal)."""
        try:
            await self.keys.fetch(self._session())
            await self.token.get()
        except SendError as exc:
            raise ConnectionError(f"googlechat {self.account}: {exc}") from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # -- in -------------------------------------------------------------------------

    async def receive(self, request: WebhookRequest) -> WebhookReply:
        """Fetch Google's keys first when the token names one we do not hold (at most
        once a minute), then check and take the request."""
        token = bearer(request.headers)
        if token and self._inbox is not None:
            try:
                await self.keys.ready_for(token, self._session())
            except ConnectionError as exc:
                log.warning("googlechat %s: cannot read Google's keys: %s", self.account, exc)
                return WebhookReply(503, b"restarting")
        return await super().receive(request)

    def verify(self, request: WebhookRequest) -> bool:
        token = bearer(request.headers)
        if request.method != "POST" or not token or _event(request.body) is None:
            return False
        verified = self.keys.check(token, self.rules)
        return verified is not None and from_chat(verified.claims, self.audience)

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        event = _event(request.body) or {}
        kind = event.get("type")
        message = _dict(event.get("message"))
        space = _dict(event.get("space")) or _dict(message.get("space"))
        space_name = str(space.get("name", ""))
        if not space_name.startswith("spaces/"):
            return WebhookReply(400, b"not a Google Chat event")
        if kind == "MESSAGE" and message.get("name"):
            found = self._message(event, message, space)
        elif kind == "CARD_CLICKED":
            found = self._click(event, message, space)
        else:
            return EMPTY  # ADDED_TO_SPACE, REMOVED_FROM_SPACE, ...
        if found is not None:
            await inbox(found)
        return EMPTY

    def _message(
        self, event: dict[str, Any], message: dict[str, Any], space: dict[str, Any]
    ) -> InboundMessage | None:
        sender = _dict(message.get("sender")) or _dict(event.get("user"))
        if sender.get("type") == "BOT":
            return None
        group = _is_group(space)
        mentioned = any(
            _dict(_dict(a.get("userMention")).get("user")).get("type") == "BOT"
            for a in map(_dict, message.get("annotations") or [])
        )
        text = message.get("argumentText")
        text = str(message.get("text", "") if text is None else text).strip()
        return InboundMessage(
            channel=self.account,
            chat=_last(str(space["name"])),
            message_id=_last(str(message["name"])),
            sender=_last(str(sender.get("name", ""))),
            sender_aliases=[a for a in (str(sender.get("email", "")), sender.get("name")) if a],
            sender_name=str(sender.get("displayName", "")),
            text=text,
            thread=_thread(space, message),
            is_group=group,
            addressed=not group or mentioned or "slashCommand" in message,
            attachments=_attachments(message),
        )

    def _click(
        self, event: dict[str, Any], message: dict[str, Any], space: dict[str, Any]
    ) -> InboundMessage | None:
        action = _dict(event.get("action"))
        parameters = {
            str(p.get("key")): str(p.get("value", ""))
            for p in map(_dict, action.get("parameters") or [])
        }
        data = parameters.get("data", "")
        if action.get("actionMethodName") != FUNCTION or not data:
            return None
        user = _dict(event.get("user"))
        message_id = _last(str(message.get("name", "")))
        # A click carries no id of its own: the event's time, who and what identify it.
        seed = "\x00".join((message_id, str(user.get("name")), str(event.get("eventTime")), data))
        click = "click-" + hashlib.sha256(seed.encode()).hexdigest()[:24]
        return InboundMessage(
            channel=self.account,
            chat=_last(str(space["name"])),
            message_id=click,
            sender=_last(str(user.get("name", ""))),
            sender_aliases=[a for a in (str(user.get("email", "")), user.get("name")) if a],
            sender_name=str(user.get("displayName", "")),
            thread=_thread(space, message),
            is_group=_is_group(space),
            addressed=True,
            callback=Callback(click, data, message_id),
        )

    async def download(self, attachment: Attachment) -> bytes:
        # file_id is the attachment's resource name, fetched from the Chat API only.
        return await self.api.download(attachment.file_id, self.max_file_bytes)

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return chat_chunks(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        space = f"spaces/{to.chat}"
        body: dict[str, Any] = {"text": chunk}
        if to.thread:
            body["thread"] = {"name": f"{space}/threads/{to.thread}"}
        if buttons:
            body["cardsV2"] = [card_of(buttons)]
        name = await self.api.create(space, body, _message_id())
        return _last(name)

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        """Remove an answered card's buttons (the text stays)."""
        name = f"spaces/{to.chat}/messages/{message_id}"
        await self.api.update(name, {"cardsV2": []}, "cardsV2")


def _message_id() -> str:
    """The client-assigned id of this send: derived from the delivery job and its part
    (a retry creates the same one), or none outside a delivery."""
    sending = SENDING.get()
    if sending is None:
        return ""
    seed = f"{sending.job}\x00{sending.chunk}"
    return "client-" + hashlib.sha256(seed.encode()).hexdigest()[:40]


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _last(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _is_group(space: dict[str, Any]) -> bool:
    return space.get("type") == "ROOM" or space.get("spaceType") in ("SPACE", "GROUP_CHAT")


def _thread(space: dict[str, Any], message: dict[str, Any]) -> str:
    """A threaded space's thread (its own conversation); "" elsewhere."""
    if space.get("spaceThreadingState") != "THREADED_MESSAGES":
        return ""
    return _last(str(_dict(message.get("thread")).get("name", "")))


def _event(body: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return found if isinstance(found, dict) else None


def _attachments(message: dict[str, Any]) -> list[Attachment]:
    found: list[Attachment] = []
    for item in map(_dict, message.get("attachment") or []):
        resource = str(_dict(item.get("attachmentDataRef")).get("resourceName", ""))
        if not resource:
            continue  # a Drive file: not ours to fetch with the app's token
        media_type = str(item.get("contentType") or "application/octet-stream")
        kind = _KINDS.get(media_type.partition("/")[0], "document")
        name = str(item.get("contentName") or "file")
        found.append(Attachment(kind, resource, name, media_type))  # type: ignore[arg-type]  # _KINDS holds Attachment kinds only
    return found


def build(config: ChannelConfig, context: AdapterContext) -> GoogleChatAdapter:
    """The adapter of one Google Chat app (habakkuk.channels.platforms)."""
    path = key_path(config, context.state_dir.parent)
    try:
        key = ServiceAccountKey.load(path)
    except ValueError as exc:
        raise FatalAdapterError(f"channels.{config.name}.key_file: {exc}") from None
    if path.stat().st_mode & 0o077:
        log.warning("channels.%s.key_file: %s is readable by others (chmod 600)", config.name, path)
    return GoogleChatAdapter(config, context.door, key)


SETUP = GOOGLECHAT_SETUP
