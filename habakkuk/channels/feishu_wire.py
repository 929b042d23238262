"""Feishu/Lark's wire: the event callback's checks and decryption, and the Open API calls
the adapter makes with the app's tenant_access_token (habakkuk/channels/apptoken.py).

- Events (https://open.feishu.cn/document/server-docs/event-subscription-guide): with an
  Encrypt Key set, a body is `{"encrypt": base64}` whose bytes are a 16-byte IV and the
  AES-256-CBC ciphertext under the SHA-256 of the Encrypt Key; each request carries
  X-Lark-Request-Timestamp, X-Lark-Request-Nonce and X-Lark-Signature, the hex SHA-256
  of timestamp + nonce + Encrypt Key + the raw body. The decrypted event names the
  Verification Token (`header.token`, or `token` in the url_verification challenge).
- API: POST /open-apis/auth/v3/tenant_access_token/internal gives a token for `expire`
  seconds; every answer is `{"code": 0, "msg": ..., "data": ...}`, a non-zero code says
  why (99991661/99991663: the token is missing or stale).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from .appcrypto import cbc_decrypt
from .apptoken import AppToken, AppTokenCache, StaleToken

FEISHU_URL = "https://open.feishu.cn"
STALE_CODES = frozenset({99991661, 99991663})  # the token is missing, or invalid/expired
# The app's id or secret is wrong, or the app is disabled: restarting cannot help.
BAD_APP_CODES = frozenset({10003, 10014, 99991664, 99991665})
RATE_CODES = frozenset({99991400, 11232, 11233})
# The bot is not in the chat, the user cannot see the app, the chat is gone or muted.
UNREACHABLE_CODES = frozenset({230002, 230006, 230013, 230035, 230017, 230038})


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """X-Lark-Signature: hex SHA-256 of timestamp + nonce + Encrypt Key + body."""
    data = (timestamp + nonce + encrypt_key).encode() + body
    return hashlib.sha256(data).hexdigest()


def signed(timestamp: str, nonce: str, encrypt_key: str, body: bytes, given: str) -> bool:
    """Whether `given` is the request's signature (constant time)."""
    expected = signature(timestamp, nonce, encrypt_key, body)
    return hmac.compare_digest(expected.encode(), given.encode())


def decrypt(encrypt_key: str, encrypted: str) -> dict[str, Any]:
    """The event inside `{"encrypt": ...}`; ValueError when it is not ours or not JSON."""
    try:
        data = base64.b64decode(encrypted, validate=True)
    except (ValueError, TypeError):
        raise ValueError("not base64") from None
    if len(data) < 32:
        raise ValueError("too short")
    key = hashlib.sha256(encrypt_key.encode()).digest()
    plain = cbc_decrypt(key, data[:16], data[16:])
    event = json.loads(plain.decode())
    if not isinstance(event, dict):
        raise ValueError("not an event")
    return event


@dataclass(frozen=True)
class BotInfo:
    """Who the app's bot is (GET /open-apis/bot/v3/info)."""

    open_id: str
    name: str


class FeishuApi:
    """The Open API calls of one app, with its cached tenant_access_token."""

    def __init__(self, base_url: str, app_id: str, secret: str, http: aiohttp.ClientSession):
        self.base = base_url.rstrip("/")
        self.app_id, self.secret = app_id, secret
        self.http = http
        self.tokens = AppTokenCache(self._fetch_token)

    async def _fetch_token(self) -> AppToken:
        found = await self._request(
            "POST",
            "/open-apis/auth/v3/tenant_access_token/internal",
            "",
            json_body={"app_id": self.app_id, "app_secret": self.secret},
            what="tenant_access_token",
        )
        return AppToken(str(found.get("tenant_access_token", "")), float(found.get("expire", 0)))

    async def call(
        self,
        method: str,
        path: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
        what: str,
    ) -> dict[str, Any]:
        """An API call with the app's token (fetched, renewed, retried once when stale)."""

        async def use(token: str) -> dict[str, Any]:
            return await self._request(
                method, path, token, json_body=json_body, form=form, what=what
            )

        return await self.tokens.call(use)

    async def bot(self) -> BotInfo:
        """The bot's own open_id and name (mentions of it address it in groups)."""
        found = await self.call("GET", "/open-apis/bot/v3/info", what="bot info")
        bot = found.get("bot") if isinstance(found.get("bot"), dict) else {}
        assert isinstance(bot, dict)
        return BotInfo(str(bot.get("open_id", "")), str(bot.get("app_name", "")))

    async def send(self, chat_id: str, msg_type: str, content: dict[str, Any], uuid: str) -> str:
        """POST /open-apis/im/v1/messages to a chat; `uuid` makes a repeat post once."""
        body: dict[str, Any] = {
            "receive_id": chat_id,
            "msg_type": msg_type,
            "content": json.dumps(content, ensure_ascii=False),
        }
        if uuid:
            body["uuid"] = uuid
        found = await self.call(
            "POST",
            "/open-apis/im/v1/messages?receive_id_type=chat_id",
            json_body=body,
            what="send message",
        )
        data = found.get("data") if isinstance(found.get("data"), dict) else {}
        assert isinstance(data, dict)
        message_id = str(data.get("message_id", ""))
        if not message_id:
            raise SendError("feishu send: no message_id in the answer")
        return message_id

    async def update_card(self, message_id: str, card: dict[str, Any]) -> None:
        """PATCH an interactive message's card (the approval's buttons taken away)."""
        await self.call(
            "PATCH",
            f"/open-apis/im/v1/messages/{message_id}",
            json_body={"content": json.dumps(card, ensure_ascii=False)},
            what="update card",
        )

    async def upload(self, name: str, data: bytes, file_type: str) -> str:
        """POST /open-apis/im/v1/files; returns the file_key."""

        async def use(token: str) -> dict[str, Any]:
            form = aiohttp.FormData()
            form.add_field("file_type", file_type)
            form.add_field("file_name", name)
            form.add_field("file", data, filename=name)
            return await self._request(
                "POST", "/open-apis/im/v1/files", token, form=form, what="upload file"
            )

        found = await self.tokens.call(use)
        data_ = found.get("data") if isinstance(found.get("data"), dict) else {}
        assert isinstance(data_, dict)
        key = str(data_.get("file_key", ""))
        if not key:
            raise SendError("feishu upload: no file_key in the answer")
        return key

    async def resource(self, message_id: str, key: str, kind: str, limit: int) -> bytes:
        """A file or image a message carried (GET .../messages/:id/resources/:key)."""
        from .http_download import read_capped

        async def use(token: str) -> bytes:
            url = f"{self.base}/open-apis/im/v1/messages/{message_id}/resources/{key}"
            try:
                async with self.http.get(
                    url, params={"type": kind}, headers={"Authorization": f"Bearer {token}"}
                ) as response:
                    if response.status >= 400 or response.content_type == "application/json":
                        found = await _json(response)
                        _raise(found, response.status, "download", response.headers)
                    return await read_capped(response, limit, "the file")
            except aiohttp.ClientError as exc:
                raise SendError(f"feishu download: {exc}") from None

        return await self.tokens.call(use)

    async def _request(
        self,
        method: str,
        path: str,
        token: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: aiohttp.FormData | None = None,
        what: str,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with self.http.request(
                method, self.base + path, json=json_body, data=form, headers=headers
            ) as response:
                found = await _json(response)
                if response.status >= 400 or found.get("code", 0) != 0:
                    _raise(found, response.status, what, response.headers)
                return found
        except aiohttp.ClientError as exc:
            raise SendError(f"feishu {what}: {exc}") from None


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    try:
        found = await response.json(content_type=None)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _raise(found: dict[str, Any], status: int, what: str, headers: Any) -> None:
    code = found.get("code", 0)
    code = code if isinstance(code, int) else 0
    message = f"feishu {what}: HTTP {status} code {code} {found.get('msg', '')}".strip()
    if code in STALE_CODES:
        raise StaleToken(message)
    if code in BAD_APP_CODES or (status == 401 and code not in STALE_CODES):
        raise FatalAdapterError(message + " (check app_id and the app secret)")
    if status == 429 or code in RATE_CODES:
        retry = str(headers.get("x-ogw-ratelimit-reset", "") or headers.get("Retry-After", ""))
        raise RetryAfter(message, float(retry) if retry.isdigit() else 2.0)
    if code in UNREACHABLE_CODES:
        raise Undeliverable(message)
    raise SendError(message)
