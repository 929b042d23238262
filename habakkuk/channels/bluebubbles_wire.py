"""BlueBubbles' REST API (a BlueBubbles server on the Mac that holds iMessage), with aiohttp.

Every call carries the server password as the `password` query parameter (the server's
own scheme; use HTTPS or a private network to reach it). Texts go to
POST /api/v1/message/text, files to POST /api/v1/message/attachment (multipart), both
with a `tempGuid` of ours; a received file comes from GET /api/v1/attachment/<guid>/download.
The server keeps a `tempGuid` only while its send runs, so a send resumed after a crash
looks at the chat's newest messages first (`sent_since`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, SendError, Undeliverable


@dataclass(frozen=True)
class ServerInfo:
    """The BlueBubbles server we talk to (the setup check's answer)."""

    version: str
    account: str
    private_api: bool


def temp_guid(seed: str) -> str:
    """A send's tempGuid, derived from `seed` (the delivery and its part)."""
    return "habakkuk-" + hashlib.sha256(seed.encode()).hexdigest()[:32]


class BlueBubblesApi:
    """The REST API of one BlueBubbles server."""

    def __init__(self, base_url: str, password: str, http: aiohttp.ClientSession):
        self.base = base_url.rstrip("/")
        self.password = password
        self.http = http

    async def info(self) -> ServerInfo:
        """GET the server's info; FatalAdapterError when the password is refused."""
        found = _data(await self._call("GET", "/api/v1/server/info"))
        return ServerInfo(
            str(found.get("server_version", "")),
            str(found.get("detected_icloud", "") or found.get("detected_imessage", "")),
            bool(found.get("private_api")),
        )

    async def send_text(self, chat: str, text: str, guid: str) -> str:
        """Send `text` to chat `chat`; returns the message's guid."""
        body = {"chatGuid": chat, "tempGuid": guid, "message": text, "method": "apple-script"}
        return str(_data(await self._call("POST", "/api/v1/message/text", json=body)).get("guid"))

    async def send_file(self, chat: str, path: Path, name: str, guid: str) -> str:
        """Send the file at `path` as `name` to chat `chat`; returns the message's guid."""
        form = aiohttp.FormData()
        form.add_field("chatGuid", chat)
        form.add_field("tempGuid", guid)
        form.add_field("name", name)
        form.add_field("method", "apple-script")
        form.add_field("attachment", path.read_bytes(), filename=name)
        found = await self._call("POST", "/api/v1/message/attachment", data=form)
        return str(_data(found).get("guid"))

    async def sent_since(self, chat: str, since_ms: int) -> list[dict[str, Any]]:
        """Our own messages in chat `chat` from `since_ms` on (epoch milliseconds)."""
        body = {
            "chatGuid": chat,
            "limit": 50,
            "sort": "DESC",
            "after": since_ms,
            "with": ["attachment"],
        }
        found = (await self._call("POST", "/api/v1/message/query", json=body)).get("data")
        rows = found if isinstance(found, list) else []
        return [row for row in rows if isinstance(row, dict) and row.get("isFromMe")]

    async def download(self, guid: str, limit: int) -> bytes:
        """A received attachment's bytes, refused past `limit`."""
        from .http_download import read_capped

        url = f"{self.base}/api/v1/attachment/{guid}/download"
        try:
            async with self.http.get(url, params={"password": self.password}) as response:
                if response.status >= 400:
                    raise SendError(f"bluebubbles attachment: HTTP {response.status}")
                return await read_capped(response, limit, "the attachment")
        except aiohttp.ClientError as exc:
            raise SendError(self._scrub(f"bluebubbles attachment: {exc}")) from None

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            async with self.http.request(
                method, self.base + path, params={"password": self.password}, **kwargs
            ) as response:
                try:
                    found = await response.json(content_type=None)
                except ValueError:
                    found = {}
                status = response.status
        except aiohttp.ClientError as exc:
            raise SendError(self._scrub(f"bluebubbles: {exc}")) from None
        found = found if isinstance(found, dict) else {}
        if status < 400:
            return found
        error = found.get("error")
        why = error.get("message", "") if isinstance(error, dict) else str(error or "")
        message = self._scrub(f"bluebubbles: HTTP {status} {found.get('message', '')} {why}")
        if status == 401:
            raise FatalAdapterError(message.strip() + " (check the server password)")
        if status in (400, 404):  # no such chat, an empty message: no retry will help
            raise Undeliverable(message.strip())
        raise SendError(message.strip())

    def _scrub(self, text: str) -> str:
        """`text` without the password (an error may quote the URL it was in)."""
        return text.replace(self.password, "***") if self.password else text


def _data(found: dict[str, Any]) -> dict[str, Any]:
    data = found.get("data")
    return data if isinstance(data, dict) else {}
