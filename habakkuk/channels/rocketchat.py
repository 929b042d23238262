"""Rocket.Chat: the realtime API (DDP over a WebSocket) in, the REST API out.

- In: `wss://<server>/websocket`: `connect` (DDP version 1), the `login` method with the
  personal access token as a `resume` token, then `sub` to `stream-room-messages` with
  `__my_messages__` (every message of every room the bot is in). The server's `ping`
  is answered `pong` and beats; a `changed` of that stream carries the message and its
  room's type (`d` a direct message, `c` and `p` channels and groups). A message that
  is edited (`editedAt`), a system message (`t`) and our own are not taken.
- Away: the stream has no position, so what was posted while the socket was down is read
  back after each subscription (channels/rocketchat_catchup.py: the time of the newest
  message handed on is kept in channels/rocketchat-<account>.json).
- Who and where: the chat is the room id (`rid`), a thread (`tmid`) its own
  conversation; in a channel the bot answers when @-mentioned (its username among the
  message's `mentions`), or a command. The sender is the username, the user id an alias.
- Out: `POST /api/v1/chat.sendMessage` (Rocket.Chat renders Markdown) with `tmid` in a
  thread, in chunks under its 5,000-character default, each with an `_id` derived from
  the delivery and its part: the server stores one message per id, so a send retried
  after its answer was lost posts once (the server's refusal of the repeat is a success
  once `chat.getMessage` shows the message is there). A file goes up with
  `POST /api/v1/rooms.upload/<rid>`, which takes no id of ours: a crash between the
  server storing a file and its record sends that file again. Files in a message
  (`attachments[].title_link`, `/file-upload/...`) are downloaded from the same server
  with the bot's credentials.
- Buttons (approvals, a question's choices): a message after the prompt carrying them as
  attachment actions whose press posts the person's own message (rocketchat_wire.py),
  taken as the press. `chat.update` keeps a message's attachments whatever it is sent,
  so the buttons have a message of their own, deleted (`chat.delete`) once the prompt is
  answered; where the bot may not delete, they stay and a late press is told the prompt
  expired. Typing yes or no works as everywhere.

No SDK: the Python packages for Rocket.Chat are REST-only (rocketchat_API, blocking
requests) or unmaintained DDP clients; DDP is four JSON messages over aiohttp's WebSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mimetypes
import re
import time
from collections import OrderedDict
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Literal

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
from .http_download import download_capped
from .platforms import AdapterContext
from .rest_answer import check_answer
from .rocketchat_catchup import RocketChatState, missed
from .rocketchat_setup import SETUP as SETUP  # the registry reads a platform's step here
from .rocketchat_setup import headers_for
from .rocketchat_wire import (
    button_attachments,
    buttons_id,
    notice_id,
    pressed,
    send_id,
    stamp_ms,
)

log = logging.getLogger(__name__)

CHUNK = 4000  # Rocket.Chat's default Message_MaxAllowedSize is 5000
FILE_LIMIT = 100 * 1024 * 1024  # FileUpload_MaxFileSize's default; a server's 413 says less
_PRESSES = 256  # presses remembered, to post the gateway's notice where each was made
_RENDERER = Renderer(
    text=lambda lines: "\n".join(lines),
    code=lambda lines, language: "\n".join([f"```{language}", *lines, "```"]),
    escape=lambda text: text,
    fallback=lambda markdown, limit: markdown[:limit],
)


class RocketChatAdapter(Adapter):
    """One Rocket.Chat bot user."""

    type = "rocketchat"
    capabilities: frozenset[Capability] = frozenset({"files", "download", "buttons"})
    max_file_bytes = FILE_LIMIT
    keyed_sends = True  # every text's `_id` derives from the delivery and its part (send_id)

    def __init__(self, config: ChannelConfig, token: str, state: RocketChatState):
        super().__init__(config.name)
        self.base_url = (config.base_url or "").rstrip("/")
        self.user_id = config.user_id or ""
        self.token = token
        self.state = state
        self.username = ""
        self._session: aiohttp.ClientSession | None = None
        self._ids = 0
        self._server_ms = 0  # the server's clock at its last answer (its Date header)
        self._presses: OrderedDict[str, tuple[str, str]] = OrderedDict()  # id: room, thread

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=headers_for(self.user_id, self.token))
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- receiving -----------------------------------------------------------------------

    def _next_id(self) -> str:
        self._ids += 1
        return str(self._ids)

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        url = re.sub(r"^http", "ws", self.base_url) + "/websocket"
        try:
            async with self.session().ws_connect(url, heartbeat=None, max_msg_size=0) as ws:
                await ws.send_json({"msg": "connect", "version": "1", "support": ["1"]})
                await self._expect(ws, "connected")
                login = self._next_id()
                await ws.send_json(
                    {"msg": "method", "method": "login", "id": login,
                     "params": [{"resume": self.token}]}
                )  # fmt: skip
                result = await self._expect(ws, "result", login)
                if "error" in result:
                    raise FatalAdapterError(
                        f"Rocket.Chat at {self.base_url} refused the token "
                        f"({result['error'].get('reason') or result['error']}: check token_env)"
                    )
                me = await self._rest("GET", "me")
                self.username = str(me.get("username") or "")
                sub = self._next_id()
                await ws.send_json(
                    {"msg": "sub", "id": sub, "name": "stream-room-messages",
                     "params": ["__my_messages__", False]}
                )  # fmt: skip
                await self._expect(ws, "ready")
                beat()
                # Subscribed first, so nothing falls between what is read back and the
                # stream (a message both ways is dropped as a redelivery).
                await self._catch_up(inbox, beat)
                async for frame in ws:
                    if frame.type != aiohttp.WSMsgType.TEXT:
                        break
                    await self._on_frame(ws, frame.data, inbox, beat)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"realtime: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        log.info("rocketchat %s: the realtime connection ended", self.account)

    async def _expect(
        self, ws: aiohttp.ClientWebSocketResponse, kind: str, of: str = ""
    ) -> dict[str, Any]:
        """The next DDP message of `kind` (answering pings meanwhile)."""
        while True:
            frame = await wait_within(ws.receive(), 30)
            if frame.type != aiohttp.WSMsgType.TEXT:
                raise SendError(f"realtime: the connection ended before {kind}")
            message = json.loads(frame.data)
            if not isinstance(message, dict):
                continue
            if message.get("msg") == "ping":
                await ws.send_json({"msg": "pong"})
            elif message.get("msg") == "nosub":
                raise FatalAdapterError(f"Rocket.Chat refused the subscription: {message}")
            elif message.get("msg") == kind and (not of or message.get("id") == of):
                return message

    async def _on_frame(
        self, ws: aiohttp.ClientWebSocketResponse, data: str, inbox: Inbox, beat: Beat
    ) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        beat()
        kind = message.get("msg")
        if kind == "ping":
            await ws.send_json({"msg": "pong"})
            return
        fields = message.get("fields")
        if kind != "changed" or message.get("collection") != "stream-room-messages":
            return
        args = fields.get("args") if isinstance(fields, dict) else None
        if not isinstance(args, list) or not args or not isinstance(args[0], dict):
            return
        room = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
        await self._take(args[0], str(room.get("roomType") or ""), inbox)

    async def _catch_up(self, inbox: Inbox, beat: Beat) -> None:
        """Hand on what was posted since the kept position (the first start keeps the
        server's time and reads nothing older)."""
        since = self.state.since
        if since is None:
            self.state.advance(self._server_ms or int(time.time() * 1000))
            await asyncio.to_thread(self.state.save)
            return
        found = await missed(self._get, since)
        if found:
            log.info("rocketchat %s: %d messages since the last one kept", self.account, len(found))
        for item in found:
            beat()
            await self._take(item.message, item.room_type, inbox, away=True)

    async def _take(
        self, message: dict[str, Any], room_type: str, inbox: Inbox, *, away: bool = False
    ) -> None:
        """Hand one message on (if it is one to take), then keep its time as the position."""
        converted = self.convert(message, room_type, away=away)
        if converted is not None:
            await inbox(converted)
        at = stamp_ms(message.get("ts"))
        if at is not None and self.state.advance(at):
            await asyncio.to_thread(self.state.save)

    def convert(
        self, message: dict[str, Any], room_type: str, *, away: bool = False
    ) -> InboundMessage | None:
        """A room message as an InboundMessage (None for ours and system ones, and for
        edits on the stream: the message was taken when posted; one read back after an
        outage may have been edited meanwhile, and is taken as it reads now)."""
        user = message.get("u")
        if not isinstance(user, dict) or message.get("t"):
            return None
        if message.get("editedAt") and not away:
            return None
        if user.get("_id") == self.user_id:
            return None
        text = str(message.get("msg") or "")
        data = pressed(text)
        if data is not None:
            return self._press(message, user, room_type, data)
        attachments = self._files(message)
        group = room_type != "d"
        mentioned = any(
            isinstance(m, dict) and (m.get("_id") == self.user_id or m.get("username") in (
                self.username, "all", "here"
            ))
            for m in message.get("mentions") or []
        )  # fmt: skip
        if self.username:
            text = re.sub(rf"(^|\s)@{re.escape(self.username)}\b[:,]?\s*", r"\1", text)
        text = text.strip()
        if not text and not attachments:
            return None
        at = stamp_ms(message.get("ts"))
        return InboundMessage(
            channel=self.account,
            chat=str(message.get("rid") or ""),
            thread=str(message.get("tmid") or ""),
            message_id=str(message.get("_id") or ""),
            sender=str(user.get("username") or user.get("_id")),
            sender_aliases=[str(user.get("_id"))],
            sender_name=str(user.get("name") or user.get("username") or ""),
            text=text,
            attachments=attachments,
            is_group=group,
            addressed=not group or mentioned or text.startswith("/"),
            at=at / 1000 if at is not None else 0.0,
        )

    def _press(
        self, message: dict[str, Any], user: dict[str, Any], room_type: str, data: str
    ) -> InboundMessage:
        """A button press: the person's message carrying the button's data."""
        press = str(message.get("_id") or "")
        chat, thread = str(message.get("rid") or ""), str(message.get("tmid") or "")
        self._presses[press] = (chat, thread)
        while len(self._presses) > _PRESSES:
            self._presses.popitem(last=False)
        at = stamp_ms(message.get("ts"))
        return InboundMessage(
            channel=self.account,
            chat=chat,
            thread=thread,
            message_id=press,
            sender=str(user.get("username") or user.get("_id")),
            sender_aliases=[str(user.get("_id"))],
            sender_name=str(user.get("name") or user.get("username") or ""),
            text=str(message.get("msg") or ""),
            is_group=room_type != "d",
            # the prompt's message is found by its nonce; its buttons go when it closes
            callback=Callback(press, data, ""),
            at=at / 1000 if at is not None else 0.0,
        )

    @staticmethod
    def _files(message: dict[str, Any]) -> list[Attachment]:
        found: list[Attachment] = []
        for item in message.get("attachments") or []:
            if not isinstance(item, dict) or not isinstance(item.get("title_link"), str):
                continue
            name = str(item.get("title") or item["title_link"].rsplit("/", 1)[-1])
            media = str(
                item.get("image_type") or item.get("audio_type") or item.get("video_type")
                or mimetypes.guess_type(name)[0] or "application/octet-stream"
            )  # fmt: skip
            kind: Literal["photo", "document", "audio", "video"] = "document"
            if media.startswith("image/"):
                kind = "photo"
            elif media.startswith("audio/"):
                kind = "audio"
            elif media.startswith("video/"):
                kind = "video"
            size = item.get("size")
            found.append(
                Attachment(
                    kind, item["title_link"], name, media, size if isinstance(size, int) else None
                )
            )
        return found

    # -- sending -----------------------------------------------------------------------

    async def _rest(
        self,
        method: str,
        path: str,
        *,
        json_body: dict[str, Any] | None = None,
        data: aiohttp.FormData | None = None,
        params: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """One REST call; its JSON answer, or the error the delivery worker needs."""
        try:
            async with self.session().request(
                method,
                f"{self.base_url}/api/v1/{path}",
                json=json_body,
                data=data,
                params=params,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                status = response.status
                retry = response.headers.get("Retry-After", "")
                self._note_clock(response.headers.get("Date", ""))
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"{path}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        check_answer(
            status,
            path,
            platform="Rocket.Chat",
            refused=f"Rocket.Chat at {self.base_url} refused the token (HTTP 401: check "
            "token_env and user_id)",
            retry_after=retry,
            detail=str(body),
        )
        if not isinstance(body, dict):
            raise SendError(f"{path}: HTTP {status}")
        return body

    async def _get(self, method: str, path: str, params: dict[str, str]) -> dict[str, Any]:
        return await self._rest(method, path, params=params)

    def _note_clock(self, date: str) -> None:
        """Keep the server's time from an answer's Date header (the first start's position:
        the server's clock, not ours, stamps its messages)."""
        with contextlib.suppress(TypeError, ValueError, IndexError):
            self._server_ms = int(parsedate_to_datetime(date).timestamp() * 1000)

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
        message_id = await self._post(to, chunk, send_id())
        if buttons:
            rows = button_attachments(buttons)
            try:
                await self._post(to, "", buttons_id(message_id), attachments=rows)
            except Undeliverable as exc:  # the prompt went: yes or no can still be typed
                log.warning("rocketchat %s: the buttons were refused: %s", self.account, exc)
        return message_id

    async def _post(
        self,
        to: Address,
        text: str,
        own_id: str,
        *,
        attachments: list[dict[str, Any]] | None = None,
    ) -> str:
        """Post one message (with our own `_id` when given); its id. A repeat of an id the
        server already stored is refused (newer servers answer 400, older ones a success
        without the message): the message is there, so it is a success."""
        message: dict[str, Any] = {"rid": to.chat, "msg": text}
        if own_id:
            message["_id"] = own_id
        if to.thread:
            message["tmid"] = to.thread
        if attachments:
            message["attachments"] = attachments
        try:
            answer = await self._rest("POST", "chat.sendMessage", json_body={"message": message})
        except Undeliverable:
            if own_id and await self._stored(own_id):
                return own_id
            raise
        sent = answer.get("message")
        if not isinstance(sent, dict) and own_id and await self._stored(own_id):
            return own_id
        return _message_id(answer, "chat.sendMessage")

    async def _stored(self, message_id: str) -> bool:
        """Whether the server holds our message `message_id`."""
        try:
            answer = await self._get("GET", "chat.getMessage", {"msgId": message_id})
        except Undeliverable:
            return False
        found = answer.get("message")
        user = found.get("u") if isinstance(found, dict) else None
        return isinstance(user, dict) and user.get("_id") == self.user_id

    async def strip_buttons(self, to: Address, message_id: str) -> None:
        """Delete the message carrying `message_id`'s buttons (none: nothing to do; one the
        bot may not delete keeps its buttons, and a late press is told it expired)."""
        if not message_id:
            return
        body = {"roomId": to.chat, "msgId": buttons_id(message_id)}
        try:
            await self._rest("POST", "chat.delete", json_body=body)
        except Undeliverable as exc:  # gone already, never had buttons, or not allowed
            log.debug("rocketchat %s: no buttons removed: %s", self.account, exc)

    async def answer_callback(self, callback: Callback, text: str = "") -> None:
        """Say `text` (the press was taken, or its prompt expired) where the press was made:
        the press is a message everyone in the room sees, and so is this (posted once)."""
        where = self._presses.pop(callback.id, None)
        if not text or where is None:
            return
        await self._post(Address(self.account, *where), text, notice_id(callback.id))

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over Rocket.Chat's upload limit")
        form = aiohttp.FormData()
        form.add_field(
            "file",
            data,
            filename=name,
            content_type=mimetypes.guess_type(name)[0] or "application/octet-stream",
        )
        if caption.strip():
            form.add_field("msg", caption.strip())
        if to.thread:
            form.add_field("tmid", to.thread)
        answer = await self._rest("POST", f"rooms.upload/{to.chat}", data=form, timeout=300)
        return _message_id(answer, "rooms.upload")

    async def download(self, attachment: Attachment) -> bytes:
        url = attachment.file_id
        if not url.startswith("/"):
            raise Undeliverable(f"{attachment.name} is not on {self.base_url}")
        return await download_capped(
            self.session(), self.base_url + url, self.max_file_bytes, attachment.name
        )


def _message_id(answer: dict[str, Any], what: str) -> str:
    message = answer.get("message")
    found = message.get("_id") if isinstance(message, dict) else None
    if not isinstance(found, str):
        raise SendError(f"{what}: the answer has no message id")
    return found


def build(config: ChannelConfig, context: AdapterContext) -> RocketChatAdapter:
    """The adapter of one Rocket.Chat bot user (habakkuk.channels.platforms)."""
    state = RocketChatState.load(context.state_path(config))
    return RocketChatAdapter(config, context.secret(config, "token_env"), state)
