"""DingTalk's wire: the robot callback's signature, and the calls the adapter makes.

- In (https://open.dingtalk.com/document/orgapp/receive-message): the robot's message
  receiving URL gets each message as JSON with the headers `timestamp` (milliseconds) and
  `sign`, the base64 HMAC-SHA256 of "timestamp\\nAppSecret" keyed by the AppSecret; a
  timestamp more than an hour from now is refused.
- Out: the message's `sessionWebhook` (no token, valid until sessionWebhookExpiredTime),
  else the robot OpenAPI (/v1.0/robot/oToMessages/batchSend for one person,
  /v1.0/robot/groupMessages/send for a group) with the app's access token from
  POST /v1.0/oauth2/accessToken (expireIn seconds; a 401 says it is stale).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from .apptoken import AppToken, AppTokenCache, StaleToken

API_URL = "https://api.dingtalk.com"
SESSION_URL = "https://oapi.dingtalk.com/"  # where session webhooks live
OAPI_URL = "https://oapi.dingtalk.com"  # the legacy API: media upload
MAX_SKEW_MS = 3600 * 1000  # an hour either way
STALE_CODES = frozenset({"InvalidAuthentication", "invalidAuthentication"})


def sign(timestamp: str, secret: str) -> str:
    """The `sign` header: base64 HMAC-SHA256 of "timestamp\\nsecret" keyed by the secret."""
    digest = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode()


def signed(timestamp: str, secret: str, given: str, now_ms: int) -> bool:
    """Whether `given` signs `timestamp` and the timestamp is within an hour of now."""
    if not timestamp.isdigit() or abs(now_ms - int(timestamp)) > MAX_SKEW_MS:
        return False
    return hmac.compare_digest(sign(timestamp, secret).encode(), given.encode())


class DingTalkApi:
    """The robot OpenAPI of one app, with its cached access token, and session sends."""

    def __init__(
        self,
        base_url: str,
        app_key: str,
        secret: str,
        http: aiohttp.ClientSession,
        oapi_url: str = OAPI_URL,
    ):
        self.base = base_url.rstrip("/")
        self.oapi = oapi_url.rstrip("/")
        self.app_key, self.secret = app_key, secret
        self.http = http
        self.tokens = AppTokenCache(self._fetch_token)

    async def _fetch_token(self) -> AppToken:
        body = {"appKey": self.app_key, "appSecret": self.secret}
        try:
            async with self.http.post(
                self.base + "/v1.0/oauth2/accessToken", json=body
            ) as response:
                found = await _json(response)
                status = response.status
        except aiohttp.ClientError as exc:
            raise SendError(f"dingtalk accessToken: {exc}") from None
        if 400 <= status < 500:
            raise FatalAdapterError(
                f"dingtalk accessToken: HTTP {status} {found.get('code', '')} "
                f"{found.get('message', '')} (check app_id and the app secret)"
            )
        if status >= 400:
            raise SendError(f"dingtalk accessToken: HTTP {status}")
        return AppToken(str(found.get("accessToken", "")), float(found.get("expireIn", 0)))

    async def call(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        """POST to the OpenAPI with the app's token (retried once when called stale)."""

        async def use(token: str) -> dict[str, Any]:
            headers = {"x-acs-dingtalk-access-token": token}
            try:
                async with self.http.post(self.base + path, json=body, headers=headers) as response:
                    found = await _json(response)
                    status = response.status
                    retry = response.headers.get("Retry-After", "")
            except aiohttp.ClientError as exc:
                raise SendError(f"dingtalk {what}: {exc}") from None
            if status < 400:
                return found
            message = (
                f"dingtalk {what}: HTTP {status} {found.get('code', '')} {found.get('message', '')}"
            )
            if status == 401 or found.get("code") in STALE_CODES:
                raise StaleToken(message)
            if status == 429:
                raise RetryAfter(message, float(retry) if retry.isdigit() else 2.0)
            if status in (400, 403, 404):
                raise Undeliverable(message)
            raise SendError(message)

        return await self.tokens.call(use)

    async def send_to_person(
        self, robot: str, staff_id: str, text: str, *, key: str = "sampleText", param: Any = None
    ) -> str:
        """One message (a text, or `key` with `param`) to one person through the robot;
        returns its processQueryKey."""
        found = await self.call(
            "/v1.0/robot/oToMessages/batchSend",
            {
                "robotCode": robot,
                "userIds": [staff_id],
                "msgKey": key,
                "msgParam": json.dumps(param or {"content": text}, ensure_ascii=False),
            },
            "batchSend",
        )
        if staff_id in (found.get("invalidStaffIdList") or []):
            raise Undeliverable(f"dingtalk: {staff_id} cannot get the robot's messages")
        if staff_id in (found.get("flowControlledStaffIdList") or []):
            raise RetryAfter(f"dingtalk: sends to {staff_id} are flow controlled", 5.0)
        return str(found.get("processQueryKey", ""))

    async def send_to_group(
        self,
        robot: str,
        conversation: str,
        text: str,
        *,
        key: str = "sampleText",
        param: Any = None,
    ) -> str:
        """One message to a group the robot is in; returns its processQueryKey."""
        found = await self.call(
            "/v1.0/robot/groupMessages/send",
            {
                "robotCode": robot,
                "openConversationId": conversation,
                "msgKey": key,
                "msgParam": json.dumps(param or {"content": text}, ensure_ascii=False),
            },
            "groupMessages",
        )
        return str(found.get("processQueryKey", ""))

    async def upload(self, name: str, data: bytes) -> str:
        """POST the legacy /media/upload (type file) with the app's token; the media_id."""

        async def use(token: str) -> dict[str, Any]:
            form = aiohttp.FormData()
            form.add_field("media", data, filename=name)
            params = {"access_token": token, "type": "file"}
            try:
                async with self.http.post(
                    self.oapi + "/media/upload", params=params, data=form
                ) as r:
                    found = await _json(r)
                    status = r.status
            except aiohttp.ClientError as exc:
                raise SendError(f"dingtalk media/upload: {exc}") from None
            code = found.get("errcode", 0)
            message = (
                f"dingtalk media/upload: HTTP {status} errcode {code} {found.get('errmsg', '')}"
            )
            if code in (40014, 42001):
                raise StaleToken(message)
            if status >= 400 or code != 0:
                raise SendError(message)
            return found

        found = await self.tokens.call(use)
        media = str(found.get("media_id", ""))
        if not media:
            raise SendError("dingtalk media/upload: no media_id in the answer")
        return media

    async def download(self, robot: str, code: str, limit: int) -> bytes:
        """A file a message carried: its downloadUrl from the robot API, then the bytes."""
        from .http_download import read_capped

        found = await self.call(
            "/v1.0/robot/messageFiles/download",
            {"downloadCode": code, "robotCode": robot},
            "messageFiles/download",
        )
        url = str(found.get("downloadUrl", ""))
        if not url.startswith(("https://", "http://")):
            raise SendError("dingtalk messageFiles/download: no downloadUrl")
        try:
            async with self.http.get(url) as response:
                if response.status >= 400:
                    raise SendError(f"dingtalk file: HTTP {response.status}")
                return await read_capped(response, limit, "the file")
        except aiohttp.ClientError as exc:
            raise SendError(f"dingtalk file: {exc}") from None

    async def send_by_session(
        self, url: str, text: str, body: dict[str, Any] | None = None
    ) -> bool:
        """POST a text (or `body`, another message) to a message's sessionWebhook; False
        when DingTalk no longer takes it (expired), so the caller sends through the
        OpenAPI."""
        body = body or {"msgtype": "text", "text": {"content": text}}
        try:
            async with self.http.post(url, json=body) as response:
                found = await _json(response)
                status = response.status
        except aiohttp.ClientError as exc:
            raise SendError(f"dingtalk sessionWebhook: {exc}") from None
        if status == 429 or found.get("errcode") == 130101:
            raise RetryAfter("dingtalk sessionWebhook: too many messages", 5.0)
        return status < 400 and found.get("errcode", 0) == 0


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    try:
        found = await response.json(content_type=None)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
