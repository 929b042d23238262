"""Rocket.Chat: the realtime API (DDP over a WebSocket) in, the REST API out.

- In: `wss://<server>/websocket`: `connect` (DDP version 1), the `login` method with the
  personal access token as a `resume` token, then `sub` to `stream-room-messages` with
  `__my_messages__` (every message of every room the bot is in). The server's `ping`
  is answered `pong` and beats; a `changed` of that stream carries the message and its
  room's type (`d` a direct message, `c` and `p` channels and groups). A message that
  is edited (`editedAt`), a system message (`t`) and our own are not taken.
- Who and where: the chat is the room id (`rid`), a thread (`tmid`) its own
  conversation; in a channel the bot answers when @-mentioned (its username among the
  message's `mentions`), or a command. The sender is the username, the user id an alias.
- Out: `POST /api/v1/chat.postMessage` (Rocket.Chat renders Markdown) with `tmid` in a
  thread, in chunks under its 5,000-character default; a file goes up with
  `POST /api/v1/rooms.upload/<rid>`. Files in a message (`attachments[].title_link`,
  `/file-upload/...`) are downloaded from the same server with the bot's credentials.
  Approvals are typed (message buttons call back only through an app or an outgoing
  integration, not the realtime API).

A reconnect subscribes again; what was posted while the socket was down is not replayed
(the stream has no position to resume from). Sends carry no idempotency key: a crash
between the server storing a chunk and its id being recorded resends that one chunk.

No SDK: the Python packages for Rocket.Chat are REST-only (rocketchat_API, blocking
requests) or unmaintained DDP clients; DDP is four JSON messages over aiohttp's WebSocket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
import re
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
from .rocketchat_setup import SETUP as SETUP  # the registry reads a platform's step here
from .rocketchat_setup import headers_for

log = logging.getLogger(__name__)

CHUNK = 4000  # Rocket.Chat's default Message_MaxAllowedSize is 5000
FILE_LIMIT = 100 * 1024 * 1024  # FileUpload_MaxFileSize's default; a server's 413 says less
_RENDERER = Renderer(
    text=lambda lines: "\n".join(lines),
    code=lambda lines, language: "\n".join([f"```{language}", *lines, "```"]),
    escape=lambda text: text,
    fallback=lambda markdown, limit: markdown[:limit],
)


class RocketChatAdapter(Adapter):
    """One Rocket.Chat bot user."""

    type = "rocketchat"
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = FILE_LIMIT

    def __init__(self, config: ChannelConfig, token: str):
        super().__init__(config.name)
        self.base_url = (config.base_url or "").rstrip("/")
        self.user_id = config.user_id or ""
        self.token = token
        self.username = ""
        self._session: aiohttp.ClientSession | None = None
        self._ids = 0

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
        converted = self.convert(args[0], str(room.get("roomType") or ""))
        if converted is not None:
            await inbox(converted)

    def convert(self, message: dict[str, Any], room_type: str) -> InboundMessage | None:
        """A room message as an InboundMessage (None for ours, edits and system ones)."""
        user = message.get("u")
        if not isinstance(user, dict) or message.get("t") or message.get("editedAt"):
            return None
        if user.get("_id") == self.user_id:
            return None
        text = str(message.get("msg") or "")
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
        stamp = message.get("ts")
        at = stamp.get("$date") if isinstance(stamp, dict) else None
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
            at=at / 1000 if isinstance(at, int | float) else 0.0,
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
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """One REST call; its JSON answer, or the error the delivery worker needs."""
        try:
            async with self.session().request(
                method,
                f"{self.base_url}/api/v1/{path}",
                json=json_body,
                data=data,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                status = response.status
                retry = response.headers.get("Retry-After", "")
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
        body: dict[str, Any] = {"roomId": to.chat, "text": chunk}
        if to.thread:
            body["tmid"] = to.thread
        answer = await self._rest("POST", "chat.postMessage", json_body=body)
        return _message_id(answer, "chat.postMessage")

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
    return RocketChatAdapter(config, context.secret(config, "token_env"))
