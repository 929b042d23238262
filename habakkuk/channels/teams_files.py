"""Files to a person in Teams: the file consent flow of a bot in a personal chat.

Teams shows a bot's file only from the person's own OneDrive, so the bot asks first: it
posts a file consent card (name, size, what it is); when the person presses Allow, Teams
sends a `fileConsent/invoke` activity carrying an upload URL in their OneDrive; the bot
PUTs the bytes there (one request with Content-Range, as Microsoft's "Send and receive
files using bots" describes) and posts a file info card that shows the file in the chat.
Until the person answers, the file waits on the adapter's one-hour media shelf; an answer
after that hour (or after a restart) is told the file is gone.

In group chats and channels a bot can only show images, which Teams fetches from a URL.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import aiohttp

from .adapter import SendError

CONSENT = "application/vnd.microsoft.teams.card.file.consent"
FILE_CARD = "application/vnd.microsoft.teams.card.file.info"
INVOKE = "fileConsent/invoke"
# Where a person's OneDrive upload URLs point.
UPLOAD_HOSTS = (".sharepoint.com", ".sharepoint.us", ".sharepoint.de", ".sharepoint.cn")


def personal(conversation: str) -> bool:
    """Whether a conversation id is a personal chat (group chats and channels are 19:)."""
    return not conversation.startswith("19:")


def consent_card(name: str, size: int, shelf_token: str, description: str) -> dict[str, Any]:
    """The attachment asking the person to accept `name` into their OneDrive."""
    context = {"habakkuk": shelf_token}
    return {
        "contentType": CONSENT,
        "name": name,
        "content": {
            "description": description or name,
            "sizeInBytes": size,
            "acceptContext": context,
            "declineContext": context,
        },
    }


def file_card(info: dict[str, Any]) -> dict[str, Any]:
    """The attachment showing an uploaded file (from the invoke's uploadInfo)."""
    return {
        "contentType": FILE_CARD,
        "contentUrl": str(info.get("contentUrl", "")),
        "name": str(info.get("name", "")),
        "content": {
            "uniqueId": str(info.get("uniqueId", "")),
            "fileType": str(info.get("fileType", "")),
        },
    }


def upload_allowed(url: str, base_url: str | None) -> bool:
    """Only OneDrive's upload URLs (or a private cloud's root) get the person's file."""
    parts = urlsplit(url)
    if base_url and url.startswith(base_url.rstrip("/") + "/"):
        return True
    return parts.scheme == "https" and (parts.hostname or "").endswith(UPLOAD_HOSTS)


async def upload(http: aiohttp.ClientSession, url: str, data: bytes) -> None:
    """PUT the whole file to the upload URL in one request."""
    end = max(0, len(data) - 1)
    headers = {"Content-Range": f"bytes 0-{end}/{len(data)}"}
    try:
        async with http.put(url, data=data, headers=headers) as response:
            if response.status >= 400:
                raise SendError(f"teams upload: HTTP {response.status}")
    except aiohttp.ClientError as exc:
        raise SendError(f"teams upload: {exc}") from None
