"""Discord: the Gateway websocket in (discord_gateway.py), the REST API out (discord_rest.py).

Written on aiohttp directly, not discord.py: that library keeps the session id and
sequence number (what resuming and exactly-once hinge on) inside its client and pulls in
a large dependency for one websocket and a handful of REST calls.

- The gateway state (session id, last sequence number, resume URL) is saved in the
  channel store once the events up to it were handed to the gateway (at the end of a
  burst, and every 50 events within one), so a restart resumes the session and Discord
  replays what was missed; anything replayed twice is dropped by the gateway's seen keys
  (a message's key is its channel and snowflake id). Events of different channels are
  handed over concurrently, each channel's in order (lanes.py).
- Direct messages are always addressed; in a server, a message is addressed by a mention
  of the bot (`<@id>`) or a reply to one of its messages.
- Threads: in Discord a thread is a channel of its own, with its own id, and a message
  in it names only that id (not its parent). So a thread's conversation is the chat
  `<thread id>`: its own conversation with no lookup of the parent on the way in, and
  every reply, edit, typing and reaction goes to that id as Discord wants. (An address
  written `account:<channel>:<thread>` is sent to the thread too.)
- An address whose chat is a user id (`habakkuk send --to dc:<user id>`) is sent to that
  user's DM channel, opened on Discord's Unknown Channel answer (discord_dm.py).
- Every message goes out with `allowed_mentions: {"parse": []}`: whatever names the text
  holds (@everyone, a role, a user), nobody is pinged. Replies quote with
  `message_reference`; approvals carry buttons (components) whose custom_id is our
  callback data; a press (INTERACTION_CREATE) is answered with a deferred update or an
  ephemeral notice.
- Idempotency: a delivery's message carries a nonce derived from its job and chunk
  index with `enforce_nonce`, so a send retried after a crash returns the message
  Discord already made instead of a second one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import mimetypes
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Adapter,
    Address,
    Attachment,
    Beat,
    Button,
    Callback,
    Capability,
    InboundMessage,
    Inbox,
    SendError,
    Unsupported,
)
from .deliveries import SENDING
from .discord_dm import DirectChannels
from .discord_format import discord_chunks
from .discord_gateway import Dispatch, GatewayClient, GatewayState
from .discord_rest import DEFAULT_BASE_URL, USER_AGENT, DiscordBadRequest, DiscordRest
from .discord_types import (
    IS_VOICE_MESSAGE,
    MESSAGE_COMPONENT,
    USER_MESSAGE_TYPES,
    DiscordInteraction,
    DiscordMessage,
    DiscordUser,
)
from .http_download import read_capped
from .platforms import AdapterContext, PlatformSetup, SetupCheckFailed, SetupField
from .store import ChannelStore

log = logging.getLogger(__name__)
T = TypeVar("T")

# A bot's upload limit without server boosts.
FILE_LIMIT = 10 * 1024 * 1024
NO_PINGS: dict[str, list[str]] = {"parse": []}
SUPPRESS_NOTIFICATIONS = 1 << 12
EPHEMERAL = 1 << 6
# Interaction callback types: a message only the presser sees, or a silent acknowledgement.
CHANNEL_MESSAGE, DEFERRED_UPDATE = 4, 6
# Button styles by what the label says: success, danger, else secondary.
_STYLES = {"✅": 3, "❌": 4}
POLL_ANSWERS = 10


class DiscordAdapter(Adapter):
    """One Discord bot."""

    type = "discord"
    keyed_sends = True  # every send carries a nonce derived from the delivery (_nonce)
    capabilities: frozenset[Capability] = frozenset(
        {"edit", "typing", "buttons", "reactions", "files", "polls", "download"}
    )

    def __init__(self, config: ChannelConfig, token: str, store: ChannelStore):
        super().__init__(config.name)
        self.config = config
        self._token = token
        self.store = store
        self.rest = DiscordRest(token, config.base_url)
        # an address naming a user is sent to their DM channel (discord_dm.py)
        self.direct = DirectChannels(self.rest)
        self.bot = DiscordUser("")
        # Discord asks for 1-5 s before identifying after op 9 (tests shorten it)
        self.invalid_session_delay = (1.0, 5.0)
        self.gateway: GatewayClient | None = None
        # a press is answered with its interaction's token (valid 15 minutes)
        self._interactions: OrderedDict[str, str] = OrderedDict()
        # the reaction we last put on each message, so the next one replaces it
        self._reactions: OrderedDict[tuple[str, str], str] = OrderedDict()

    async def close(self) -> None:
        await self.rest.close()

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        self.bot = DiscordUser.parse(await self.rest.request("GET", "/users/@me"))
        beat()
        info = await self.rest.request("GET", "/gateway/bot")
        state = GatewayState.loads(await self.store.offset(self.account))
        limit = info.get("session_start_limit") or {}
        if not state.resumable and limit.get("remaining") == 0:
            seconds = float(limit.get("reset_after", 0)) / 1000
            raise SendError(f"Discord allows no new gateway session for {seconds:.0f}s")

        async def save(state: GatewayState) -> None:
            await self.store.save_offset(self.account, state.dumps())

        async def on_dispatch(event: Dispatch) -> None:
            message = self.convert(event)
            if message is not None:
                await inbox(message)

        self.gateway = GatewayClient(
            self._token,
            self.rest.session,
            state,
            save,
            invalid_session_delay=self.invalid_session_delay,
        )
        await self.gateway.run(str(info["url"]), on_dispatch, beat)

    def convert(self, event: Dispatch) -> InboundMessage | None:
        """A gateway event as an InboundMessage (None for events we do not handle)."""
        if event.type == "READY":
            user = DiscordUser.parse(event.data.get("user"))
            self.bot = user if user.id else self.bot
            return None
        if event.type == "INTERACTION_CREATE":
            return self._press(DiscordInteraction.parse(event.data))
        if event.type != "MESSAGE_CREATE":
            return None
        message = DiscordMessage.parse(event.data)
        author = message.author
        if (
            not message.id
            or not author.id
            or author.id == self.bot.id
            or author.bot
            or message.webhook_id
            or message.type not in USER_MESSAGE_TYPES
        ):
            return None
        is_group = bool(message.guild_id)
        return InboundMessage(
            channel=self.account,
            chat=message.channel_id,
            message_id=message.id,
            sender=author.id,
            sender_aliases=[f"@{author.username}"] if author.username else [],
            sender_name=author.display,
            text=self._strip_mention(message.content),
            is_group=is_group,
            addressed=not is_group or self._addressed(message),
            attachments=_attachments(message),
            at=message.timestamp,
        )

    def _press(self, interaction: DiscordInteraction) -> InboundMessage | None:
        if interaction.type != MESSAGE_COMPONENT or not interaction.id:
            return None  # slash commands and the like: we register none
        self._interactions[interaction.id] = interaction.token
        while len(self._interactions) > 500:
            self._interactions.popitem(last=False)
        user = interaction.user
        return InboundMessage(
            channel=self.account,
            chat=interaction.channel_id,
            message_id=interaction.message_id,
            sender=user.id,
            sender_aliases=[f"@{user.username}"] if user.username else [],
            sender_name=user.display,
            is_group=bool(interaction.guild_id),
            callback=Callback(interaction.id, interaction.custom_id, interaction.message_id),
        )

    def _mention(self) -> re.Pattern[str] | None:
        return re.compile(rf"<@!?{re.escape(self.bot.id)}>") if self.bot.id else None

    def _addressed(self, message: DiscordMessage) -> bool:
        """In a server: a mention of the bot, or a reply to one of its messages."""
        mention = self._mention()
        if self.bot.id in message.mentions or (mention and mention.search(message.content)):
            return True
        return bool(self.bot.id) and message.replied_author == self.bot.id

    def _strip_mention(self, text: str) -> str:
        mention = self._mention()
        return mention.sub("", text).strip() if mention else text.strip()

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return discord_chunks(markdown)

    def _channel(self, to: Address) -> str:
        return to.thread or self.direct.channel(to.chat)

    async def _at(self, to: Address, call: Callable[[str], Awaitable[T]]) -> T:
        """`call(channel)` for `to`; a chat that names a user goes to their DM channel."""
        if to.thread:
            return await call(to.thread)
        return await self.direct.at(to.chat, call)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        body: dict[str, Any] = {"content": chunk, "allowed_mentions": NO_PINGS}
        if reply_to:
            # no channel_id: optional for a reply in the same channel, which may yet turn
            # out to be the user's DM channel rather than the id the address names
            body["message_reference"] = {"message_id": reply_to, "fail_if_not_exists": False}
        if buttons:
            body["components"] = _components(buttons)
        if silent:
            body["flags"] = SUPPRESS_NOTIFICATIONS
        body |= _nonce("text")
        result = await self._at(
            to,
            lambda channel: self.rest.request(
                "POST", f"/channels/{channel}/messages", json_body=body
            ),
        )
        return str(result["id"])

    async def edit_text(
        self, to: Address, message_id: str, chunk: str, buttons: list[list[Button]] | None = None
    ) -> None:
        body: dict[str, Any] = {"content": chunk, "allowed_mentions": NO_PINGS}
        if buttons:
            body["components"] = _components(buttons)
        await self._at(
            to,
            lambda channel: self.rest.request(
                "PATCH", f"/channels/{channel}/messages/{message_id}", json_body=body
            ),
        )

    async def delete(self, to: Address, message_id: str) -> None:
        await self._at(
            to,
            lambda channel: self.rest.request(
                "DELETE", f"/channels/{channel}/messages/{message_id}"
            ),
        )

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        with contextlib.suppress(DiscordBadRequest):  # already without buttons
            await self._at(
                to,
                lambda channel: self.rest.request(
                    "PATCH",
                    f"/channels/{channel}/messages/{message_id}",
                    json_body={"components": []},
                ),
            )

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        token = self._interactions.pop(callback.id, None)
        if token is None:
            return  # pressed before a restart: its token is gone, the press was handled
        if text:
            body: dict[str, Any] = {
                "type": CHANNEL_MESSAGE,
                "data": {"content": text, "flags": EPHEMERAL, "allowed_mentions": NO_PINGS},
            }
        else:
            body = {"type": DEFERRED_UPDATE}
        with contextlib.suppress(DiscordBadRequest):  # expired: the press was still handled
            await self.rest.request(
                "POST", f"/interactions/{callback.id}/{token}/callback", json_body=body, auth=False
            )

    async def typing(self, to: Address) -> None:
        await self._at(to, lambda channel: self.rest.request("POST", f"/channels/{channel}/typing"))

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:
        path = f"/channels/{self._channel(to)}/messages/{message_id}/reactions"
        key = (self._channel(to), message_id)
        previous = self._reactions.pop(key, None)
        if previous and previous != emoji:
            with contextlib.suppress(DiscordBadRequest):
                await self.rest.request("DELETE", f"{path}/{quote(previous)}/@me")
        if emoji:
            await self._at(
                to,
                lambda channel: self.rest.request(
                    "PUT", f"/channels/{channel}/messages/{message_id}/reactions/{quote(emoji)}/@me"
                ),
            )
            self._reactions[key] = emoji
            while len(self._reactions) > 500:
                self._reactions.popitem(last=False)

    async def download(self, attachment: Attachment) -> bytes:
        # An attachment's URL is signed by Discord's CDN: no token goes with it.
        try:
            async with self.rest.session().get(
                attachment.file_id, timeout=aiohttp.ClientTimeout(total=300)
            ) as response:
                if response.status != 200:
                    raise SendError(f"download {attachment.name}: HTTP {response.status}")
                return await read_capped(response, self.max_file_bytes, attachment.name)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"download {attachment.name}: {exc}") from None

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over Discord's 10 MB upload limit")
        payload: dict[str, Any] = {
            "content": caption[:2000],
            "attachments": [{"id": 0, "filename": name}],
            "allowed_mentions": NO_PINGS,
        } | _nonce("file")
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"

        async def upload(channel: str) -> Any:
            # a form is consumed by its request: a second try (the DM channel) builds anew
            form = aiohttp.FormData()
            form.add_field("payload_json", json.dumps(payload), content_type="application/json")
            form.add_field("files[0]", data, filename=name, content_type=media_type)
            return await self.rest.request(
                "POST", f"/channels/{channel}/messages", form=form, timeout=300
            )

        try:
            result = await self._at(to, upload)
        except DiscordBadRequest as exc:  # too large, a kind refused: the chat is reachable
            raise Unsupported(str(exc)) from None
        return str(result["id"])

    async def send_poll(
        self, to: Address, question: str, options: list[str], *, multiple: bool = False
    ) -> str:
        if len(options) > POLL_ANSWERS or len(question) > 300 or any(len(o) > 55 for o in options):
            raise Unsupported("a Discord poll takes 10 answers of 55 characters at most")
        body = {
            "poll": {
                "question": {"text": question},
                "answers": [{"poll_media": {"text": option}} for option in options],
                "duration": 24,
                "allow_multiselect": multiple,
            },
            "allowed_mentions": NO_PINGS,
        } | _nonce("poll")
        try:
            result = await self._at(
                to,
                lambda channel: self.rest.request(
                    "POST", f"/channels/{channel}/messages", json_body=body
                ),
            )
        except DiscordBadRequest as exc:
            raise Unsupported(str(exc)) from None
        return str(result["id"])


def _nonce(kind: str) -> dict[str, Any]:
    """The idempotency nonce of what is being delivered (none outside a delivery): Discord
    returns the message it already made for a nonce seen in the past few minutes."""
    sending = SENDING.get()
    if sending is None:
        return {}
    digest = hashlib.sha256(f"{sending.job}\x00{kind}\x00{sending.chunk}".encode()).hexdigest()
    return {"nonce": digest[:25], "enforce_nonce": True}  # nonces are 25 characters at most


def _components(buttons: list[list[Button]]) -> list[dict[str, Any]]:
    """Action rows of buttons (5 rows of 5 at most), custom_id = our callback data."""
    return [
        {
            "type": 1,
            "components": [
                {
                    "type": 2,
                    "style": _STYLES.get(button.text[:1], 2),
                    "label": button.text[:80],
                    "custom_id": button.data[:100],
                }
                for button in row[:5]
            ],
        }
        for row in buttons[:5]
    ]


def _attachments(message: DiscordMessage) -> list[Attachment]:
    found: list[Attachment] = []
    voice = bool(message.flags & IS_VOICE_MESSAGE)
    kind: Literal["photo", "document", "voice", "video"]
    for item in message.attachments:
        media_type = (item.content_type or mimetypes.guess_type(item.filename)[0] or "").split(";")[
            0
        ]
        if voice or media_type.startswith("audio/"):
            kind = "voice"  # transcribed by the gateway
        elif media_type.startswith("image/"):
            kind = "photo"
        elif media_type.startswith("video/"):
            kind = "video"
        else:
            kind = "document"
        found.append(
            Attachment(
                kind, item.url, item.filename, media_type or "application/octet-stream", item.size
            )
        )
    return found


def build(config: ChannelConfig, context: AdapterContext) -> DiscordAdapter:
    """The adapter of one Discord bot (habakkuk.channels.platforms)."""
    return DiscordAdapter(config, context.secret(config, "token_env"), context.store)


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask Discord who the token belongs to (GET /users/@me): "@name", or SetupCheckFailed."""
    base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
    token = secrets.get(config.token_env or "", "")
    headers = {"Authorization": f"Bot {token}", "User-Agent": USER_AGENT}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as http,
            http.get(f"{base}/users/@me", headers=headers) as response,
        ):
            body = await response.json(content_type=None)
            status = response.status
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
    if status != 200 or not isinstance(body, dict) or not body.get("id"):
        why = body.get("message", f"HTTP {status}") if isinstance(body, dict) else f"HTTP {status}"
        raise SetupCheckFailed(f"Discord refused the token: {why}")
    return f"@{body.get('username', '?')}"


SETUP = PlatformSetup(
    type="discord",
    title="Discord",
    instructions=(
        "1. Open https://discord.com/developers/applications and create a New Application.\n"
        "2. Bot tab: Reset Token and copy the token: paste it below.\n"
        "3. Bot tab, Privileged Gateway Intents: turn on Message Content Intent.\n"
        "4. OAuth2 > URL Generator: scope 'bot', permissions View Channels, Send Messages, "
        "Send Messages in Threads, Read Message History, Attach Files, Add Reactions; open "
        "the URL to add the bot to your server (DMs work with anyone sharing a server).\n"
        "5. Your user id: Settings > Advanced > Developer Mode on, then right-click your "
        "name > Copy User ID."
    ),
    fields=(
        SetupField("token_env", "Bot token", secret=True, variable="DISCORD_BOT_TOKEN"),
        SetupField(
            "allow_from",
            "Your Discord user id (others pair with a code)",
            help="Developer Mode on, then right-click your name > Copy User ID",
        ),
    ),
    check=check_setup,
)
