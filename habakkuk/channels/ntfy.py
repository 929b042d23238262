"""ntfy: replies published to one topic, messages read from another as a JSON stream.

- Out: `POST <base>/<topic>` with the Markdown as the body (`Markdown: yes`, which the
  ntfy apps render), in chunks under ntfy's 4096-byte message limit; a file is `PUT` with
  its `Filename` (an attachment). The answer is the message as JSON; its `id` is ours.
- In: `GET <base>/<listen>/json?since=<id>`, one JSON event a line: `open`, `keepalive`
  (every 45 s by default; both beat) and `message` (its `id`, `time`, `message`, `title`,
  and an `attachment` with a URL on the same server). A stream that ends after it was
  heard from ends the run; the supervisor reconnects.
- Who: ntfy messages carry no sender. Whoever may publish to the `listen` topic is the
  person: on a public server that is anyone who knows the topic name, so pick an
  unguessable one, or use an access-controlled server with `token_env` (an access token,
  `Authorization: Bearer`). The sender is the topic, `ntfy:<listen>`; setup writes
  `allow_from: ["*"]`, the topic being the gate. Each account is one private chat, named
  by the reply topic.

What survives a restart: the id of the last message handed to the gateway is kept in
`channels/ntfy-<account>.json` (0600, replaced atomically) after the gateway took it, and
the stream is reopened `since` it: the server's cache (12 h by default on ntfy.sh)
replays what came meanwhile. A crash between the gateway taking a message and the id
being written replays that message, which the gateway drops as seen. The first start
reads only what is new. Sends carry no idempotency key (ntfy has none): a crash between
the server storing a chunk and its id being recorded resends that one chunk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit

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
    SendError,
    Undeliverable,
    Unsupported,
)
from .chunking import Renderer, chunks
from .http_download import download_capped
from .ntfy_setup import DEFAULT_BASE_URL, headers_for
from .ntfy_setup import SETUP as SETUP  # the registry reads a platform's step here
from .platforms import AdapterContext

log = logging.getLogger(__name__)

# ntfy turns a message over 4096 bytes into an attachment; 1000 characters stay under it.
CHUNK = 1000
# ntfy.sh's attachment limit (a server's own may be lower: its 413 says so).
FILE_LIMIT = 15 * 1024 * 1024
MAX_LINE = 1024 * 1024
_RENDERER = Renderer(
    text=lambda lines: "\n".join(lines),
    code=lambda lines, language: "\n".join([f"```{language}", *lines, "```"]),
    escape=lambda text: text,
    fallback=lambda markdown, limit: markdown[:limit],
)


@dataclass
class NtfyState:
    """What ntfy cannot give back: the id of the last message handed to the gateway."""

    path: Path
    last_id: str = ""

    @classmethod
    def load(cls, path: Path) -> NtfyState:
        """The state in `path` (empty when there is none yet or it cannot be read)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(path)
        last = data.get("last_id") if isinstance(data, dict) else None
        return cls(path, last if isinstance(last, str) else "")

    def save(self, last_id: str) -> None:
        """Keep `last_id` (written whole or not at all, 0600)."""
        self.last_id = last_id
        write_private_file(self.path, json.dumps({"last_id": last_id}) + "\n")


class NtfyAdapter(Adapter):
    """One pair of ntfy topics: replies to `topic`, messages from `listen`."""

    type = "ntfy"
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = FILE_LIMIT

    def __init__(self, config: ChannelConfig, token: str, state: NtfyState):
        super().__init__(config.name)
        self.base_url = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.topic = config.topic or ""
        self.listen = config.listen or ""
        self.headers = headers_for(token)
        self.state = state
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=self.headers)
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        url = f"{self.base_url}/{quote(self.listen)}/json"
        params = {"since": self.state.last_id} if self.state.last_id else {}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)
        try:
            async with self.session().get(url, params=params, timeout=timeout) as response:
                if response.status in (401, 403):
                    raise FatalAdapterError(
                        f"ntfy at {self.base_url} refused to let us read {self.listen} "
                        f"(HTTP {response.status}: check token_env)"
                    )
                if response.status != 200:
                    raise SendError(f"subscribe: HTTP {response.status}")
                while True:
                    raw = await response.content.readline()
                    if not raw:
                        log.info("ntfy %s: the stream ended", self.account)
                        return
                    message = self._on_event(raw, beat)
                    if message is not None:
                        await inbox(message)
                        await asyncio.to_thread(self.state.save, message.message_id)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"subscribe: {type(exc).__name__}: {exc}".rstrip(": ")) from None

    def _on_event(self, raw: bytes, beat: Beat) -> InboundMessage | None:
        """The message a line of the stream carries, if any (every event beats)."""
        try:
            event = json.loads(raw)
        except ValueError:
            log.warning("ntfy %s: a line that is not JSON", self.account)
            return None
        if not isinstance(event, dict):
            return None
        beat()
        if event.get("event") != "message" or not isinstance(event.get("id"), str):
            return None
        return self.convert(event)

    def convert(self, event: dict[str, Any]) -> InboundMessage | None:
        """A `message` event as an InboundMessage."""
        text = str(event.get("message") or "").strip()
        title = str(event.get("title") or "").strip()
        attachments: list[Attachment] = []
        attached = event.get("attachment")
        if isinstance(attached, dict) and isinstance(attached.get("url"), str):
            name = str(attached.get("name") or "file")
            media = str(attached.get("type") or mimetypes.guess_type(name)[0] or "")
            size = attached.get("size")
            kind: Literal["photo", "document", "audio"] = "document"
            if media.startswith("image/"):
                kind = "photo"
            elif media.startswith("audio/"):
                kind = "audio"
            attachments.append(
                Attachment(
                    kind,
                    attached["url"],
                    name,
                    media or "application/octet-stream",
                    size if isinstance(size, int) else None,
                )
            )
            if text == f"You received a file: {name}":
                text = ""  # ntfy's stand-in for a file sent without a message
        if title:
            text = f"{title}\n{text}".strip()
        if not text and not attachments:
            return None
        stamp = event.get("time")
        return InboundMessage(
            channel=self.account,
            chat=self.topic,
            message_id=str(event["id"]),
            sender=f"ntfy:{self.listen}",
            sender_name=self.listen,
            text=text,
            attachments=attachments,
            at=float(stamp) if isinstance(stamp, int | float) else 0.0,
        )

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return chunks(markdown, CHUNK, _RENDERER)

    async def _publish(self, method: str, topic: str, data: bytes, headers: dict[str, str]) -> str:
        url = f"{self.base_url}/{quote(topic)}"
        try:
            async with self.session().request(
                method, url, data=data, headers=headers, timeout=aiohttp.ClientTimeout(total=300)
            ) as response:
                body = await response.read()
                if response.status == 429:
                    raise SendError("publish: HTTP 429 (the server's rate limit)")
                if response.status in (401, 403):
                    raise Undeliverable(f"publish to {topic}: HTTP {response.status}")
                if response.status == 413:
                    raise Unsupported("the file is over the ntfy server's limit (HTTP 413)")
                if response.status != 200:
                    raise SendError(f"publish: HTTP {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"publish: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise SendError("publish: the answer is not JSON") from None
        message_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(message_id, str):
            raise SendError("publish: the answer has no id")
        return message_id

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        headers = {"Markdown": "yes", "Content-Type": "text/markdown; charset=utf-8"}
        if silent:
            headers["Priority"] = "min"  # no sound, no vibration (the progress draft)
        return await self._publish("POST", to.chat, chunk.encode("utf-8"), headers)

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over ntfy's 15 MB attachment limit")
        headers = {"Filename": name}
        if caption.strip():
            headers["Message"] = caption.strip().replace("\n", "\\n")
        return await self._publish("PUT", to.chat, data, headers)

    async def download(self, attachment: Attachment) -> bytes:
        url = attachment.file_id
        ours, theirs = urlsplit(self.base_url), urlsplit(url)
        if (theirs.scheme, theirs.netloc) != (ours.scheme, ours.netloc):
            raise Undeliverable(f"{attachment.name} is not on {self.base_url}")
        return await download_capped(self.session(), url, self.max_file_bytes, attachment.name)


def build(config: ChannelConfig, context: AdapterContext) -> NtfyAdapter:
    """The adapter of one ntfy account (habakkuk.channels.platforms)."""
    token = context.secret(config, "token_env") if config.token_env else ""
    state = NtfyState.load(context.state_path(config))
    return NtfyAdapter(config, token, state)
