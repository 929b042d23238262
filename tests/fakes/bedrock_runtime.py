"""A fake Amazon Bedrock runtime speaking the Converse stream wire, on 127.0.0.1.

`POST /model/{modelId}/converse-stream` (the id percent-encoded) answers with
`application/vnd.amazon.eventstream`: binary messages of a prelude (total length,
headers length, the prelude's CRC32), string headers (`:event-type`,
`:message-type`, `:content-type`), a JSON payload and the message's CRC32, built
here from the AWS event-stream format, not by the library under test. Events come
in the order Bedrock sends them (messageStart, content block deltas with their
start and stop, messageStop, then metadata with the usage) and carry the `p`
padding field the service adds. Errors are the service's: before the stream an
HTTP status with `x-amzn-ErrorType` and `{"message": ...}`; inside it an
exception message (`:message-type: exception`, `:exception-type:
throttlingException`).

Authentication is checked as AWS does: a Bedrock API key as `Authorization:
Bearer`, or SigV4, whose signature the fake recomputes with its own
implementation of the algorithm (AWS "Create a signed AWS API request": canonical
request with the path URI-encoded twice, string to sign, the HMAC key chain) from
the credentials it was given; a wrong signature is answered 403
InvalidSignatureException, as the service does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

from tests.fakes.loopback import serve_on_loopback

PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"


# -- the AWS event-stream framing --------------------------------------------------------


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, prelude CRC, string headers, payload, CRC."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        encoded += struct.pack(">B", len(raw_name)) + raw_name
        encoded += struct.pack(">BH", 7, len(raw_value)) + raw_value  # 7: string
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """An `event` message of `:event-type` `kind` with the service's padding field."""
    body = {**payload, "p": PADDING[: 1 + len(kind)]}
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(body).encode())


def exception(name: str, payload: dict[str, Any]) -> bytes:
    """An `exception` message (an error met inside the stream)."""
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, json.dumps(payload).encode())


# -- SigV4, recomputed -------------------------------------------------------------------


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4_signature(
    *,
    secret: str,
    method: str,
    raw_path: str,
    query: str,
    headers: dict[str, str],
    signed: list[str],
    body: bytes,
    amz_date: str,
    scope: str,
) -> str:
    """The SigV4 signature of a request as AWS computes it."""
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed)
    payload_hash = headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
    canonical = "\n".join(
        [
            method,
            quote(raw_path, safe="/~"),  # every service but S3 encodes the path twice
            query,
            canonical_headers,
            ";".join(signed),
            payload_hash,
        ]
    )
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    date, region, service, terminal = scope.split("/")
    key = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, terminal):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


# -- script ------------------------------------------------------------------------------


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass
class Reply:
    """A successful answer; `split` cuts the stream's bytes into pieces of that size."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str = ""
    signature: str = "sig-bedrock-1"
    stop_reason: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    chunk: int = 5
    split: int = 0
    cut: bool = False  # the stream ends before messageStop (the connection dropped)


@dataclass
class HttpFail:
    """An error answered before the stream (the name in the header, or in `__type`)."""

    status: int
    name: str
    message: str
    in_body: bool = False


@dataclass
class StreamFail:
    """An exception inside the stream, after `text` streamed."""

    name: str  # as the stream spells it: "throttlingException"
    message: str
    text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Corrupt:
    """A message whose CRC is wrong."""


@dataclass
class Recorded:
    """One request the fake received."""

    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    auth: str  # "sigv4", "bearer" or ""
    bearer: str = ""
    access_key: str = ""
    region: str = ""
    service: str = ""
    signed_headers: list[str] = field(default_factory=list)


Script = Reply | HttpFail | StreamFail | Corrupt


def reply_frames(reply: Reply) -> bytes:
    """The event stream of a successful reply."""
    out = [event("messageStart", {"role": "assistant"})]
    index = 0
    if reply.thinking:
        for start in range(0, len(reply.thinking), reply.chunk):
            piece = reply.thinking[start : start + reply.chunk]
            delta = {"reasoningContent": {"text": piece}}
            out.append(event("contentBlockDelta", {"delta": delta, "contentBlockIndex": index}))
        delta = {"reasoningContent": {"signature": reply.signature}}
        out.append(event("contentBlockDelta", {"delta": delta, "contentBlockIndex": index}))
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if reply.text:
        for start in range(0, len(reply.text), reply.chunk):
            text_delta = {"text": reply.text[start : start + reply.chunk]}
            out.append(
                event("contentBlockDelta", {"delta": text_delta, "contentBlockIndex": index})
            )
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for n, call in enumerate(reply.tool_calls):
        tool_id = call.id or f"tooluse_{n:04d}"
        start_event = {"toolUseId": tool_id, "name": call.name}
        out.append(
            event(
                "contentBlockStart", {"start": {"toolUse": start_event}, "contentBlockIndex": index}
            )
        )
        arguments = json.dumps(call.arguments)
        for start in range(0, len(arguments), 7):
            delta = {"toolUse": {"input": arguments[start : start + 7]}}
            out.append(event("contentBlockDelta", {"delta": delta, "contentBlockIndex": index}))
        out.append(event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if reply.cut:
        return b"".join(out)
    stop = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    out.append(event("messageStop", {"stopReason": stop}))
    usage: dict[str, int] = {
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "totalTokens": reply.input_tokens
        + reply.output_tokens
        + (reply.cache_read_tokens or 0)
        + (reply.cache_write_tokens or 0),
    }
    if reply.cache_read_tokens is not None:
        usage["cacheReadInputTokens"] = reply.cache_read_tokens
    if reply.cache_write_tokens is not None:
        usage["cacheWriteInputTokens"] = reply.cache_write_tokens
    out.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 321}}))
    return b"".join(out)


class FakeBedrockRuntime:
    """The fake service; `credentials` maps access key ids to (secret, session token)."""

    def __init__(self) -> None:
        self.replies: deque[Script] = deque()
        self.requests: list[Recorded] = []
        self.credentials: dict[str, tuple[str, str | None]] = {}
        self.bearer_tokens: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Script) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner, self.port = await serve_on_loopback(app)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeBedrockRuntime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the handler -----------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw_path = request.raw_path.split("?", 1)[0]
        parts = raw_path.split("/")
        if request.method != "POST" or len(parts) != 4 or parts[1] != "model":
            return _error(404, "UnknownOperationException", "no such operation")
        if parts[3] != "converse-stream":
            return _error(404, "UnknownOperationException", "no such operation")
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        recorded = Recorded(unquote(parts[2]), json.loads(body), headers, "")
        self.requests.append(recorded)
        refused = self._authenticate(request, raw_path, headers, body, recorded)
        if refused is not None:
            return refused
        if not self.replies:
            return _error(500, "InternalServerException", "fake bedrock: no scripted reply")
        scripted = self.replies.popleft()
        if isinstance(scripted, HttpFail):
            return _error(scripted.status, scripted.name, scripted.message, scripted.in_body)
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "application/vnd.amazon.eventstream"}
        )
        await response.prepare(request)
        if isinstance(scripted, Reply):
            data = reply_frames(scripted)
            step = scripted.split or len(data)
            for start in range(0, len(data), step):
                await response.write(data[start : start + step])
        elif isinstance(scripted, StreamFail):
            await response.write(event("messageStart", {"role": "assistant"}))
            if scripted.text:
                delta = {"delta": {"text": scripted.text}, "contentBlockIndex": 0}
                await response.write(event("contentBlockDelta", delta))
            payload = {"message": scripted.message, **scripted.extra}
            await response.write(exception(scripted.name, payload))
        else:
            good = event("messageStart", {"role": "assistant"})
            await response.write(good[:-4] + bytes(4))  # the message CRC zeroed
        await response.write_eof()
        return response

    def _authenticate(
        self,
        request: web.Request,
        raw_path: str,
        headers: dict[str, str],
        body: bytes,
        recorded: Recorded,
    ) -> web.Response | None:
        authorization = headers.get("authorization", "")
        if authorization.startswith("Bearer "):
            recorded.auth, recorded.bearer = "bearer", authorization[len("Bearer ") :]
            if recorded.bearer in self.bearer_tokens:
                return None
            return _error(403, "UnrecognizedClientException", "The security token is invalid.")
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return _error(
                403, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        fields = dict(
            part.strip().split("=", 1)
            for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(",")
        )
        scope = fields["Credential"].split("/", 1)
        access_key, scope_rest = scope[0], scope[1]
        signed = fields["SignedHeaders"].split(";")
        recorded.auth, recorded.access_key, recorded.signed_headers = "sigv4", access_key, signed
        _, recorded.region, recorded.service, _ = scope_rest.split("/")
        known = self.credentials.get(access_key)
        if known is None:
            return _error(403, "UnrecognizedClientException", "The security token is invalid.")
        secret, token = known
        if token is not None and (
            headers.get("x-amz-security-token") != token or "x-amz-security-token" not in signed
        ):
            return _error(403, "UnrecognizedClientException", "The security token is invalid.")
        if "host" not in signed or any(name not in headers for name in signed):
            return _error(403, "InvalidSignatureException", "signed headers are missing")
        expected = sigv4_signature(
            secret=secret,
            method=request.method,
            raw_path=raw_path,
            query=request.query_string,
            headers=headers,
            signed=signed,
            body=body,
            amz_date=headers.get("x-amz-date", ""),
            scope=scope_rest,
        )
        if not hmac.compare_digest(expected, fields["Signature"]):
            return _error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
            )
        return None


def _error(status: int, name: str, message: str, in_body: bool = False) -> web.Response:
    """An error as Bedrock answers one: the name in x-amzn-ErrorType (or `__type`)."""
    if in_body:
        body = {"__type": f"com.amazon.bedrock#{name}", "message": message}
        return web.json_response(body, status=status)
    headers = {"x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    return web.json_response({"message": message}, status=status, headers=headers)
