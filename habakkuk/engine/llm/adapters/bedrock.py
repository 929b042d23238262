"""Amazon Bedrock through the Converse stream API, natively (no litellm).

`POST {endpoint}/model/{modelId}/converse-stream` with the Converse JSON body
(bedrock_wire.py); the answer is an `application/vnd.amazon.eventstream` binary
stream whose messages carry `:event-type` messageStart, contentBlockStart,
contentBlockDelta, contentBlockStop, messageStop and metadata (the usage), or
`:message-type: exception` for an error met mid-stream (bedrock_errors.py).

How, and why this way. The issue asks that a Bedrock user need no extra and pay
nothing for Bedrock until it is configured. `botocore` is a core dependency (about
33 MB installed, 29 MB of it service-model JSON that is never read here, plus
jmespath; importing its session, auth and eventstream modules took 0.12 to 0.5 s
on a busy 2-core machine, paid at the first call or on `warm`'s worker thread,
never by `--help`), and it is used only for what it does better than code of ours
would:

- the standard credential chain (`botocore.session.get_session().get_credentials()`:
  environment, shared files and profiles, SSO, web identity, container and instance
  metadata, credential processes), which no hand-written subset would match;
- SigV4 signing (`botocore.auth.SigV4Auth` on an `AWSRequest`);
- the event-stream decoder (`botocore.eventstream.EventStreamBuffer`, which checks
  the prelude and message CRC32s).

Its HTTP client is not used: botocore sends with urllib3, blocking, so a stream
read through it would hold a thread per call. The request goes out with aiohttp
(a core dependency) and the body is decoded as it arrives, so the stream is async
and a closed turn closes the connection at once. bedrock_auth.py keeps the
blocking credential work on worker threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

from ...config import ProviderConfig
from ..provider import Provider, ProviderError
from ..types import (
    Message,
    ModelRequest,
    StreamDone,
    StreamEvent,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolUseBlock,
    Usage,
)
from . import parse_arguments
from .bedrock_auth import BedrockAuth, endpoint, stream_url
from .bedrock_errors import http_error, stream_error
from .bedrock_wire import PROVIDER, build_body
from .streaming import StreamingProvider

if TYPE_CHECKING:
    import aiohttp
    from botocore.eventstream import EventStreamMessage

log = logging.getLogger(__name__)

STOP_REASONS = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
}
CONNECT_SECONDS = 30.0
# Long outputs and thinking can pause the stream for a while; a dead one still ends.
READ_SECONDS = 600.0


# -- response ----------------------------------------------------------------------------


class BedrockAssembler:
    """Builds the message from decoded event-stream messages and yields our deltas."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason = "end_turn"
        self.finished = False

    def feed(self, raw: EventStreamMessage) -> list[StreamEvent]:
        """The deltas of one event-stream message; an exception message raises."""
        headers = raw.headers
        if headers.get(":message-type", "event") != "event":
            raise stream_error(headers, raw.payload, self.provider)
        kind = headers.get(":event-type")
        data: dict[str, Any] = json.loads(raw.payload) if raw.payload else {}
        if kind == "contentBlockStart":
            tool = data.get("start", {}).get("toolUse")
            if tool:
                tool_id, name = str(tool.get("toolUseId", "")), str(tool.get("name", ""))
                block = {"type": "tool", "id": tool_id, "name": name, "json": ""}
                self.blocks[int(data.get("contentBlockIndex", 0))] = block
                return [ToolCallStart(tool_id, name)]
        elif kind == "contentBlockDelta":
            return self._delta(int(data.get("contentBlockIndex", 0)), data.get("delta", {}))
        elif kind == "messageStop":
            stop = str(data.get("stopReason") or "end_turn")
            self.stop_reason = STOP_REASONS.get(stop, stop)
            self.finished = True
        elif kind == "metadata":
            usage = data.get("usage", {})
            self.usage.input_tokens = int(usage.get("inputTokens") or 0)
            self.usage.output_tokens = int(usage.get("outputTokens") or 0)
            self.usage.cache_read_tokens = int(usage.get("cacheReadInputTokens") or 0)
            self.usage.cache_write_tokens = int(usage.get("cacheWriteInputTokens") or 0)
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        if "text" in delta:
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            block["text"] = block.get("text", "") + delta["text"]
            return [TextDelta(delta["text"])] if delta["text"] else []
        if "toolUse" in delta:
            tool = self.blocks.get(index)
            fragment = str(delta["toolUse"].get("input") or "")
            if tool is None or tool["type"] != "tool":
                return []
            tool["json"] += fragment
            return [ToolCallDelta(tool["id"], fragment)] if fragment else []
        reasoning = delta.get("reasoningContent")
        if reasoning is not None:
            block = self.blocks.setdefault(
                index, {"type": "reasoning", "text": "", "signature": "", "redacted": ""}
            )
            if reasoning.get("redactedContent"):
                block["redacted"] += str(reasoning["redactedContent"])
            if reasoning.get("signature"):
                block["signature"] += str(reasoning["signature"])
            text = str(reasoning.get("text") or "")
            if text:
                block["text"] += text
                return [ThinkingDelta(text)]
        return []

    def done(self) -> StreamDone:
        """The final event; a stream without its messageStop was cut."""
        if not self.finished:
            raise ProviderError("network", "the stream ended early", provider=self.provider)
        blocks: list[Any] = []
        for index in sorted(self.blocks):
            data = self.blocks[index]
            if data["type"] == "text" and data["text"]:
                blocks.append(TextBlock(data["text"]))
            elif data["type"] == "tool":
                blocks.append(ToolUseBlock(data["id"], data["name"], parse_arguments(data["json"])))
            elif data["type"] == "reasoning":
                if data["redacted"]:
                    blocks.append(
                        ThinkingBlock(
                            "", signature=data["redacted"], redacted=True, provider=PROVIDER
                        )
                    )
                else:
                    blocks.append(
                        ThinkingBlock(data["text"], signature=data["signature"], provider=PROVIDER)
                    )
        stop = self.stop_reason
        if stop == "end_turn" and any(isinstance(b, ToolUseBlock) for b in blocks):
            stop = "tool_use"
        return StreamDone(Message("assistant", blocks), self.usage, stop)


class EventStream:
    """The decoded messages of one streamed response; closing it drops the connection."""

    def __init__(self, response: aiohttp.ClientResponse, provider: str) -> None:
        self.response = response
        self.provider = provider
        self._reading: AsyncGenerator[EventStreamMessage, None] | None = None

    def __aiter__(self) -> AsyncIterator[EventStreamMessage]:
        self._reading = self._messages()
        return self._reading

    async def _messages(self) -> AsyncGenerator[EventStreamMessage, None]:
        import aiohttp
        from botocore.eventstream import EventStreamBuffer, ParserError

        buffer = EventStreamBuffer()
        try:
            async for chunk in self.response.content.iter_any():
                buffer.add_data(chunk)
                for message in buffer:
                    yield message
        except ParserError as exc:
            raise ProviderError(
                "network", f"the event stream is corrupt: {exc}", provider=self.provider
            ) from exc
        except aiohttp.ClientPayloadError as exc:
            raise ProviderError(
                "network", f"the stream broke: {exc}", provider=self.provider
            ) from exc

    async def close(self) -> None:
        """Give the connection back when the body was read to its end, else drop it."""
        if self._reading is not None:
            await self._reading.aclose()
        if self.response.content.at_eof():
            self.response.release()
        else:
            self.response.close()


# -- the adapter -------------------------------------------------------------------------


class BedrockProvider(StreamingProvider):
    """The `bedrock` adapter."""

    def __init__(self, config: ProviderConfig):
        self.name = config.name or PROVIDER
        self.base_url = config.base_url
        self.auth = BedrockAuth(self.name, config.region, config.base_url)
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def prepare(self, request: ModelRequest) -> str | None:
        """The provider's key (a Bedrock API key), if any: without one, AWS credentials."""
        return request.api_key

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The model id and the Converse body."""
        return {"model": request.model, "body": build_body(request)}

    def open_stream(self, prepared: str | None, params: dict[str, Any]) -> Awaitable[Any]:
        """One ConverseStream call."""
        return self._open(prepared, params["model"], params["body"])

    async def _open(self, api_key: str | None, model: str, body: dict[str, Any]) -> EventStream:
        import yarl

        root = self.base_url or endpoint(None, await self.auth.region())
        url = stream_url(root, model)
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        headers = await self.auth.headers(url, data, api_key)
        session = self._client()
        # encoded=True: the URL goes out byte for byte as it was signed.
        response = await session.post(yarl.URL(url, encoded=True), data=data, headers=headers)
        if response.status != 200:
            try:
                content = await response.read()
            finally:
                response.release()
            raise http_error(response.status, response.headers, content, self.name)
        return EventStream(response, self.name)

    def _client(self) -> aiohttp.ClientSession:
        """The connection pool, made in the running loop (a closed loop's is replaced)."""
        import aiohttp

        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._session_loop is not loop:
            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=CONNECT_SECONDS, sock_read=READ_SECONDS
            )
            session = aiohttp.ClientSession(timeout=timeout)
            self._session, self._session_loop = session, loop
        return session

    def assembler(self) -> BedrockAssembler:
        """The Converse stream's event mapping."""
        return BedrockAssembler(self.name)

    def warm(self, api_key: str | None) -> None:
        """Import botocore and resolve region and credentials now (blocking; ProviderHub.warm
        runs it on a worker thread while the turn is prepared)."""
        self.auth.warm(api_key)

    async def aclose(self) -> None:
        """Close the connection pool."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            try:
                await session.close()
            except Exception as exc:  # a failing close must not hide the real shutdown
                log.debug("closing the Bedrock session failed: %s", exc)


def create(provider_config: ProviderConfig) -> Provider:
    """The adapter for one `type: bedrock` provider."""
    provider: Provider = BedrockProvider(provider_config)
    return provider
