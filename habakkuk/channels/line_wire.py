"""LINE's wire: the X-Line-Signature check and the Messaging API, with aiohttp.

The signature (LINE's "Verify webhook signature"): HMAC-SHA256 of the raw request body
with the channel secret, base64. Replies: POST /v2/bot/message/reply with the event's
reply token (free, used once, soon stale), else POST /v2/bot/message/push with
X-Line-Retry-Key, a UUID of ours: LINE runs a push once per key and answers a repeat
with 409, so a push retried after a crash reaches the chat once. Content a person sent
comes from the data host, GET /v2/bot/message/<id>/content.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp

from .adapter import Button, FatalAdapterError, RetryAfter, SendError, Undeliverable

API_URL = "https://api.line.me"
DATA_URL = "https://api-data.line.me"
TEXT_LIMIT = 5000  # characters in one text message
ALT_LIMIT = 400  # a flex message's altText (the notification's words)
LABEL_LIMIT = 40  # a button's label
DATA_LIMIT = 300  # a postback's data


def signature(secret: str, body: bytes) -> str:
    """X-Line-Signature of `body`."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def signed(secret: str, body: bytes, given: str) -> bool:
    """True when `given` is the body's signature (compared in constant time)."""
    expected = signature(secret, body)
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def retry_key(seed: str) -> str:
    """The X-Line-Retry-Key of one send: a UUID derived from `seed` (the delivery and its
    part), so every retry of that send carries the same key."""
    return str(uuid.UUID(bytes=hashlib.sha256(seed.encode()).digest()[:16], version=4))


def text_message(text: str) -> dict[str, Any]:
    """A text message object."""
    return {"type": "text", "text": text[:TEXT_LIMIT]}


def buttons_message(text: str, buttons: list[list[Button]]) -> dict[str, Any]:
    """A flex bubble: the text, then one postback button per choice (its data what the
    gateway reads back; the label shown in the chat as the person's answer)."""
    actions = [
        {
            "type": "button",
            "style": "primary" if i == 0 else "secondary",
            "height": "sm",
            "action": {
                "type": "postback",
                "label": button.text[:LABEL_LIMIT],
                "data": button.data[:DATA_LIMIT],
                "displayText": button.text,
            },
        }
        for i, button in enumerate(b for row in buttons for b in row)
    ]
    return {
        "type": "flex",
        "altText": text[:ALT_LIMIT],
        "contents": {
            "type": "bubble",
            "body": {
                "type": "box",
                "layout": "vertical",
                "contents": [{"type": "text", "text": text[:TEXT_LIMIT], "wrap": True}],
            },
            "footer": {"type": "box", "layout": "vertical", "spacing": "sm", "contents": actions},
        },
    }


def image_message(url: str) -> dict[str, Any]:
    """An image LINE fetches from `url` (JPEG or PNG, HTTPS in production)."""
    return {"type": "image", "originalContentUrl": url, "previewImageUrl": url}


@dataclass(frozen=True)
class BotInfo:
    """Who the bot is on LINE (the setup check's answer, and its own user id for mentions)."""

    user_id: str
    name: str
    basic_id: str


class MessagingApi:
    """The Messaging API of one channel (its access token)."""

    def __init__(self, base_url: str, token: str, http: aiohttp.ClientSession, data_url: str = ""):
        self.base = base_url.rstrip("/")
        self.data = (data_url or base_url).rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.http = http

    async def info(self) -> BotInfo:
        """GET /v2/bot/info; FatalAdapterError when the token is refused."""
        found = await self._call("GET", "/v2/bot/info")
        return BotInfo(
            str(found.get("userId", "")),
            str(found.get("displayName", "")),
            str(found.get("basicId", "")),
        )

    async def reply(self, token: str, messages: list[dict[str, Any]]) -> str:
        """Answer with a reply token; returns the first message's id. SendError with
        `stale` when the token was used or is too old (the caller pushes instead)."""
        found = await self._call(
            "POST", "/v2/bot/message/reply", {"replyToken": token, "messages": messages}
        )
        return _first_id(found)

    async def push(self, to: str, messages: list[dict[str, Any]], key: str) -> str:
        """Push to a user, group or room, once per `key`; returns the first message's id
        (or the accepted request's id when LINE ran this key before)."""
        headers = {"X-Line-Retry-Key": key}
        found = await self._call(
            "POST", "/v2/bot/message/push", {"to": to, "messages": messages}, headers
        )
        return _first_id(found) or str(found.get("_accepted", ""))

    async def content(self, message_id: str, limit: int) -> bytes:
        """What a person sent in message `message_id`, refused past `limit` bytes."""
        from .http_download import read_capped

        url = f"{self.data}/v2/bot/message/{message_id}/content"
        try:
            async with self.http.get(url, headers=self.headers) as response:
                if response.status >= 400:
                    raise SendError(f"line content: HTTP {response.status}")
                return await read_capped(response, limit, "the file")
        except aiohttp.ClientError as exc:
            raise SendError(f"line content: {exc}") from None

    async def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        try:
            async with self.http.request(
                method, self.base + path, json=body, headers={**self.headers, **(headers or {})}
            ) as response:
                try:
                    found = await response.json(content_type=None)
                except ValueError:
                    found = {}
                status = response.status
                accepted = response.headers.get("x-line-accepted-request-id", "")
                retry = response.headers.get("Retry-After", "")
        except aiohttp.ClientError as exc:
            raise SendError(f"line: {exc}") from None
        found = found if isinstance(found, dict) else {}
        if status < 400:
            return found
        if status == 409 and accepted:  # this retry key ran already: the message is out
            return {"_accepted": accepted}
        message = f"line: HTTP {status} {found.get('message', '')}".strip()
        details = " ".join(str(d.get("message", "")) for d in found.get("details") or [])
        message = f"{message} {details}".strip()
        if status == 401:
            raise FatalAdapterError(message + " (check the channel access token)")
        if status == 429:
            raise RetryAfter(message, float(retry) if retry.isdigit() else 10.0)
        if status == 400 and "reply token" in message.lower():
            raise StaleReplyToken(message)
        if status in (400, 403, 404) and path.endswith("/push"):
            # not a friend, blocked, a group the bot left: no retry will reach it
            raise Undeliverable(message)
        raise SendError(message)


class StaleReplyToken(SendError):
    """The reply token was used already or is too old: push instead."""


def _first_id(found: dict[str, Any]) -> str:
    sent = found.get("sentMessages")
    if isinstance(sent, list) and sent and isinstance(sent[0], dict):
        return str(sent[0].get("id", ""))
    return ""
