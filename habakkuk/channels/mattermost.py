"""Mattermost: the WebSocket API in, REST API v4 out, with a bot account's access token.

- Who: `GET /api/v4/users/me` (the bot's id and username); a sender's username is asked
  once per user (`GET /api/v4/users/<id>`) and kept for the run.
- In: `wss://<server>/api/v4/websocket`, then the `authentication_challenge` action with
  the token (answered `status: OK`); `posted` events carry the post as a JSON string
  (`data.post`), its channel's type (`data.channel_type`) and whom it mentions. Every 30
  seconds a `ping` action, whose answer beats (the server's own pings are WebSocket
  control frames aiohttp answers unseen). mattermost_wire.py reads the posts.
- Catching up: the newest post handed on of each channel seen is kept in
  `channels/mattermost-<account>.json` (0600, replaced atomically, written after the
  gateway took the post). After each authentication the posts of those channels since
  then (`GET /api/v4/channels/<id>/posts?since=<ms>`) are handed on first, oldest first,
  so a dropped socket or a restart loses nothing; a post seen twice is the gateway's to
  drop. Then `GET /api/v4/users/me/channels` (every channel the bot is in, direct
  messages too) finds channels first opened while we were away: one we never saw whose
  `last_post_at` is past the horizon (the newest post of the bot's channels at the last
  connect) is read from the horizon on.
- Out: `POST /api/v4/posts` (Mattermost renders Markdown) with `root_id` in a thread, in
  chunks under its 16,383-character limit; a file goes up with `POST /api/v4/files`
  (multipart, `channel_id`) and is posted by its id (`file_ids`); a file in a message is
  fetched with `GET /api/v4/files/<id>`.
- Buttons (mattermost_buttons.py): a prompt's post carries interactive message buttons
  whose press the Mattermost server POSTs to `/channels/<account>/<secret>` on our HTTP
  server; the press is checked (the secret, the button's signed context, a prompt not
  already answered by a button) and handed to the gateway as a callback, which checks who
  pressed. Answered, the post's buttons are removed (`PUT /api/v4/posts/<id>/patch`).
  Only while our HTTP server serves in this process at an address the Mattermost server
  can reach (`http.public_url`, else its own when Mattermost is on this machine too);
  else approvals are typed.

Each post a delivery makes carries a key derived from the delivery job and its part, as
its `pending_post_id` and in its props (`habakkuk_delivery`). The server drops a second
create with the same `pending_post_id` for 30 seconds (answering the post the first
made), so a send retried after the server took it but its answer was lost posts once.
After a crash between the server storing a part and its id being recorded, the resumed
part (deliveries.Sending.attempted) is first looked for among the channel's posts since
the attempt (less a margin for the clocks) by that prop: found, it is not posted again.

No SDK: mattermostdriver is a blocking requests client (its WebSocket a websockets loop of
its own); the API is JSON over aiohttp here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import mimetypes
import re
from pathlib import Path
from typing import Any

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.timeouts import wait_within

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
from .chunking import Renderer, chunks
from .deliveries import SENDING
from .http_download import download_capped
from .mattermost_buttons import attachments, reachable, read_press
from .mattermost_setup import SETUP as SETUP  # the registry reads a platform's step here
from .mattermost_setup import headers_for
from .mattermost_wire import DIRECT, Bot, MattermostState, convert
from .platforms import AdapterContext
from .rest_answer import check_answer
from .webhook import REFUSED, WebhookDoor, WebhookReply, WebhookRequest

log = logging.getLogger(__name__)

CHUNK = 4000  # a screenful; the server's limit (MaxPostSize) is 16,383 characters
FILE_LIMIT = 100 * 1024 * 1024  # MaxFileSize's default; a server's 413 says less
DELIVERY_PROP = "habakkuk_delivery"  # the post's prop naming the delivery part it is
# The server stamps a post with its own clock, an attempt is noted with ours.
CLOCK_MARGIN_MS = 300_000
_RENDERER = Renderer(
    text=lambda lines: "\n".join(lines),
    code=lambda lines, language: "\n".join([f"```{language}", *lines, "```"]),
    escape=lambda text: text,
    fallback=lambda markdown, limit: markdown[:limit],
)


class MattermostAdapter(Adapter):
    """One Mattermost bot account."""

    type = "mattermost"
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = FILE_LIMIT
    ping_every = 30.0  # seconds between our `ping` actions
    url_secret = True  # button presses come to /channels/<account>/<secret>

    def __init__(
        self,
        config: ChannelConfig,
        token: str,
        state: MattermostState,
        door: WebhookDoor | None = None,
    ):
        super().__init__(config.name)
        self.base_url = (config.base_url or "").rstrip("/")
        self.token = token
        self.state = state
        self.door = door or WebhookDoor()
        self.bot = Bot(config.name, "", "")
        self.refused = 0  # button presses refused by the check (forged, replayed)
        self._usernames: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None
        self._seq = 0
        self._inbox: Inbox | None = None
        self._notices: dict[str, str] = {}  # a press being answered: its notice
        self._pressing: dict[str, str] = {}  # a press being answered: post id -> nonce

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=headers_for(self.token))
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- receiving -----------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        me = await self._rest("GET", "users/me")
        self.bot = Bot(self.account, str(me.get("id") or ""), str(me.get("username") or ""))
        url = re.sub(r"^http", "ws", self.base_url) + "/api/v4/websocket"
        try:
            async with self.session().ws_connect(url, heartbeat=None, max_msg_size=0) as ws:
                challenge = self._next_seq()
                await ws.send_json(
                    {"seq": challenge, "action": "authentication_challenge",
                     "data": {"token": self.token}}
                )  # fmt: skip
                await self._authenticated(ws, challenge)
                self._inbox = inbox
                await self._catch_up(inbox)
                beat()
                pinger = asyncio.create_task(self._pings(ws))
                try:
                    async for frame in ws:
                        if frame.type != aiohttp.WSMsgType.TEXT:
                            break
                        beat()
                        await self._on_frame(frame.data, inbox)
                finally:
                    self._inbox = None
                    pinger.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pinger
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"websocket: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        log.info("mattermost %s: the WebSocket ended", self.account)

    async def _authenticated(self, ws: aiohttp.ClientWebSocketResponse, seq: int) -> None:
        """Wait for the answer to the authentication challenge (events before it skipped)."""
        while True:
            frame = await wait_within(ws.receive(), 30)
            if frame.type != aiohttp.WSMsgType.TEXT:
                raise FatalAdapterError(
                    f"Mattermost at {self.base_url} closed the WebSocket at authentication "
                    "(check token_env)"
                )
            message = _json(frame.data)
            if message.get("seq_reply") != seq:
                continue
            if message.get("status") != "OK":
                error = message.get("error")
                raise FatalAdapterError(
                    f"Mattermost at {self.base_url} refused the token "
                    f"({error.get('id') if isinstance(error, dict) else error}: check token_env)"
                )
            return

    async def _pings(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            while not ws.closed:
                await asyncio.sleep(self.ping_every)
                await ws.send_json({"seq": self._next_seq(), "action": "ping"})

    async def _catch_up(self, inbox: Inbox) -> None:
        """Hand on what the channels seen got since their newest post handed on, then
        what channels first opened while we were away got (_catch_up_new)."""
        # Taken before the catch-up moves the channels' positions past posts made while
        # we were away (a new channel's posts may be older than a known channel's).
        horizon = max([self.state.horizon, *(seen.since for seen in self.state.channels.values())])
        for channel, seen in list(self.state.channels.items()):
            try:
                await self._posts_since(channel, seen.type, seen.since, inbox)
            except Undeliverable as exc:  # the bot left it, or it was deleted: forget it
                log.info("mattermost %s: not catching up on %s (%s)", self.account, channel, exc)
                del self.state.channels[channel]
                await asyncio.to_thread(self.state.save)
        await self._catch_up_new(horizon, inbox)

    async def _catch_up_new(self, horizon: int, inbox: Inbox) -> None:
        """The posts of channels we never saw that got posts past the horizon (a direct
        message opened while Habakkuk was down): read from the horizon on. The horizon is
        the newest post the bot's channels had at the last connect, or handed on since,
        so a channel unknown then and posted in after it was opened while we were away
        (had we been connected, its post would have made it known)."""
        try:
            listed = await self._call("GET", "users/me/channels")
        except Undeliverable as exc:  # a server before 6.1 has no such list
            log.info("mattermost %s: cannot list the bot's channels (%s)", self.account, exc)
            return
        newest = horizon
        for channel in listed if isinstance(listed, list) else []:
            if not isinstance(channel, dict):
                continue
            key, kind, last = channel.get("id"), channel.get("type"), channel.get("last_post_at")
            if not isinstance(key, str) or not key or not isinstance(last, int):
                continue
            newest = max(newest, last)
            if key in self.state.channels or not horizon or last <= horizon:
                continue
            log.info("mattermost %s: reading %s, opened while away", self.account, key)
            with contextlib.suppress(Undeliverable):  # gone again meanwhile
                await self._posts_since(key, str(kind or ""), horizon, inbox)
        if newest != self.state.horizon:
            self.state.horizon = newest
            await asyncio.to_thread(self.state.save)

    async def _posts_since(self, channel: str, kind: str, since: int, inbox: Inbox) -> None:
        """Hand on the posts of `channel` created after `since` (ms), oldest first."""
        answer = await self._rest("GET", f"channels/{channel}/posts?since={since}")
        posts = answer.get("posts")
        if not isinstance(posts, dict):
            return
        fresh = [
            post for post in posts.values()
            if isinstance(post, dict) and isinstance(post.get("create_at"), int)
            and post["create_at"] > since
        ]  # fmt: skip
        for post in sorted(fresh, key=lambda p: int(p["create_at"])):
            await self._take(post, kind, frozenset(), inbox)

    async def _on_frame(self, data: str, inbox: Inbox) -> None:
        message = _json(data)
        if message.get("event") != "posted":
            return
        fields = message.get("data")
        if not isinstance(fields, dict) or not isinstance(fields.get("post"), str):
            return
        post = _json(fields["post"])
        mentions = _json(fields.get("mentions") or "[]", [])
        await self._take(
            post,
            str(fields.get("channel_type") or ""),
            frozenset(str(m) for m in mentions) if isinstance(mentions, list) else frozenset(),
            inbox,
        )

    async def _take(
        self, post: dict[str, Any], kind: str, mentions: frozenset[str], inbox: Inbox
    ) -> None:
        """Hand one post on, then note it as seen (so a catch-up starts after it)."""
        user_id = str(post.get("user_id") or "")
        sender = await self._username(user_id) if user_id and user_id != self.bot.user_id else ""
        converted = convert(self.bot, post, kind, sender=sender, mentions=mentions)
        if converted is not None:
            await inbox(converted)
        channel, created = post.get("channel_id"), post.get("create_at")
        if isinstance(channel, str) and channel and isinstance(created, int):
            self.state.note(channel, kind, created)
            await asyncio.to_thread(self.state.save)

    # -- buttons ---------------------------------------------------------------------------

    def can(self, capability: Capability) -> bool:
        if capability == "buttons":
            return bool(self._actions_url())
        return super().can(capability)

    def _actions_url(self) -> str:
        """Where our buttons send their presses; "" while the Mattermost server cannot
        reach us (no HTTP server here, or one it cannot call)."""
        if not self.door.is_open or not reachable(self.door.base_url, self.base_url):
            return ""
        if self.state.keys():
            self.state.save()
        return f"{self.door.base_url}/channels/{self.account}/{self.state.secret}"

    async def receive(self, request: WebhookRequest) -> WebhookReply:
        """A button press from the Mattermost server: checked, then handed to the gateway
        as a callback; answered with the gateway's notice, shown to the presser alone."""
        inbox = self._inbox
        if inbox is None:
            return WebhookReply(503, b"restarting")
        secret = self.state.secret
        press = read_press(request.body, self.state.key) if secret else None
        if (
            request.method != "POST"
            or not secret
            or not hmac.compare_digest(request.secret.encode(), secret.encode())
            or press is None
            or press.nonce in self.state.pressed  # a press replayed after its answer
        ):
            self.refused += 1
            log.warning("mattermost %s: refused a button press that failed its check", self.account)
            return REFUSED
        try:
            sender = await self._username(press.user_id)
        except SendError:  # the server is out of reach: let the presser try again
            return WebhookReply(503, b"restarting")
        seen = self.state.channels.get(press.channel_id)
        callback = Callback(
            press.trigger_id or f"{press.post_id}:{press.user_id}:{press.data}",
            press.data,
            press.post_id,
        )
        self._pressing[press.post_id] = press.nonce
        self._notices[callback.id] = ""
        try:
            await inbox(
                InboundMessage(
                    channel=self.account,
                    chat=press.channel_id,
                    message_id=press.post_id,
                    sender=sender,
                    sender_aliases=[press.user_id],
                    sender_name=sender,
                    is_group=seen is not None and seen.type != DIRECT,
                    callback=callback,
                )
            )
        finally:
            self._pressing.pop(press.post_id, None)
            notice = self._notices.pop(callback.id, "")
        body = json.dumps({"ephemeral_text": notice} if notice else {}).encode()
        return WebhookReply(200, body, "application/json")

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        """The notice goes back in the answer to the press (shown to the presser alone)."""
        if callback.id in self._notices:
            self._notices[callback.id] = text

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        """Remove the post's buttons (its attachments), keeping its text; a prompt
        answered by a press of them is noted, so the press cannot be replayed."""
        nonce = self._pressing.pop(message_id, None)
        if nonce is not None:
            self.state.press(nonce)
            await asyncio.to_thread(self.state.save)
        await self._rest("PUT", f"posts/{message_id}/patch", json_body={"props": {}})

    async def _username(self, user_id: str) -> str:
        if user_id not in self._usernames:
            try:
                user = await self._rest("GET", f"users/{user_id}")
            except Undeliverable:  # a user we may not see: known by id alone
                user = {}
            self._usernames[user_id] = str(user.get("username") or user_id)
        return self._usernames[user_id]

    # -- sending -----------------------------------------------------------------------

    async def _rest(
        self,
        method: str,
        path: str,
        *,
        json_body: dict[str, Any] | None = None,
        data: aiohttp.FormData | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """One REST call answered by a JSON object; it, or the error the delivery worker
        needs."""
        body = await self._call(method, path, json_body=json_body, data=data, timeout=timeout)
        if not isinstance(body, dict) or not body:
            raise SendError(f"{path.split('?', 1)[0]}: the answer is no JSON object")
        return body

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json_body: dict[str, Any] | None = None,
        data: aiohttp.FormData | None = None,
        timeout: float = 60.0,
    ) -> Any:
        """One REST call; its JSON answer (None when it is none), or the error the
        delivery worker needs."""
        try:
            async with self.session().request(
                method,
                f"{self.base_url}/api/v4/{path}",
                json=json_body,
                data=data,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                status = response.status
                headers = response.headers
                retry = headers.get("Retry-After") or headers.get("X-RateLimit-Reset") or ""
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{path}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        check_answer(
            status,
            path.split("?", 1)[0],
            platform="Mattermost",
            refused=f"Mattermost at {self.base_url} refused the token (HTTP 401: check token_env)",
            retry_after=retry,
            detail=str(body.get("message") if isinstance(body, dict) else ""),
            ok=(200, 201),
        )
        return body

    def render(self, markdown: str) -> list[str]:
        return chunks(markdown, CHUNK, _RENDERER)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        url = self._actions_url() if buttons else ""
        props: dict[str, Any] = {}
        if buttons and url:
            props["attachments"] = attachments(buttons, url, self.state.key, to.chat)
        return await self._post(to, chunk, [], props)

    async def _post(
        self, to: Address, message: str, file_ids: list[str], props: dict[str, Any] | None = None
    ) -> str:
        body: dict[str, Any] = {"channel_id": to.chat, "message": message}
        if to.thread:
            body["root_id"] = to.thread
        if file_ids:
            body["file_ids"] = file_ids
        props = dict(props or {})
        sending = SENDING.get()
        if sending is not None:  # the same part of the same delivery: the same key
            key = pending_post_id(sending.job, sending.chunk)
            body["pending_post_id"] = props[DELIVERY_PROP] = key
            if sending.attempted:  # a crash may have cut this part's send short
                found = await self._posted(to.chat, key, sending.attempted)
                if found:
                    return found
        if props:
            body["props"] = props
        answer = await self._rest("POST", "posts", json_body=body)
        if not isinstance(answer.get("id"), str):
            raise SendError("posts: the answer has no post id")
        return str(answer["id"])

    async def _posted(self, channel: str, key: str, attempted: float) -> str:
        """The id of the post in `channel` carrying delivery key `key`, made since
        `attempted` (our clock, less the margin); "" when there is none."""
        since = max(0, int(attempted * 1000) - CLOCK_MARGIN_MS)
        try:
            answer = await self._rest("GET", f"channels/{channel}/posts?since={since}")
        except Undeliverable:  # the channel cannot be read: post it (as if never sent)
            return ""
        posts = answer.get("posts")
        for post in posts.values() if isinstance(posts, dict) else ():
            props = post.get("props") if isinstance(post, dict) else None
            if isinstance(props, dict) and props.get(DELIVERY_PROP) == key:
                return str(post.get("id") or "")
        return ""

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over Mattermost's upload limit")
        form = aiohttp.FormData()
        form.add_field("channel_id", to.chat)
        form.add_field(
            "files",
            data,
            filename=name,
            content_type=mimetypes.guess_type(name)[0] or "application/octet-stream",
        )
        answer = await self._rest("POST", "files", data=form, timeout=300)
        infos = answer.get("file_infos")
        if not isinstance(infos, list) or not infos or not isinstance(infos[0], dict):
            raise SendError("files: the answer has no file")
        return await self._post(to, caption.strip(), [str(infos[0].get("id"))])

    async def download(self, attachment: Attachment) -> bytes:
        return await download_capped(
            self.session(),
            f"{self.base_url}/api/v4/files/{attachment.file_id}",
            self.max_file_bytes,
            attachment.name,
        )


def pending_post_id(job: str, part: int) -> str:
    """The `pending_post_id` of part `part` of delivery `job` (the same on every retry)."""
    return "habakkuk:" + hashlib.sha256(f"{job}\x00{part}".encode()).hexdigest()[:32]


def _json(raw: str | bytes, default: Any = None) -> Any:
    """The JSON in `raw` (`default`, else an empty object, when it is none or not one)."""
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if default is not None:
        return value if value is not None else default
    return value if isinstance(value, dict) else {}


def build(config: ChannelConfig, context: AdapterContext) -> MattermostAdapter:
    """The adapter of one Mattermost bot account (habakkuk.channels.platforms)."""
    token = context.secret(config, "token_env")
    state = MattermostState.load(context.state_path(config))
    return MattermostAdapter(config, token, state, context.door)
