"""Zulip: a bot reading its event queue by long polling, replying through the REST API.

- In: `POST /api/v1/register` (event_types ["message"], raw Markdown) gives a queue id
  and the last event id; `GET /api/v1/events?queue_id=&last_event_id=` long-polls the
  events after it (a `heartbeat` event when nothing happened; every answer beats). A
  queue the server dropped (idle for minutes, the server restarted) answers 400
  `BAD_EVENT_QUEUE_ID`: we register a new one and fetch the messages after the last one
  we handed on (`GET /api/v1/messages`, anchor that id), so none is lost between queues.
- Who and where: a direct message is a private chat (the other person's email); a
  group DM and a stream are groups, a stream's topic its own conversation (the chat
  `stream-<id>`, the topic percent-encoded as the thread). In a group the bot answers
  when @-mentioned (`@**Name**`; the event's `mentioned` flag), or a command. The
  sender is the person's email, their user id an alias, both matched by `allow_from`.
- Out: `POST /api/v1/messages` with Markdown (Zulip's own dialect, close to CommonMark),
  in chunks under Zulip's 10,000-character limit; a file is uploaded to
  `/api/v1/user_uploads` and posted as a link, which Zulip shows inline. Files in a
  message are its `/user_uploads/...` links, downloaded from the same server with the
  bot's credentials.

What survives a restart: the queue id, the last event id and the last message id live in
`channels/zulip-<account>.json` (0600, replaced atomically), written after the gateway
took each batch. A restart within the queue's lifetime resumes the same queue at that
event (the server keeps every event not yet acknowledged), so what came while we were
down arrives then; a crash between the gateway taking a message and the state being
written replays it, and the gateway drops it as seen. Sends carry no idempotency key
(Zulip has none): a crash between the server storing a chunk and its id being recorded
resends that one chunk.

Zulip's Python package (`zulip`) is a blocking `requests` client; this module speaks the
same few endpoints with aiohttp (a core dependency) instead of running it in threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import write_private_file

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
    RetryAfter,
    SendError,
    Undeliverable,
    Unsupported,
)
from .chunking import Renderer, chunks
from .http_download import download_capped
from .platforms import AdapterContext
from .zulip_setup import SETUP as SETUP  # the registry reads a platform's step here
from .zulip_setup import auth_for

log = logging.getLogger(__name__)

CHUNK = 9000  # Zulip's limit is 10,000 characters
FILE_LIMIT = 25 * 1024 * 1024  # Zulip Cloud's default upload limit
# A long poll returns within about a minute (a heartbeat when nothing happened).
POLL_TIMEOUT = 90.0
CATCH_UP = 200  # messages fetched after a lost queue, at most
_UPLOAD = re.compile(r"\[([^\]\n]*)\]\(((?:https?://[^/\s)]+)?/user_uploads/[^)\s]+)\)")
_RENDERER = Renderer(
    text=lambda lines: "\n".join(lines),
    code=lambda lines, language: "\n".join([f"```{language}", *lines, "```"]),
    escape=lambda text: text,
    fallback=lambda markdown, limit: markdown[:limit],
)


@dataclass
class ZulipState:
    """What Zulip cannot give back: our event queue, where we are in it, and the id of
    the last message handed to the gateway (to fetch what a lost queue missed)."""

    path: Path
    queue_id: str = ""
    last_event_id: int = -1
    last_message_id: int = 0

    @classmethod
    def load(cls, path: Path) -> ZulipState:
        """The state in `path` (empty when there is none yet or it cannot be read)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        if not isinstance(data, dict):
            return cls(path)
        queue, event, message = (
            data.get("queue_id"),
            data.get("last_event_id"),
            data.get("last_message_id"),
        )
        return cls(
            path,
            queue if isinstance(queue, str) else "",
            event if isinstance(event, int) else -1,
            message if isinstance(message, int) else 0,
        )

    def save(self) -> None:
        """Keep the state (written whole or not at all, 0600)."""
        data = {
            "queue_id": self.queue_id,
            "last_event_id": self.last_event_id,
            "last_message_id": self.last_message_id,
        }
        write_private_file(self.path, json.dumps(data) + "\n")


class ZulipError(SendError):
    """Zulip answered `result: error` (its `code` kept, e.g. BAD_EVENT_QUEUE_ID)."""

    def __init__(self, message: str, code: str, status: int):
        super().__init__(message)
        self.code = code
        self.status = status


class ZulipAdapter(Adapter):
    """One Zulip bot."""

    type = "zulip"
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = FILE_LIMIT

    def __init__(self, config: ChannelConfig, api_key: str, state: ZulipState):
        super().__init__(config.name)
        self.base_url = (config.base_url or "").rstrip("/")
        self.email = config.username or ""
        self.auth = auth_for(self.email, api_key)
        self.state = state
        self.user_id = 0
        self.full_name = ""
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=self.auth)
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        data: dict[str, str] | aiohttp.FormData | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """One API call; its JSON answer, or ZulipError / RetryAfter / FatalAdapterError."""
        url = f"{self.base_url}/api/v1/{path}"
        try:
            async with self.session().request(
                method,
                url,
                params=params,
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
        if not isinstance(body, dict):
            raise SendError(f"{path}: HTTP {status}, not a Zulip answer")
        if status == 401:
            raise FatalAdapterError(
                f"Zulip at {self.base_url} refused the bot {self.email} (HTTP 401: "
                "check token_env, the bot's API key)"
            )
        if status == 429:
            seconds = float(body.get("retry-after") or (retry or 1))
            raise RetryAfter(f"{path}: Zulip's rate limit", seconds)
        if status != 200 or body.get("result") != "success":
            code = str(body.get("code") or "")
            raise ZulipError(f"{path}: HTTP {status} {code}: {body.get('msg', '')}", code, status)
        return body

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        me = await self.call("GET", "users/me")
        self.user_id = int(me.get("user_id") or 0)
        self.full_name = str(me.get("full_name") or "")
        if not self.state.queue_id:
            await self._register(catch_up=False)
            beat()  # connected once the queue holds what comes next
        while True:
            try:
                answer = await self.call(
                    "GET",
                    "events",
                    params={
                        "queue_id": self.state.queue_id,
                        "last_event_id": str(self.state.last_event_id),
                    },
                    timeout=POLL_TIMEOUT,
                )
            except ZulipError as exc:
                if exc.code != "BAD_EVENT_QUEUE_ID":
                    raise
                log.info("zulip %s: the event queue is gone; registering a new one", self.account)
                await self._register(catch_up=True, inbox=inbox)
                continue
            beat()
            events = answer.get("events")
            await self._take(events if isinstance(events, list) else [], inbox)

    async def _register(self, *, catch_up: bool, inbox: Inbox | None = None) -> None:
        """A new event queue; with `catch_up`, the messages after the last one we handed
        on first (those the lost queue held)."""
        answer = await self.call(
            "POST",
            "register",
            data={
                "event_types": json.dumps(["message"]),
                "apply_markdown": "false",
                "client_gravatar": "true",
            },
        )
        queue, last = answer.get("queue_id"), answer.get("last_event_id")
        if not isinstance(queue, str) or not isinstance(last, int):
            raise SendError("register: the answer has no queue")
        if catch_up and inbox is not None and self.state.last_message_id:
            await self._catch_up(inbox)
        self.state.queue_id, self.state.last_event_id = queue, last
        await asyncio.to_thread(self.state.save)

    async def _catch_up(self, inbox: Inbox) -> None:
        """Hand on the messages after `last_message_id` the lost queue would have held."""
        answer = await self.call(
            "GET",
            "messages",
            params={
                "anchor": str(self.state.last_message_id),
                "include_anchor": "false",
                "num_before": "0",
                "num_after": str(CATCH_UP),
                "apply_markdown": "false",
                "client_gravatar": "true",
            },
        )
        found = answer.get("messages")
        for message in found if isinstance(found, list) else []:
            if isinstance(message, dict):
                flags = message.get("flags")
                await self._hand_on(message, flags if isinstance(flags, list) else [], inbox)

    async def _take(self, events: list[Any], inbox: Inbox) -> None:
        """Hand on a batch of events, then keep the position past it."""
        if not events:
            return
        for event in events:
            if not isinstance(event, dict):
                continue
            message = event.get("message")
            if event.get("type") == "message" and isinstance(message, dict):
                flags = event.get("flags")
                await self._hand_on(message, flags if isinstance(flags, list) else [], inbox)
            number = event.get("id")
            if isinstance(number, int):
                self.state.last_event_id = max(self.state.last_event_id, number)
        await asyncio.to_thread(self.state.save)

    async def _hand_on(self, message: dict[str, Any], flags: list[Any], inbox: Inbox) -> None:
        converted = self.convert(message, flags)
        if converted is not None:
            await inbox(converted)
        number = message.get("id")
        if isinstance(number, int):
            self.state.last_message_id = max(self.state.last_message_id, number)

    def convert(self, message: dict[str, Any], flags: list[Any]) -> InboundMessage | None:
        """A Zulip message as an InboundMessage (None for our own and empty ones)."""
        sender_id = message.get("sender_id")
        email = str(message.get("sender_email") or "")
        if sender_id == self.user_id or email.lower() == self.email.lower():
            return None
        text, attachments = self._files(str(message.get("content") or ""))
        kind = message.get("type")
        thread = ""
        if kind == "stream":
            group = True
            chat = f"stream-{message.get('stream_id')}"
            topic = str(message.get("subject") or message.get("topic") or "")
            thread = quote(topic, safe="")
        else:
            others = sorted(
                str(person.get("email"))
                for person in message.get("display_recipient") or []
                if isinstance(person, dict)
                and person.get("id") != self.user_id
                and str(person.get("email", "")).lower() != self.email.lower()
            )
            group = len(others) > 1
            chat = ",".join(others) if group else email
        mentioned = "mentioned" in flags or "wildcard_mentioned" in flags
        text = self._unmention(text).strip()
        if not text and not attachments:
            return None
        stamp = message.get("timestamp")
        return InboundMessage(
            channel=self.account,
            chat=chat,
            thread=thread,
            message_id=str(message.get("id")),
            sender=email,
            sender_aliases=[str(sender_id)] if sender_id is not None else [],
            sender_name=str(message.get("sender_full_name") or email),
            text=text,
            attachments=attachments,
            is_group=group,
            addressed=not group or mentioned or text.startswith("/"),
            at=float(stamp) if isinstance(stamp, int | float) else 0.0,
        )

    def _unmention(self, text: str) -> str:
        """The text without mentions of the bot (`@**Name**`, `@**Name|id**`, `@_**...**`)."""
        if not self.full_name:
            return text
        name = re.escape(self.full_name)
        return re.sub(rf"@_?\*\*{name}(\|\d+)?\*\*[:,]?\s*", "", text)

    def _files(self, content: str) -> tuple[str, list[Attachment]]:
        """The text without its upload links, and those uploads as attachments."""
        attachments: list[Attachment] = []
        for match in _UPLOAD.finditer(content):
            name = match.group(1) or unquote(match.group(2).rsplit("/", 1)[-1])
            media = mimetypes.guess_type(name)[0] or "application/octet-stream"
            kind: Literal["photo", "document", "audio"] = "document"
            if media.startswith("image/"):
                kind = "photo"
            elif media.startswith("audio/") or name.endswith(".ogg"):
                kind = "audio"
            attachments.append(Attachment(kind, match.group(2), name, media))
        return _UPLOAD.sub("", content).strip(), attachments

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return chunks(markdown, CHUNK, _RENDERER)

    def _target(self, to: Address) -> dict[str, str]:
        if to.chat.startswith("stream-"):
            topic = unquote(to.thread) or "(no topic)"
            return {"type": "stream", "to": to.chat.removeprefix("stream-"), "topic": topic}
        return {"type": "private", "to": json.dumps(to.chat.split(","))}

    async def _post(self, to: Address, content: str) -> str:
        try:
            answer = await self.call(
                "POST", "messages", data={**self._target(to), "content": content}
            )
        except ZulipError as exc:
            if exc.status == 400:  # no such stream or person, not allowed to post there
                raise Undeliverable(str(exc)) from None
            raise
        number = answer.get("id")
        if not isinstance(number, int):
            raise SendError("messages: the answer has no id")
        return str(number)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        return await self._post(to, chunk)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over Zulip's 25 MB upload limit")
        form = aiohttp.FormData()
        form.add_field(
            "filename",
            data,
            filename=name,
            content_type=mimetypes.guess_type(name)[0] or "application/octet-stream",
        )
        try:
            answer = await self.call("POST", "user_uploads", data=form, timeout=300)
        except ZulipError as exc:
            if exc.status == 400:  # over the server's own limit
                raise Unsupported(f"{name}: {exc}") from None
            raise
        url = answer.get("url") or answer.get("uri")
        if not isinstance(url, str):
            raise SendError("user_uploads: the answer has no url")
        label = name.replace("[", "(").replace("]", ")")
        content = f"{caption.strip()}\n[{label}]({url})".strip()
        return await self._post(to, content)

    async def download(self, attachment: Attachment) -> bytes:
        url = attachment.file_id
        if url.startswith("/"):
            url = self.base_url + url
        elif not url.startswith(self.base_url + "/"):
            raise Undeliverable(f"{attachment.name} is not on {self.base_url}")
        return await download_capped(self.session(), url, self.max_file_bytes, attachment.name)


def build(config: ChannelConfig, context: AdapterContext) -> ZulipAdapter:
    """The adapter of one Zulip bot (habakkuk.channels.platforms)."""
    api_key = context.secret(config, "token_env")
    return ZulipAdapter(config, api_key, ZulipState.load(context.state_path(config)))
