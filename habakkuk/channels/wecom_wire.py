"""WeCom's wire: the callback's signature and encryption, and the API calls the adapter
makes with the app's access token (habakkuk/channels/apptoken.py).

- Callbacks (https://developer.work.weixin.qq.com/document/path/90968): every request
  carries msg_signature, timestamp and nonce in its query; msg_signature is the hex SHA-1
  of the sorted token, timestamp, nonce and encrypted text. The text is base64 of
  AES-256-CBC with the key base64(EncodingAESKey + "=") and the key's first 16 bytes as
  IV, padded with PKCS#7 to 32 bytes; the plaintext is 16 random bytes, the message's
  length (4 bytes, big-endian), the message and the receiver id (our corp id). The GET
  that verifies the URL carries it as `echostr`; a message comes as an XML `<Encrypt>`.
- API: GET /cgi-bin/gettoken?corpid=&corpsecret= gives a token for expires_in seconds;
  every answer has an errcode (40014/42001/40001: the token is invalid or expired).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from typing import Any
from xml.etree import ElementTree

import aiohttp

from .adapter import FatalAdapterError, RetryAfter, SendError, Undeliverable
from .appcrypto import cbc_decrypt
from .apptoken import AppToken, AppTokenCache, StaleToken

WECOM_URL = "https://qyapi.weixin.qq.com"
STALE_CODES = frozenset({40014, 42001, 40001})  # invalid or expired access token
BAD_APP_CODES = frozenset({40013, 40001, 40056, 41004, 48002})
RATE_CODES = frozenset({45009, 45033, -1})
UNREACHABLE_CODES = frozenset({81013, 60111, 60020, 301002})


def msg_signature(token: str, timestamp: str, nonce: str, encrypted: str) -> str:
    """The hex SHA-1 of the sorted token, timestamp, nonce and encrypted text."""
    return hashlib.sha1("".join(sorted([token, timestamp, nonce, encrypted])).encode()).hexdigest()


def signed(token: str, timestamp: str, nonce: str, encrypted: str, given: str) -> bool:
    """Whether `given` is the request's msg_signature (constant time)."""
    expected = msg_signature(token, timestamp, nonce, encrypted)
    return hmac.compare_digest(expected.encode(), given.encode())


def aes_key(encoding_aes_key: str) -> bytes:
    """The AES key from the 43-character EncodingAESKey; ValueError when it is not one."""
    key = base64.b64decode(encoding_aes_key + "=")
    if len(key) != 32:
        raise ValueError("an EncodingAESKey is 43 characters of base64 (32 bytes)")
    return key


def decrypt(key: bytes, encrypted: str, receiver: str) -> bytes:
    """The message inside `encrypted`; ValueError when it is not for `receiver`."""
    try:
        data = base64.b64decode(encrypted, validate=True)
    except (ValueError, TypeError):
        raise ValueError("not base64") from None
    plain = cbc_decrypt(key, key[:16], data, block=32)
    if len(plain) < 20:
        raise ValueError("too short")
    (length,) = struct.unpack(">I", plain[16:20])
    message, rest = plain[20 : 20 + length], plain[20 + length :]
    if len(message) != length or not hmac.compare_digest(rest, receiver.encode()):
        raise ValueError("not for this receiver")
    return message


def xml_fields(data: bytes) -> dict[str, str]:
    """The child elements of an XML message as text; ValueError when it is not XML.
    (Callbacks carry no DTDs or entities; expat refuses external ones.)"""
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise ValueError("a DTD in a callback")
    try:
        root = ElementTree.fromstring(data)  # DTDs refused above: no entity expansion
    except ElementTree.ParseError:
        raise ValueError("not XML") from None
    return {child.tag: (child.text or "") for child in root}


class WeComApi:
    """The API calls of one WeCom app, with its cached access token."""

    def __init__(self, base_url: str, corp_id: str, secret: str, http: aiohttp.ClientSession):
        self.base = base_url.rstrip("/")
        self.corp_id, self.secret = corp_id, secret
        self.http = http
        self.tokens = AppTokenCache(self._fetch_token)

    async def _fetch_token(self) -> AppToken:
        found = await self._request(
            "GET",
            "/cgi-bin/gettoken",
            {"corpid": self.corp_id, "corpsecret": self.secret},
            what="gettoken",
            fetching=True,
        )
        return AppToken(str(found.get("access_token", "")), float(found.get("expires_in", 0)))

    async def call(
        self,
        method: str,
        path: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: Any = None,
        what: str,
    ) -> dict[str, Any]:
        """An API call with the app's token (fetched, renewed, retried once when stale)."""

        async def use(token: str) -> dict[str, Any]:
            return await self._request(
                method, path, {"access_token": token}, json_body=json_body, form=form, what=what
            )

        return await self.tokens.call(use)

    async def send(self, agent_id: int, user: str, msgtype: str, content: dict[str, Any]) -> str:
        """POST /cgi-bin/message/send to one member; returns the msgid."""
        return (await self.send_answer(agent_id, user, msgtype, content)).get("msgid", "")

    async def send_answer(
        self, agent_id: int, user: str, msgtype: str, content: dict[str, Any]
    ) -> dict[str, str]:
        """POST /cgi-bin/message/send to one member; its msgid and, for a template card
        with buttons, the response_code that updates it once (within 72 hours)."""
        found = await self.call(
            "POST",
            "/cgi-bin/message/send",
            json_body={"touser": user, "msgtype": msgtype, "agentid": agent_id, msgtype: content},
            what="message/send",
        )
        if user in str(found.get("invaliduser", "")).split("|"):
            raise Undeliverable(f"wecom: {user} cannot get this app's messages")
        return {k: str(found.get(k, "")) for k in ("msgid", "response_code")}

    async def update_card_button(
        self, agent_id: int, user: str, response_code: str, replace_name: str
    ) -> None:
        """POST /cgi-bin/message/update_template_card: the member's card shows one greyed
        button named `replace_name` (https://developer.work.weixin.qq.com/document/path/94888;
        each response_code updates once)."""
        await self.call(
            "POST",
            "/cgi-bin/message/update_template_card",
            json_body={
                "userids": [user],
                "agentid": agent_id,
                "response_code": response_code,
                "button": {"replace_name": replace_name},
            },
            what="message/update_template_card",
        )

    async def upload(self, name: str, data: bytes, kind: str) -> str:
        """POST /cgi-bin/media/upload (a temporary file for three days); the media_id."""

        async def use(token: str) -> dict[str, Any]:
            form = aiohttp.FormData()
            form.add_field("media", data, filename=name)
            return await self._request(
                "POST",
                "/cgi-bin/media/upload",
                {"access_token": token, "type": kind},
                form=form,
                what="media/upload",
            )

        found = await self.tokens.call(use)
        media = str(found.get("media_id", ""))
        if not media:
            raise SendError("wecom media/upload: no media_id in the answer")
        return media

    async def media(self, media_id: str, limit: int) -> bytes:
        """GET /cgi-bin/media/get: a file a message carried (an error comes as JSON)."""
        from .http_download import read_capped

        async def use(token: str) -> bytes:
            params = {"access_token": token, "media_id": media_id}
            try:
                async with self.http.get(self.base + "/cgi-bin/media/get", params=params) as resp:
                    if resp.status >= 400 or resp.content_type in (
                        "application/json",
                        "text/plain",
                    ):
                        _raise(await _json(resp), resp.status, "media/get", fetching=False)
                    return await read_capped(resp, limit, "the file")
            except aiohttp.ClientError as exc:
                raise SendError(f"wecom media/get: {exc}") from None

        return await self.tokens.call(use)

    async def _request(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        *,
        json_body: dict[str, Any] | None = None,
        form: Any = None,
        what: str,
        fetching: bool = False,
    ) -> dict[str, Any]:
        try:
            async with self.http.request(
                method, self.base + path, params=params, json=json_body, data=form
            ) as response:
                found = await _json(response)
                if response.status >= 400 or found.get("errcode", 0) != 0:
                    _raise(found, response.status, what, fetching=fetching)
                return found
        except aiohttp.ClientError as exc:
            raise SendError(f"wecom {what}: {exc}") from None


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    try:
        found = await response.json(content_type=None)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _raise(found: dict[str, Any], status: int, what: str, *, fetching: bool) -> None:
    code = found.get("errcode", 0)
    code = code if isinstance(code, int) else 0
    message = f"wecom {what}: HTTP {status} errcode {code} {found.get('errmsg', '')}".strip()
    if fetching and (code in BAD_APP_CODES or 400 <= status < 500):
        raise FatalAdapterError(message + " (check corp_id and the app secret)")
    if code in STALE_CODES:
        raise StaleToken(message)
    if code in RATE_CODES or status == 429:
        raise RetryAfter(message, 2.0)
    if code in UNREACHABLE_CODES:
        raise Undeliverable(message)
    raise SendError(message)
