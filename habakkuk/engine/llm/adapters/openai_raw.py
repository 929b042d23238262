"""The two OpenAI endpoints called through the SDK's public raw request path.

`chat.completions.create` and `responses.create` walk every message and every
tool schema against the SDK's TypedDicts on each call (`maybe_transform`): for
plain JSON such as ours the walk changes nothing, and it cost a third of a
server's CPU. So the adapters build the body themselves and hand it to the
SDK's `client.post` (the README's way to make a custom request) with the same
path, options and stream type `create` uses: the SDK still sends it (its
client, auth headers, retries off, SSE parsing and exception types).

The body is encoded here once per call, except the tools: each tool's JSON is
encoded once and reused by every later call that offers the same tool (a tool's
schema is a constant of its class), so a turn of several calls, or the next
turn, does not encode the same forty schemas again. tests/llm pins that the
server receives the body `create` would have sent.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from openai import AsyncOpenAI, AsyncStream
    from openai.types.responses import ResponseStreamEvent

# A tool's identity for its encoding: (name, description, its schema object).
ToolKey = Callable[[dict[str, Any]], tuple[str, str, object]]
_S = TypeVar("_S", bound="AsyncStream[Any]")  # the stream class a call asks for
_ENTRIES = 1024  # tools remembered (all agents' tools, MCP ones included)


def _dumps(value: Any) -> bytes:
    # The SDK's own JSON settings (openai._utils._json.openapi_dumps).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class ToolsJson:
    """Each tool's JSON, encoded on first use and reused (least recently used dropped).

    A tool is known by its name, its description and the identity of its schema
    object; the entry keeps that object alive, so the identity cannot be reused by
    another schema while the entry exists. A tool whose description changes (one
    that lists the current agents, say) is simply a new entry.
    """

    def __init__(self, key: ToolKey, entries: int = _ENTRIES):
        self._key = key
        self._entries = entries
        self._cache: OrderedDict[tuple[str, str, int], tuple[object, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def encode(self, tools: list[dict[str, Any]]) -> bytes:
        """The JSON array of `tools`."""
        parts: list[bytes] = []
        for tool in tools:
            name, description, schema = self._key(tool)
            key = (name, description, id(schema))
            hit = self._cache.get(key)
            if hit is not None and hit[0] is schema:
                self._cache.move_to_end(key)
                parts.append(hit[1])
                continue
            encoded = _dumps(tool)
            self._cache[key] = (schema, encoded)
            if len(self._cache) > self._entries:
                self._cache.popitem(last=False)
            parts.append(encoded)
        return b"[" + b",".join(parts) + b"]"


def encode_body(params: dict[str, Any], tools: ToolsJson) -> bytes:
    """The JSON request body of `params`, its `tools` array from the cache (sent last)."""
    offered = params.get("tools")
    if not offered:
        return _dumps(params)
    rest = _dumps({k: v for k, v in params.items() if k != "tools"})
    return rest[:-1] + b',"tools":' + tools.encode(offered) + b"}"


def _open_stream(
    client: AsyncOpenAI, path: str, body: bytes, cast_to: type[object], stream_cls: type[_S]
) -> Awaitable[_S]:
    """`client.post` as `create(stream=True, ...)` calls it for `path`: the same options
    (the bearer key only, a fresh dict each call: the SDK keeps it in the request's
    options), the body already encoded."""
    return client.post(
        path,
        content=body,
        cast_to=cast_to,
        stream=True,
        stream_cls=stream_cls,
        options={"security": {"bearer_auth": True}},
    )


def open_chat_stream(client: AsyncOpenAI, body: bytes) -> Awaitable[AsyncStream[object]]:
    """`chat.completions.create(stream=True, ...)` with a body already encoded.

    The SDK's own stream (its SSE parsing, its APIError for an error event)
    yields each chunk's JSON object: `object` tells it not to build an
    unvalidated `ChatCompletionChunk` model of each, the next biggest cost
    after the walk; ChatAssembler reads the JSON.
    """
    from openai import AsyncStream

    return _open_stream(client, "/chat/completions", body, object, AsyncStream[object])


def open_responses_stream(
    client: AsyncOpenAI, body: bytes
) -> Awaitable[AsyncStream[ResponseStreamEvent]]:
    """`responses.create(stream=True, ...)` with a body already encoded: the same path,
    options, response and event types `create` uses."""
    from openai import AsyncStream
    from openai.types.responses import Response, ResponseStreamEvent

    return _open_stream(client, "/responses", body, Response, AsyncStream[ResponseStreamEvent])
