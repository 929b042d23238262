"""The web chat's side of the one-table test: `WebDriver` plays the person at the
dashboard's chat, through the web chat's real HTTP API on the runtime's own server.

It does what the page does (habakkuk/server/static/app.js): a message is a JSON
POST /api/chat, a file the multipart one (with X-Habakkuk-Client); what the bot says
is read from the conversation's event stream (GET /api/chat/<conversation>/events,
server-sent events, replayed from the start); an approval's card is answered through
POST /api/approvals/<id>; a file the bot sent is fetched from the URL its entry names.
Every request carries the server's bearer token (`http.token_env`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from tests.helpers import BOUND

TOKEN_ENV = "WEB_CHAT_TEST_TOKEN"
# The roles of the log's entries that are not something the bot said: what the person
# sent, and the files (their bytes are files(); a voice note's caption is empty).
NOT_SAID = frozenset({"user", "file"})


@dataclass(frozen=True)
class Entry:
    """One entry of the conversation's log, as the event stream gives it."""

    seq: int
    role: str
    text: str
    approval: str | None
    file_url: str | None
    file_name: str | None

    @classmethod
    def of(cls, data: dict[str, Any]) -> Entry:
        file = data.get("file") or {}
        return cls(
            int(data["seq"]),
            str(data["role"]),
            str(data["text"]),
            data.get("approval"),
            file.get("url"),
            file.get("name"),
        )


class WebDriver:
    """One person in one conversation of the web chat, on the runtime's HTTP server."""

    kind = "web"
    has_buttons = True  # each approval's card has Approve and Deny buttons

    def __init__(self, conversation: str = "table chat"):
        self.conversation = conversation
        self.token = secrets.token_urlsafe(24)
        self.url = ""
        self.entries: list[Entry] = []
        self._files: list[tuple[str, bytes]] = []
        self._ids = itertools.count(1)
        self._client: aiohttp.ClientSession | None = None
        self._reader: asyncio.Task[None] | None = None
        self.stream_error: BaseException | None = None
        self.presses = 0  # the approval buttons pressed

    # -- the table's setup -----------------------------------------------------------

    def channel_yaml(self, name: str) -> str:
        # The web chat lets in whoever the HTTP server let in: the token is the allowlist.
        return "type: web\n"

    def config_yaml(self) -> str:
        """The server's section: a bearer token, so every request must carry it."""
        return f"http:\n  token_env: {TOKEN_ENV}\n"

    def env(self) -> dict[str, str]:
        return {TOKEN_ENV: self.token}

    def served_at(self, url: str) -> None:
        """The runtime's HTTP server listens at `url`: open the conversation's stream."""
        self.url = url
        self._client = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=BOUND),
        )
        self._reader = asyncio.get_running_loop().create_task(self._read_stream())

    async def close(self) -> None:
        """Stop reading and close the client."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._client is not None:
            await self._client.close()

    # -- the person ------------------------------------------------------------------

    @property
    def client(self) -> aiohttp.ClientSession:
        assert self._client is not None, "the table has not started the HTTP server"
        return self._client

    def _chat(self, suffix: str) -> str:
        return f"{self.url}/api/chat/{quote(self.conversation, safe='')}/{suffix}"

    async def say(self, text: str) -> None:
        # Each message carries the page's own id, so a resend would be the same message.
        body = {"conversation": self.conversation, "text": text, "id": self._message_id()}
        async with self.client.post(f"{self.url}/api/chat", json=body) as response:
            assert response.status == 202, (response.status, await response.text())

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        form = aiohttp.FormData()
        form.add_field("conversation", self.conversation)
        form.add_field("id", self._message_id())
        if caption:
            form.add_field("text", caption)
        form.add_field("file", data, filename=name, content_type=media_type)
        # The page's header: a multipart message without it is refused (a form post
        # from another site could carry no such header).
        headers = {"X-Habakkuk-Client": "dashboard"}
        async with self.client.post(f"{self.url}/api/chat", data=form, headers=headers) as response:
            assert response.status == 202, (response.status, await response.text())

    async def press(self, label: str) -> None:
        # The newest approval card in the conversation; its buttons answer through the
        # approvals API, as the page's do.
        cards = [entry for entry in self.entries if entry.approval]
        if not cards:
            raise AssertionError(f"no approval card in the chat: {self.texts()}")
        if "Approve" in label:
            approve = True
        elif "Deny" in label:
            approve = False
        else:
            raise AssertionError(f"an approval card has no button {label!r}")
        self.presses += 1
        approval = quote(cards[-1].approval or "", safe="")
        body = {"approve": approve}
        async with self.client.post(f"{self.url}/api/approvals/{approval}", json=body) as response:
            assert response.status == 200, (response.status, await response.text())

    def texts(self) -> list[str]:
        self._following()
        return [entry.text for entry in self.entries if entry.role not in NOT_SAID]

    def files(self) -> list[tuple[str, bytes]]:
        self._following()
        return list(self._files)

    def _following(self) -> None:
        """Fail at once when the stream stopped: nothing more would ever be read."""
        if self.stream_error is not None:
            raise AssertionError(
                f"the conversation's event stream stopped: {self.stream_error!r}"
            ) from self.stream_error

    def _message_id(self) -> str:
        return f"page-{next(self._ids)}"

    # -- the event stream ------------------------------------------------------------

    async def _read_stream(self) -> None:
        """Follow the conversation's log from its start: each entry, each file's bytes."""
        try:
            async with self.client.get(self._chat("events")) as response:
                assert response.status == 200, (response.status, await response.text())
                async for event, data in _frames(response):
                    if event == "message":
                        await self._took(Entry.of(json.loads(data)))
            self.stream_error = EOFError("the server ended the stream")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # kept: the next look at the chat fails with it
            self.stream_error = exc

    async def _took(self, entry: Entry) -> None:
        if entry.file_url is not None:
            # Fetched before the entry counts, so files() holds each file whole.
            async with self.client.get(f"{self.url}{entry.file_url}") as response:
                assert response.status == 200, (response.status, await response.text())
                self._files.append((entry.file_name or "", await response.read()))
        self.entries.append(entry)


async def _frames(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, str]]:
    """The stream's (event, data) frames; comments (keepalives) are skipped."""
    event, data = "message", list[str]()
    while raw := await response.content.readline():
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
