"""Microsoft Teams through the Bot Framework: the Bot Connector calls `/channels/<account>`,
replies go to each conversation's service URL (habakkuk/channels/teams_wire.py).

- In: every activity comes with a Bot Framework JWT, checked against the published keys
  (habakkuk/channels/jwks.py): RS256, issuer the Bot Framework, audience our App ID, not
  expired, its `serviceUrl` claim the activity's own, and the key endorsed for the
  activity's channel. A request that fails gets 403 and starts nothing. The Connector
  retries an activity it thinks failed, and the gateway takes each activity id once.
- Chats: a personal chat is always addressed; in a group chat or a channel the bot hears
  a message when it is @mentioned (`groups: mention`). Teams' ids hold colons, which
  our addresses use as separators, so a chat is its conversation id with `%` and `:`
  percent-escaped (reversible: the conversation id is read back from it).
- Out: Markdown (Teams renders it) in chunks; approvals as an Adaptive Card whose
  Action.Submit buttons come back as a message activity carrying the button's data;
  files by Teams' file consent flow in a personal chat (habakkuk/channels/teams_files.py),
  images in group chats and channels as attachments Teams fetches from a one-hour
  unguessable URL served from memory (habakkuk/channels/webhook.py). The Connector has
  no idempotency key: a crash between its answer and our record sends that part again
  (the delivery worker's record of each send's start bounds it to that part).

Why not botbuilder (botbuilder-core, botframework-connector): it brings msrest, requests
and msal for one token request, one POST and one JWT check that PyJWT (already installed
with cryptography) does; its aiohttp integration wants to own the route and the turn
loop, where ours goes through the gateway's durable jobs.
"""

from __future__ import annotations

import html
import json
import logging
import mimetypes
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

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
    Undeliverable,
    Unsupported,
)
from .chunking import chunks
from .discord_format import DISCORD_MARKDOWN
from .jwks import KeySet, bearer
from .platforms import AdapterContext
from .teams_files import INVOKE, consent_card, file_card, personal, upload, upload_allowed
from .teams_setup import TEAMS_SETUP
from .teams_wire import BotToken, Connector, Endpoints, ServiceUrls, token_rules
from .webhook import WebhookAdapter, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

TEAMS_LIMIT = 4000  # well under Teams' ~28 KB message, and readable
FILE_BYTES = 25 * 1024 * 1024
CARD = "application/vnd.microsoft.card.adaptive"
FILE_INFO = "application/vnd.microsoft.teams.file.download.info"
BUTTON_KEY = "habakkuk"  # the key of an Action.Submit's data holding the button's data
# Where Teams' pre-authorized download URLs of files people send point.
FILE_HOSTS = (".sharepoint.com", ".sharepoint.us", ".sharepoint.de", ".sharepoint.cn")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_KINDS = {"image": "photo", "audio": "audio", "video": "video"}


def chat_of(conversation: str) -> str:
    """The chat of a Teams conversation id in our addresses (no colons)."""
    return conversation.replace("%", "%25").replace(":", "%3A")


def conversation_of(chat: str) -> str:
    """The Teams conversation id a chat stands for."""
    return unquote(chat)


def teams_chunks(markdown: str) -> list[str]:
    """Markdown as Teams renders it, in chunks of at most TEAMS_LIMIT characters."""
    return chunks(markdown, TEAMS_LIMIT, DISCORD_MARKDOWN)


def card_of(buttons: list[list[Button]]) -> dict[str, Any]:
    """An Adaptive Card holding the buttons as Action.Submit actions."""
    return {
        "contentType": CARD,
        "content": {
            "type": "AdaptiveCard",
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4",
            "body": [],
            "actions": [
                {"type": "Action.Submit", "title": b.text, "data": {BUTTON_KEY: b.data}}
                for row in buttons
                for b in row
            ],
        },
    }


class TeamsAdapter(WebhookAdapter):
    """One Azure Bot (its Microsoft App ID) in Teams."""

    type = "teams"
    capabilities: frozenset[Capability] = frozenset({"buttons", "files", "download", "typing"})
    max_file_bytes = FILE_BYTES

    def __init__(
        self, config: ChannelConfig, door: WebhookDoor, password: str, state: Path
    ) -> None:
        super().__init__(config, door)
        self.app_id = config.app_id or ""
        self.endpoints = Endpoints.of(config.tenant, config.base_url)
        self.keys = KeySet(metadata_url=self.endpoints.metadata_url)
        self.rules = token_rules(self.app_id)
        self.token = BotToken(self.endpoints.token_url, self.app_id, password, self._session)
        self.connector = Connector(self.token, self._session)
        self.urls = ServiceUrls(state)
        self._http: aiohttp.ClientSession | None = None
        self._offered: dict[str, str] = {}  # media shelf token -> the file's name
        self._answered: set[str] = set()  # consent cards answered (a retry does nothing)
        self._with_buttons: OrderedDict[str, str] = OrderedDict()  # activity id -> its text

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        return self._http

    async def connect(self) -> None:
        """The signing keys can be read, and the App ID and password get a token (a
        refused password is fatal)."""
        try:
            await self.keys.fetch(self._session())
            await self.token.get()
        except SendError as exc:
            raise ConnectionError(f"teams {self.account}: {exc}") from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # -- in -------------------------------------------------------------------------

    async def receive(self, request: WebhookRequest) -> WebhookReply:
        """Fetch the keys first when the token names one we do not hold (at most once a
        minute), then check and take the request."""
        token = bearer(request.headers)
        if token and self._inbox is not None:
            try:
                await self.keys.ready_for(token, self._session())
            except ConnectionError as exc:
                log.warning("teams %s: cannot read the signing keys: %s", self.account, exc)
                return WebhookReply(503, b"restarting")
        return await super().receive(request)

    def verify(self, request: WebhookRequest) -> bool:
        token = bearer(request.headers)
        if request.method != "POST" or not token:
            return False
        verified = self.keys.check(token, self.rules)
        activity = _activity(request.body)
        if verified is None or activity is None:
            return False
        if verified.claims.get("serviceUrl") != activity.get("serviceUrl"):
            return False
        channel = str(activity.get("channelId", ""))
        return not verified.endorsements or channel in verified.endorsements

    async def take(self, request: WebhookRequest, inbox: Inbox) -> WebhookReply:
        activity = _activity(request.body) or {}
        conversation = _dict(activity.get("conversation"))
        conversation_id = str(conversation.get("id", ""))
        activity_id = str(activity.get("id", ""))
        if not conversation_id or not activity_id:
            return WebhookReply(400, b"not a Bot Framework activity")
        recipient = str(_dict(activity.get("recipient")).get("id", ""))
        if recipient and self.app_id not in recipient:
            log.info("teams %s: an activity for another bot (%s)", self.account, recipient)
            return WebhookReply(200)
        self.urls.remember(conversation_id, str(activity.get("serviceUrl", "")))
        if activity.get("type") == "invoke" and activity.get("name") == INVOKE:
            return await self._consent(activity)
        if activity.get("type") != "message":
            return WebhookReply(200)  # conversationUpdate, installationUpdate, typing...
        await inbox(self._message(activity, conversation, recipient))
        return WebhookReply(200)

    def _message(
        self, activity: dict[str, Any], conversation: dict[str, Any], recipient: str
    ) -> InboundMessage:
        person = _dict(activity.get("from"))
        person_id = str(person.get("id", ""))
        kind = str(conversation.get("conversationType", "personal"))
        text, mentioned = _text(activity, recipient)
        value = activity.get("value")
        callback = None
        if isinstance(value, dict) and isinstance(value.get(BUTTON_KEY), str):
            callback = Callback(
                str(activity["id"]), value[BUTTON_KEY], str(activity.get("replyToId", ""))
            )
        return InboundMessage(
            channel=self.account,
            chat=chat_of(str(conversation["id"])),
            message_id=str(activity["id"]),
            sender=str(person.get("aadObjectId") or chat_of(person_id)),
            sender_aliases=[a for a in (person_id, chat_of(person_id)) if a],
            sender_name=str(person.get("name", "")),
            text=text,
            is_group=kind != "personal",
            addressed=kind == "personal" or mentioned or callback is not None,
            attachments=_attachments(activity),
            callback=callback,
        )

    async def download(self, attachment: Attachment) -> bytes:
        url = urlsplit(attachment.file_id)
        own = any(attachment.file_id.startswith(u.rstrip("/") + "/") for u in self.urls.hosts())
        if own:  # an inline image on the Connector: our token opens it
            return await self.connector.download(
                attachment.file_id, self.max_file_bytes, authorized=True
            )
        base = self.config.base_url  # a private cloud's (or the tests') file host
        under_base = bool(base) and attachment.file_id.startswith(str(base).rstrip("/") + "/")
        teams_file = url.scheme == "https" and (url.hostname or "").endswith(FILE_HOSTS)
        if not (under_base or teams_file):
            raise SendError(f"teams {self.account}: a file URL that is not Teams' own")
        return await self.connector.download(
            attachment.file_id, self.max_file_bytes, authorized=False
        )

    # -- out ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return teams_chunks(markdown)

    def _service_url(self, to: Address) -> tuple[str, str]:
        conversation = conversation_of(to.chat)
        service_url = self.urls.get(conversation)
        if not service_url:
            raise Undeliverable(
                f"teams {self.account}: {conversation} never wrote to the bot, so Teams "
                "gave no address to answer it at"
            )
        return service_url, conversation

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        service_url, conversation = self._service_url(to)
        activity: dict[str, Any] = {
            "type": "message",
            "text": chunk,
            "textFormat": "markdown",
            "conversation": {"id": conversation},
        }
        if buttons:
            activity["attachments"] = [card_of(buttons)]
        sent = await self.connector.send(service_url, conversation, activity)
        if buttons:  # its text, to show it again without the buttons once answered
            self._with_buttons[sent] = chunk
            while len(self._with_buttons) > 256:
                self._with_buttons.popitem(last=False)
        return sent

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        """Replace an answered card's message by its text alone (known for the messages
        this run sent; an older one keeps its buttons, and a late press is told so)."""
        text = self._with_buttons.pop(message_id, None)
        if text is None:
            return
        service_url, conversation = self._service_url(to)
        activity = {
            "type": "message",
            "id": message_id,
            "text": text,
            "textFormat": "markdown",
            "conversation": {"id": conversation},
        }
        await self.connector.update(service_url, conversation, message_id, activity)

    async def typing(self, to: Address) -> None:
        service_url, conversation = self._service_url(to)
        activity = {"type": "typing", "conversation": {"id": conversation}}
        await self.connector.send(service_url, conversation, activity)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        service_url, conversation = self._service_url(to)
        data = path.read_bytes()
        name = name or path.name
        if len(data) > self.max_file_bytes:
            raise Unsupported(f"{name} is over the {self.max_file_bytes // 2**20} MB file limit")
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        activity: dict[str, Any] = {"type": "message", "conversation": {"id": conversation}}
        if personal(conversation):  # the person accepts it into their OneDrive first
            token = self.media.put(data, media_type)
            self._offered[token] = name
            activity["attachments"] = [consent_card(name, len(data), token, caption)]
        elif media_type.startswith("image/"):  # Teams shows an image from its URL
            url = self.media_url(data, media_type)
            activity["attachments"] = [{"contentType": media_type, "contentUrl": url, "name": name}]
            if caption:
                activity["text"], activity["textFormat"] = caption, "plain"
        else:
            raise Unsupported("in Teams a bot sends files other than images to personal chats only")
        return await self.connector.send(service_url, conversation, activity)

    async def _consent(self, activity: dict[str, Any]) -> WebhookReply:
        """The person's answer to a file consent card: on Allow, upload and show the file."""
        value = _dict(activity.get("value"))
        token = str(_dict(value.get("context")).get("habakkuk", ""))
        conversation = str(_dict(activity.get("conversation")).get("id", ""))
        if token in self._answered:  # the Connector retried an answer already taken
            return WebhookReply(200)
        self._answered.add(token)
        found = self.media.get(token)
        name = self._offered.pop(token, "")
        if value.get("action") != "accept":
            return WebhookReply(200)
        service_url = str(activity.get("serviceUrl", ""))
        if found is None or not name:
            note = {"type": "message", "text": t("chat.teams.file_gone")}
            await self.connector.send(service_url, conversation, note)
            return WebhookReply(200)
        info = _dict(value.get("uploadInfo"))
        url = str(info.get("uploadUrl", ""))
        if not upload_allowed(url, self.config.base_url):
            log.warning("teams %s: an upload URL that is not OneDrive's", self.account)
            return WebhookReply(400, b"bad upload URL")
        await upload(self._session(), url, found[0])
        card = {"type": "message", "attachments": [file_card(info)]}
        await self.connector.send(service_url, conversation, card)
        return WebhookReply(200)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _activity(body: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return found if isinstance(found, dict) else None


def _text(activity: dict[str, Any], recipient: str) -> tuple[str, bool]:
    """The message's text without the bot's @mention, and whether the bot was mentioned."""
    text = str(activity.get("text") or "")
    mentioned = False
    for entity in activity.get("entities") or []:
        entity = _dict(entity)
        if entity.get("type") != "mention":
            continue
        if str(_dict(entity.get("mentioned")).get("id", "")) == recipient and recipient:
            mentioned = True
            text = text.replace(str(entity.get("text", "")), "")
    return html.unescape(_TAG.sub("", text)).strip(), mentioned


def _attachments(activity: dict[str, Any]) -> list[Attachment]:
    found: list[Attachment] = []
    for item in activity.get("attachments") or []:
        item = _dict(item)
        kind = str(item.get("contentType", ""))
        name = str(item.get("name") or "")
        if kind == FILE_INFO:
            url = str(_dict(item.get("content")).get("downloadUrl", ""))
            media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        elif kind.startswith(("image/", "audio/", "video/")) and item.get("contentUrl"):
            url, media_type = str(item["contentUrl"]), kind
            name = name or "image" + (mimetypes.guess_extension(kind) or "")
        else:
            continue  # the text/html copy of the message, cards
        if url:
            category = _KINDS.get(media_type.partition("/")[0], "document")
            found.append(Attachment(category, url, name or "file", media_type))  # type: ignore[arg-type]  # _KINDS holds Attachment kinds only
    return found


def build(config: ChannelConfig, context: AdapterContext) -> TeamsAdapter:
    """The adapter of one Teams bot (habakkuk.channels.platforms)."""
    if not config.app_id:
        raise FatalAdapterError(f"channels.{config.name}: a teams channel needs app_id")
    password = context.secret(config, "password_env")
    return TeamsAdapter(config, context.door, password, context.state_path(config))


SETUP = TEAMS_SETUP
