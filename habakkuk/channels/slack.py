"""Slack through Socket Mode and the Web API, spoken with aiohttp.

- In: `apps.connections.open` with the app-level token (xapp-) gives a websocket URL;
  one connection serves every workspace the app is in, so the team id is part of each
  chat (`T…-C…`). Envelopes are acknowledged once handed to the gateway
  (habakkuk/channels/slack_socket.py); Slack's `disconnect` rotations reconnect at once.
- Conversations: a DM is always addressed; in channels a message needs a mention of the
  bot (or is in a thread the bot started); a thread (`thread_ts`) is its own
  conversation and every reply to it goes into the thread.
- Out: Markdown as mrkdwn (habakkuk/channels/slack_format.py) in chunks under 3000
  characters; approvals as Block Kit buttons whose value is the gateway's `fy|...`
  data; edits with chat.update, files through files.getUploadURLExternal, the upload
  and files.completeUploadExternal. Slack shows no typing for Socket Mode apps, so
  the adapter has no "typing"; with `reactions: true` a 👀 reaction shows the work.
- Exactly once: each chunk a delivery posts carries the delivery and chunk as message
  metadata, and a chunk a crash may have posted (its send started, no record) is looked
  for with conversations.history/replies before it is posted again
  (habakkuk/channels/slack_sent.py). Files have no metadata: a crash between Slack's
  answer to files.completeUploadExternal and its record shares the file again.
- Errors: habakkuk/channels/slack_api.py maps Slack's codes (429 with Retry-After,
  a refused token fatal, a gone chat undeliverable).

Why not slack_sdk: its Socket Mode client starts tasks and an HTTP session in its
constructor, runs each envelope's listener as a separate unordered task, and reconnects
in background tasks forever, logging a refused token instead of raising it; the
supervisor here needs `run` to end when the connection does, a bad token to be fatal
and envelopes handed over in order before they are acknowledged. The wire itself is a
POST and a websocket of JSON frames, which aiohttp (already a dependency) speaks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

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
    FatalAdapterError,
    InboundMessage,
    Inbox,
    SendError,
    Undeliverable,
    Unsupported,
)
from .deliveries import SENDING
from .http_download import read_capped
from .platforms import AdapterContext
from .slack_api import DEFAULT_BASE_URL, Identity, SlackRefused, WebApi
from .slack_events import (
    PERSON_SUBTYPES,
    Payload,
    SlackAction,
    SlackCommand,
    SlackFile,
    SlackMessage,
)
from .slack_format import blocks_of, mrkdwn_chunks, plain_text, reply_mention, section
from .slack_sent import delivery_metadata, posted_chunk
from .slack_setup import SLACK_SETUP
from .slack_socket import ConnectionLost, SocketSession

log = logging.getLogger(__name__)

AttachmentKind = Literal["photo", "document", "voice", "audio", "video"]

FILE_LIMIT = 1024 * 1024 * 1024  # Slack's upload limit: 1 GB
# The gateway's reactions by Slack's names for them.
EMOJI_NAMES = {"👀": "eyes", "👍": "+1", "😢": "cry"}
_KINDS: dict[str, AttachmentKind] = {"image": "photo", "audio": "voice", "video": "video"}
REMEMBERED = 2000  # message authors and button texts kept for replies and stripping
QUICK_RECONNECTS = 5  # immediate reconnects after a drop allowed per minute


class _Recent(OrderedDict[str, str]):
    """A bounded map of what was seen lately (the oldest forgotten first)."""

    def remember(self, key: str, value: str) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > REMEMBERED:
            self.popitem(last=False)


class SlackAdapter(Adapter):
    """One Slack app (every workspace it is installed in, one Socket Mode connection)."""

    type = "slack"
    capabilities: frozenset[Capability] = frozenset(
        {"edit", "buttons", "reactions", "files", "download"}
    )
    max_file_bytes = 25 * 1024 * 1024

    def __init__(self, config: ChannelConfig, app_token: str, bot_token: str):
        super().__init__(config.name)
        self.config = config
        self.app_token = app_token
        self.bot_token = bot_token
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.me = Identity("", "", "", "", "")
        self.ping_every = max(1.0, min(10.0, config.silent_limit_seconds / 4))
        self._http: aiohttp.ClientSession | None = None
        self._closed = False
        self._authors = _Recent()  # message ts -> its sender (the reply mention)
        self._texts = _Recent()  # our message ts -> its text (buttons stripped)
        self._responses = _Recent()  # callback id -> response_url
        self._reactions = _Recent()  # channel/ts -> the reaction we set

    # -- HTTP -----------------------------------------------------------------------

    def _session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise SendError(f"slack {self.account}: the adapter is closed")
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=15, sock_read=None)
            )
        return self._http

    @property
    def api(self) -> WebApi:
        """The Web API with the bot token."""
        return WebApi(self.base_url, self.bot_token, self._session())

    async def close(self) -> None:
        """Close the HTTP session for good (idempotent; later calls raise SendError)."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    def _trusted(self, url: str) -> bool:
        """Whether the bot token may go to `url`: Slack's hosts or the configured API's."""
        host = (urlsplit(url).hostname or "").lower()
        return bool(host) and (
            host == "slack.com"
            or host.endswith(".slack.com")
            or host == (urlsplit(self.base_url).hostname or "").lower()
        )

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        self.me = await self.api.identity()
        beat()
        quick: collections.deque[float] = collections.deque(maxlen=QUICK_RECONNECTS)
        loop = asyncio.get_running_loop()

        async def handle(payload: Payload) -> None:
            try:
                message = self.convert(payload)
            except Exception as exc:  # one malformed payload must not stop every chat
                log.warning("slack %s: dropped a payload: %s", self.account, type(exc).__name__)
                return
            if message is not None:
                await inbox(message)

        while True:
            url = await self._socket_url()
            session: SocketSession | None = None
            try:
                async with self._session().ws_connect(
                    url, autoping=False, heartbeat=None, max_msg_size=16 * 1024 * 1024
                ) as ws:
                    session = SocketSession(ws, handle, beat, ping_every=self.ping_every)
                    reason = await session.run()
                log.info("slack %s: Slack rotates the connection (%s)", self.account, reason)
            except ConnectionLost:
                # A socket that worked and dropped is reopened at once (Slack drops them
                # now and then); one that never said hello, or drops again and again,
                # goes back to the supervisor's backoff.
                now = loop.time()
                if (
                    session is None
                    or not session.hello
                    or (len(quick) == QUICK_RECONNECTS and now - quick[0] < 60)
                ):
                    raise
                quick.append(now)
                log.info("slack %s: the socket dropped; reconnecting", self.account)
            except aiohttp.ClientError as exc:
                raise SendError(f"Socket Mode connection: {type(exc).__name__}: {exc}") from None

    async def _socket_url(self) -> str:
        app = WebApi(self.base_url, self.app_token, self._session())
        try:
            opened = await app.call("apps.connections.open", form=True)
        except SlackRefused as exc:  # no connections:write scope on the app token
            raise FatalAdapterError(str(exc)) from None
        url = str(opened.get("url", ""))
        if not url.startswith(("wss://", "ws://")):
            raise SendError("apps.connections.open: no websocket URL in the answer")
        return url

    def convert(self, payload: Payload) -> InboundMessage | None:
        """A Socket Mode payload as an InboundMessage (None for what we do not answer)."""
        if isinstance(payload, SlackMessage):
            return self._message(payload)
        if isinstance(payload, SlackAction):
            return self._action(payload)
        return self._command(payload)

    def _chat(self, team: str, channel: str) -> str:
        return f"{team or self.me.team_id}-{channel}"

    def _message(self, event: SlackMessage) -> InboundMessage | None:
        if event.subtype not in PERSON_SUBTYPES or event.bot_id or not event.user:
            return None  # edits, deletions, joins, and every bot's messages (ours too)
        if event.user == self.me.user_id or not event.channel or not event.ts:
            return None
        is_group = event.channel_type != "im"
        mentioned = bool(
            self.me.user_id and re.search(rf"<@{re.escape(self.me.user_id)}(\|[^>]*)?>", event.text)
        )
        thread = event.thread_ts if event.thread_ts and event.thread_ts != event.ts else ""
        in_our_thread = bool(thread) and event.parent_user_id == self.me.user_id
        self._authors.remember(event.ts, event.user)
        return InboundMessage(
            channel=self.account,
            chat=self._chat(event.team, event.channel),
            message_id=event.ts,
            sender=event.user,
            sender_name=event.user_name,
            text=plain_text(event.text, strip_user=self.me.user_id),
            thread=thread,
            is_group=is_group,
            addressed=not is_group or event.kind == "app_mention" or mentioned or in_our_thread,
            attachments=[_attachment(f) for f in event.files if f.url],
            at=_seconds(event.ts),
        )

    def _action(self, action: SlackAction) -> InboundMessage | None:
        if not action.trigger_id or not action.channel:
            return None
        self._responses.remember(action.trigger_id, action.response_url)
        return InboundMessage(
            channel=self.account,
            chat=self._chat(action.team, action.channel),
            message_id=action.message_ts,
            sender=action.user,
            sender_name=action.user_name,
            thread=action.thread_ts,
            is_group=not action.channel.startswith("D"),
            callback=Callback(action.trigger_id, action.value, action.message_ts),
        )

    def _command(self, command: SlackCommand) -> InboundMessage | None:
        if not command.trigger_id or not command.channel:
            return None
        words = command.text.strip()
        if command.command == "/habakkuk":  # `/habakkuk new` is the chat command /new
            text = words if words.startswith("/") else f"/{words or 'help'}"
        else:
            text = f"{command.command} {words}".strip()
        return InboundMessage(
            channel=self.account,
            chat=self._chat(command.team, command.channel),
            message_id=f"cmd.{command.trigger_id}",
            sender=command.user,
            sender_name=command.user_name,
            text=text,
            is_group=not command.channel.startswith("D"),
        )

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return mrkdwn_chunks(markdown)

    def _target(self, to: Address) -> dict[str, Any]:
        channel = to.chat.rsplit("-", 1)[-1]
        params: dict[str, Any] = {"channel": channel}
        if to.thread:
            params["thread_ts"] = to.thread
        return params

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        params = self._target(to)
        if reply_to and not params["channel"].startswith("D"):
            # In a shared channel the answer names whom it answers (a DM has one person).
            chunk = reply_mention(self._authors.get(reply_to, "")) + chunk
        target = dict(params)
        params |= {"text": chunk, "unfurl_links": False, "unfurl_media": False}
        if buttons:
            params["blocks"] = blocks_of(chunk, buttons)
        sending = SENDING.get()
        ts = ""
        if sending is not None:
            # The chunk's key goes with it; a crash after an earlier send of it started
            # may have posted it already: looked for first (habakkuk/channels/slack_sent.py).
            params["metadata"] = delivery_metadata(sending.job, sending.chunk)
            if sending.attempted:
                ts = await posted_chunk(
                    self.api, target, sending.job, sending.chunk, since=sending.attempted
                )
        if not ts:
            result = await self.api.call("chat.postMessage", params)
            ts = str(result.get("ts", ""))
        if buttons:
            self._texts.remember(ts, chunk)
        return ts

    async def edit_text(
        self, to: Address, message_id: str, chunk: str, buttons: list[list[Button]] | None = None
    ) -> None:
        params = {"channel": self._target(to)["channel"], "ts": message_id, "text": chunk}
        params["blocks"] = blocks_of(chunk, buttons) if buttons else []
        await self.api.call("chat.update", params)

    async def delete(self, to: Address, message_id: str) -> None:
        channel = self._target(to)["channel"]
        await self.api.call("chat.delete", {"channel": channel, "ts": message_id})

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        text = self._texts.get(message_id) or await self._text_of(to, message_id)
        if not text:
            return
        with contextlib.suppress(Undeliverable):  # deleted meanwhile: nothing to strip
            await self.api.call(
                "chat.update",
                {
                    "channel": self._target(to)["channel"],
                    "ts": message_id,
                    "text": text,
                    "blocks": [section(text)],
                },
            )
        self._texts.pop(message_id, None)

    async def _text_of(self, to: Address, ts: str) -> str:
        """A message's text read back from Slack (a prompt sent before a restart)."""
        params = self._target(to) | {"latest": ts, "oldest": ts, "inclusive": True, "limit": 1}
        method = "conversations.replies" if to.thread else "conversations.history"
        if to.thread:
            params["ts"] = params.pop("thread_ts")
        try:
            found = await self.api.call(method, params)
        except Undeliverable:
            return ""
        for message in found.get("messages") or []:
            if isinstance(message, dict) and message.get("ts") == ts:
                return str(message.get("text", ""))
        return ""

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        """Tell the presser `text`, visible to them only (the press's response_url)."""
        url = self._responses.pop(callback.id, "")
        if not text or not url or not self._trusted(url):
            return
        body = {"text": text, "response_type": "ephemeral", "replace_original": False}
        try:
            async with self._session().post(
                url, json=body, timeout=aiohttp.ClientTimeout(total=15)
            ) as response:
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"response_url: {type(exc).__name__}") from None

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:
        """Set our one reaction on a message (replacing the last one), or clear it."""
        channel = self._target(to)["channel"]
        key = f"{channel}/{message_id}"
        previous = self._reactions.pop(key, None)
        target = {"channel": channel, "timestamp": message_id}
        if previous:
            with contextlib.suppress(SlackRefused):  # removed by hand meanwhile
                await self.api.call("reactions.remove", target | {"name": previous})
        name = EMOJI_NAMES.get(emoji or "")
        if name:
            with contextlib.suppress(SlackRefused):  # already there
                await self.api.call("reactions.add", target | {"name": name})
            self._reactions.remember(key, name)

    async def download(self, attachment: Attachment) -> bytes:
        url = attachment.file_id
        if not self._trusted(url):
            raise Undeliverable(f"{attachment.name}: not a Slack file URL")
        headers = {"Authorization": f"Bearer {self.bot_token}"}
        try:
            async with self._session().get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=300)
            ) as response:
                if response.status != 200:
                    raise SendError(f"download {attachment.name}: HTTP {response.status}")
                if response.content_type == "text/html":
                    # Slack answers a request it does not authorize with its sign-in page.
                    raise Undeliverable(
                        f"download {attachment.name}: Slack refused (the app needs files:read)"
                    )
                return await read_capped(response, self.max_file_bytes, attachment.name)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"download {attachment.name}: {type(exc).__name__}") from None

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over Slack's 1 GB limit")
        try:
            slot = await self.api.call(
                "files.getUploadURLExternal", {"filename": name, "length": len(data)}, form=True
            )
            upload_url = str(slot.get("upload_url", ""))
            if not self._trusted(upload_url):
                raise SendError("files.getUploadURLExternal: no Slack upload URL")
            await self._upload(upload_url, data, name)
            target = self._target(to)
            params: dict[str, Any] = {
                "files": [{"id": str(slot.get("file_id", "")), "title": name}],
                "channel_id": target["channel"],
            }
            if "thread_ts" in target:
                params["thread_ts"] = target["thread_ts"]
            if caption.strip():
                params["initial_comment"] = mrkdwn_chunks(caption)[0]
            done = await self.api.call(
                "files.completeUploadExternal", params, form=True, timeout=300
            )
        except SlackRefused as exc:  # this file refused; the chat itself is reachable
            raise Unsupported(str(exc)) from None
        files = done.get("files") or [{}]
        return str(files[0].get("id", "")) if isinstance(files[0], dict) else ""

    async def _upload(self, url: str, data: bytes, name: str) -> None:
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name)
        try:
            async with self._session().post(
                url, data=form, timeout=aiohttp.ClientTimeout(total=300)
            ) as response:
                if response.status != 200:
                    raise SendError(f"file upload: HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"file upload: {type(exc).__name__}") from None


def _seconds(ts: str) -> float:
    """A message ts ("1712345678.000100") as epoch seconds; now when it is not one."""
    try:
        return float(ts)
    except ValueError:
        return time.time()


def _attachment(item: SlackFile) -> Attachment:
    kind = _KINDS.get(item.mimetype.split("/", 1)[0], "document")
    # Slack's voice clips are audio/webm or audio/mp4 files (subtype slack_audio); a
    # video clip recorded in Slack says video/* and is not transcribed.
    return Attachment(kind, item.url, item.name, item.mimetype, item.size)


def build(config: ChannelConfig, context: AdapterContext) -> SlackAdapter:
    """The adapter of one Slack app (habakkuk.channels.platforms)."""
    return SlackAdapter(
        config, context.secret(config, "app_token_env"), context.secret(config, "bot_token_env")
    )


SETUP = SLACK_SETUP
