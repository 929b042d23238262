"""A scripted fake model server that speaks the real model wire protocols.

It serves OpenAI Chat Completions (``POST /v1/chat/completions``), the OpenAI
Responses API (``POST /v1/responses``) and Anthropic Messages
(``POST /v1/messages``), streamed and not, Gemini's streamGenerateContent
(``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``, tests/fakes/gemini_wire.py)
over aiohttp on 127.0.0.1, and
OpenAI embeddings (``POST /v1/embeddings``, float or base64). Each
test queues the replies it wants with :meth:`FakeModelServer.script`; the real
``openai`` and ``anthropic`` SDKs (and our adapters on top of them) parse what
it sends exactly as they parse the real services.

Shapes follow the installed SDKs (openai 3.57, anthropic 2.14): every field
their models require is present, events come in the order the real services
send them, and errors use each API's real error body, so the SDKs raise their
real exception classes.

Token counts in :class:`Reply` are neutral: ``input_tokens`` is the uncached
input. Anthropic reports the four numbers as they are; the OpenAI APIs report
``prompt_tokens``/``input_tokens`` as input + cache reads + cache writes, with
the cached parts in the details object, as OpenAI defines them.

Usage::

    async with FakeModelServer() as server:
        server.script(Reply(text="hi", tool_calls=[ToolCall("read", {"path": "a"})]))
        client = openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key="k", max_retries=0)
        ...
        assert server.requests[0].api_key == "k"
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import math
import re
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from tests.fakes import gemini_wire
from tests.fakes.loopback import serve_on_loopback
from tests.fakes.wire_shapes import anthropic_problem, chat_problem, responses_problem

__all__ = [
    "API_NAMES",
    "Drop",
    "Fail",
    "FakeModelServer",
    "RecordedRequest",
    "Reply",
    "ToolCall",
    "WebFetch",
    "WebSearch",
    "fake_embedding",
    "fake_encrypted_content",
    "fake_signature",
]

API_NAMES: tuple[str, ...] = ("chat", "responses", "anthropic", "gemini")
"""The per-API queue names accepted by :meth:`FakeModelServer.script`."""

NO_SCRIPT_MESSAGE = "fake model server: no scripted reply"

# Request bodies of long conversations are big; aiohttp's 1 MiB default would
# answer 413 long before any real provider does.
_MAX_REQUEST_BYTES = 64 * 1024 * 1024


@dataclass
class ToolCall:
    """One tool call the model makes; ``id`` is generated per API when None.

    ``toolset`` (Anthropic) makes it a call of a toolset member, as the computer toolset
    sends them: ``name`` is the member and the block carries ``toolset_name``."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None
    toolset: str | None = None


@dataclass
class WebSearch:
    """A hosted web search the model runs: its query and the (title, url) results."""

    query: str
    results: list[tuple[str, str]] = field(
        default_factory=lambda: [("Example Domain", "https://example.com/")]
    )


@dataclass
class WebFetch:
    """A hosted web fetch the model runs: the page's URL and its text."""

    url: str
    text: str = "Example page text."
    title: str = "Example page"


@dataclass
class Reply:
    """One successful model reply.

    ``thinking`` becomes an Anthropic thinking block with a signature, a
    Responses reasoning item (summary text, plus ``encrypted_content`` when
    the request includes ``reasoning.encrypted_content``, as the real API
    does) and a ``reasoning_content`` field in Chat Completions (the field
    OpenAI-compatible reasoning servers use; OpenAI's SDK ignores it).
    ``stop_reason`` overrides the default stop; "max_tokens", "length" and
    "max_output_tokens" map to each API's own spelling of a length stop, any
    other value is sent as it is (Anthropic's "pause_turn" among them).

    ``web`` are the provider's hosted web tool uses, before the text: Anthropic
    server_tool_use blocks (input streamed as input_json_delta) each followed by
    its web_search_tool_result or web_fetch_tool_result block, counted in the
    usage's ``server_tool_use``; Responses web_search_call items (a fetch is an
    ``open_page`` action). ``citations`` are the (url, title) pairs the text
    cites: Anthropic citations_delta events on the text block (web search result
    locations), Responses url_citation annotations.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    chunk_size: int = 8
    stop_reason: str | None = None
    web: list[WebSearch | WebFetch] = field(default_factory=list)
    citations: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"Reply.chunk_size must be at least 1, got {self.chunk_size}")
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"Reply.{name} must not be negative, got {getattr(self, name)}")


@dataclass
class Fail:
    """An error reply with the API's real error body.

    ``kind`` picks the body: "context_overflow", "overloaded", "rate_limit",
    "auth", "billing"; empty or anything else gives the generic error of
    ``status``. ``message`` replaces the body's message text.
    """

    status: int
    kind: str = ""
    retry_after: float | None = None
    message: str = ""

    def __post_init__(self) -> None:
        if not 400 <= self.status <= 599:
            raise ValueError(
                f"Fail.status must be an HTTP error status (400-599), got {self.status}"
            )


@dataclass
class Drop:
    """Stream part of ``reply``, then cut the TCP connection.

    ``after_chunks`` counts content deltas (text, thinking or tool-argument
    pieces); the stream's opening events always go out and its closing events
    never do, so the cut always lands mid-stream. A non-streamed request gets
    half of its JSON body before the cut.
    """

    reply: Reply
    after_chunks: int = 2

    def __post_init__(self) -> None:
        if self.after_chunks < 0:
            raise ValueError(f"Drop.after_chunks must not be negative, got {self.after_chunks}")


ScriptItem = Reply | Fail | Drop


@dataclass
class RecordedRequest:
    """One request the server received.

    ``headers`` has lower-case names; ``json`` is the parsed body (None when
    there was none or it was not JSON); ``time`` is ``time.perf_counter()``
    on arrival, comparable with the values given to ``on_chunk``.
    """

    api: str
    path: str
    headers: dict[str, str]
    json: Any
    time: float

    @property
    def api_key(self) -> str | None:
        """The key the client sent, from ``x-api-key``, ``x-goog-api-key`` or a Bearer
        ``Authorization``."""
        for name in ("x-api-key", "x-goog-api-key"):
            if name in self.headers:
                return self.headers[name]
        auth = self.headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token:
            return token.strip()
        return None

    @property
    def stream(self) -> bool:
        """Whether the request asked for a streamed reply."""
        return isinstance(self.json, dict) and self.json.get("stream") is True


def fake_signature(thinking: str) -> str:
    """The signature the server puts on an Anthropic thinking block for ``thinking``."""
    digest = hashlib.sha256(b"fake-anthropic-thinking\0" + thinking.encode()).digest()
    return base64.b64encode(b"fakesig" + digest).decode()


_WORD = re.compile(r"[a-z0-9]+")
# Words too common to carry meaning: without this, every English sentence would be
# "close" to every other through "the" and "and".
_STOPWORDS = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "by", "do", "does", "for", "from"),
        *("has", "have", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or"),
        *("that", "the", "this", "to", "was", "we", "what", "when", "where", "which", "who"),
        *("why", "will", "with", "you", "your"),
    }
)


def fake_embedding(
    text: str, model: str, dims: int, meanings: dict[str, str] | None = None
) -> list[float]:
    """The unit vector the server answers for ``text``: a signed bag of words.

    Each word (lower-cased, stop words dropped) adds +1 or -1 to one of ``dims``
    dimensions, both picked by a hash of the model and the word, so texts sharing
    words are close, unrelated texts are near-orthogonal and each model has its own
    space. ``meanings`` maps a word to another it stands for (see
    :meth:`FakeModelServer.same_meaning`): such words land on the same dimension.
    """
    vector = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        concept = (meanings or {}).get(word, word)
        digest = hashlib.sha256(f"{model}\0{concept}".encode()).digest()
        index = int.from_bytes(digest[:4], "little") % dims
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        # A text of stop words only still gets a valid unit vector.
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]


def fake_encrypted_content(thinking: str) -> str:
    """The ``encrypted_content`` the server puts on a Responses reasoning item."""
    return base64.b64encode(b"fake-encrypted-reasoning\0" + thinking.encode()).decode()


# --- shared helpers --------------------------------------------------------

_EventKind = Literal["head", "delta", "end"]


@dataclass(frozen=True)
class _Event:
    """One server-sent event, already encoded.

    ``kind`` drives Drop: "delta" events carry content and are counted,
    "end" events finish the reply and are never sent when dropping.
    """

    data: bytes
    kind: _EventKind = "head"


def _sse(payload: Any, event: str | None = None, kind: _EventKind = "head") -> _Event:
    line = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return _Event(f"{prefix}data: {line}\n\n".encode(), kind)


def _split_text(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _split_arguments(arguments: str, chunk_size: int) -> list[str]:
    # At least three pieces whenever the string allows, so short arguments
    # still exercise the client's assembly of partial JSON.
    size = max(1, min(chunk_size, math.ceil(len(arguments) / 3)))
    return _split_text(arguments, size)


def _arguments_json(call: ToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


def _total_input(reply: Reply) -> int:
    return reply.input_tokens + reply.cache_read_tokens + reply.cache_write_tokens


_LENGTH_STOPS = frozenset({"max_tokens", "length", "max_output_tokens"})


def _chat_finish_reason(reply: Reply) -> str:
    if reply.stop_reason is None:
        return "tool_calls" if reply.tool_calls else "stop"
    if reply.stop_reason in _LENGTH_STOPS:
        return "length"
    return {"end_turn": "stop", "tool_use": "tool_calls"}.get(reply.stop_reason, reply.stop_reason)


def _anthropic_stop_reason(reply: Reply) -> str:
    if reply.stop_reason is None:
        return "tool_use" if reply.tool_calls else "end_turn"
    if reply.stop_reason in _LENGTH_STOPS:
        return "max_tokens"
    return {"stop": "end_turn", "tool_calls": "tool_use"}.get(reply.stop_reason, reply.stop_reason)


def _responses_incomplete_reason(reply: Reply) -> str | None:
    """None when the response completes, else its ``incomplete_details.reason``."""
    stop = reply.stop_reason
    if stop is None or stop in {"stop", "end_turn", "tool_calls", "tool_use", "completed"}:
        return None
    if stop in _LENGTH_STOPS:
        return "max_output_tokens"
    if stop in {"content_filter", "refusal"}:
        return "content_filter"
    return stop


def _mask_key(key: str | None) -> str:
    if not key:
        return "<none>"
    if len(key) <= 8:
        return "*" * len(key)
    return f"{key[:3]}{'*' * (len(key) - 7)}{key[-4:]}"


# --- error bodies ------------------------------------------------------------

_KINDS_BY_STATUS = {
    401: "auth",
    402: "billing",
    429: "rate_limit",
    503: "overloaded",
    529: "overloaded",
}


def _error_kind(fail: Fail) -> str:
    if fail.kind in {"context_overflow", "overloaded", "rate_limit", "auth", "billing"}:
        return fail.kind
    return _KINDS_BY_STATUS.get(fail.status, "")


def _openai_error(fail: Fail, api: str, key: str | None) -> dict[str, Any]:
    """OpenAI's error body for ``fail`` (both OpenAI APIs share the shape)."""
    kind = _error_kind(fail)
    param: str | None = None
    if kind == "context_overflow":
        param = "messages" if api == "chat" else "input"
        message = (
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 131072 tokens. Please reduce the length of the messages."
            if api == "chat"
            else "Your input exceeds the context window of this model. "
            "Please adjust your input and try again."
        )
        err_type, code = "invalid_request_error", "context_length_exceeded"
    elif kind == "rate_limit":
        message = (
            "Rate limit reached for gpt-fake in organization org-fake on tokens per min (TPM): "
            "Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s. Visit "
            "https://platform.openai.com/account/rate-limits to learn more."
        )
        err_type, code = "tokens", "rate_limit_exceeded"
    elif kind == "billing":
        message = (
            "You exceeded your current quota, please check your plan and billing details. For "
            "more information on this error, read the docs: "
            "https://platform.openai.com/docs/guides/error-codes/api-errors."
        )
        err_type, code = "insufficient_quota", "insufficient_quota"
    elif kind == "auth":
        message = (
            f"Incorrect API key provided: {_mask_key(key)}. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        err_type, code = "invalid_request_error", "invalid_api_key"
    elif kind == "overloaded":
        message = "The engine is currently overloaded, please try again later."
        err_type, code = "server_error", "server_overloaded"
    elif fail.status >= 500:
        message = (
            "The server had an error while processing your request. Sorry about that! "
            "You can retry your request."
        )
        err_type, code = "server_error", "server_error"
    else:
        message = f"Invalid request (fake model server generic {fail.status} error)."
        err_type, code = "invalid_request_error", None
    return {
        "error": {
            "message": fail.message or message,
            "type": err_type,
            "param": param,
            "code": code,
        }
    }


_ANTHROPIC_TYPES_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _anthropic_error(fail: Fail, request_id: str) -> dict[str, Any]:
    """Anthropic's error body for ``fail``."""
    kind = _error_kind(fail)
    if kind == "context_overflow":
        err_type, message = (
            "invalid_request_error",
            "prompt is too long: 208310 tokens > 200000 maximum",
        )
    elif kind == "overloaded":
        err_type, message = "overloaded_error", "Overloaded"
    elif kind == "rate_limit":
        err_type = "rate_limit_error"
        message = (
            "This request would exceed the rate limit for your organization of 50,000 input "
            "tokens per minute. For details, refer to: "
            "https://docs.claude.com/en/api/rate-limits."
        )
    elif kind == "auth":
        err_type, message = "authentication_error", "invalid x-api-key"
    elif kind == "billing":
        # The real API answers a spent balance with a 400 invalid_request_error;
        # billing_error is its type for 402.
        err_type = "billing_error" if fail.status == 402 else "invalid_request_error"
        message = (
            "Your credit balance is too low to access the Anthropic API. Please go to "
            "Plans & Billing to upgrade or purchase credits."
        )
    else:
        default = "api_error" if fail.status >= 500 else "invalid_request_error"
        err_type = _ANTHROPIC_TYPES_BY_STATUS.get(fail.status, default)
        message = "Internal server error" if fail.status >= 500 else "Invalid request"
    return {
        "type": "error",
        "error": {"type": err_type, "message": fail.message or message},
        "request_id": request_id,
    }


# --- the server ------------------------------------------------------------


class FakeModelServer:
    """A scripted model server on 127.0.0.1 for tests.

    Queue replies with :meth:`script`; each POST to a model endpoint takes
    the next item from its API's own queue, or else from the shared queue.
    With both empty it answers 500 with a body saying
    "fake model server: no scripted reply", so a missing script fails loudly.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.on_chunk: Callable[[float], None] | None = None
        # Asked when nothing is queued: a reply chosen from the request itself, as a
        # model reads its prompt, for tests where several sessions call at once in an
        # order no queue can foresee (None: answer 500 "no scripted reply").
        self.responder: Callable[[RecordedRequest], ScriptItem | None] | None = None
        self.models: list[str] = ["gpt-fake", "gpt-fake-mini", "claude-fake"]
        # When set, GET /v1/models answers 401 (each API's real body) to any other key,
        # as the real services do: what a key check before saving relies on.
        self.valid_keys: set[str] | None = None
        # Models that take no images: a request with one gets the API's own 400 for a
        # text-only model (the conversation's shape is checked for every model:
        # wire_shapes.py).
        self.blind_models: set[str] = set()
        self._shared: deque[ScriptItem] = deque()
        self._queues: dict[str, deque[ScriptItem]] = {name: deque() for name in API_NAMES}
        # Embeddings answer without a script (see fake_embedding); failures are queued
        # apart, so a background embedding never takes a chat test's scripted reply.
        self.embedding_dims = 256  # wide enough that unrelated words rarely collide
        self._embedding_fails: deque[Fail] = deque()
        self._meanings: dict[str, str] = {}
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._ids = itertools.count(1)
        # An API whose event is here holds every answer until the event is set (a test
        # sees several requests arrive before any is answered: they ran in parallel).
        self.gates: dict[str, asyncio.Event] = {}
        # Models that answer 400 to a request declaring a hosted web tool, as the real
        # APIs answer for a model without them.
        self.no_hosted_tools: set[str] = set()
        # The thought signatures the Gemini wire issued (a Gemini 3 request must replay them).
        self.gemini_signatures: set[str] = set()

    # -- lifecycle --

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        if self._runner is not None:
            raise RuntimeError("FakeModelServer.start: the server is already running")
        app = web.Application(client_max_size=_MAX_REQUEST_BYTES)
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/v1/responses", self._handle_responses)
        app.router.add_post("/v1/messages", self._handle_anthropic)
        app.router.add_post("/v1beta/models/{target}", self._handle_gemini)
        app.router.add_get("/v1beta/models", self._handle_gemini_models)
        app.router.add_post("/v1/embeddings", self._handle_embeddings)
        app.router.add_get("/v1/models", self._handle_models)
        self._runner, self._port = await serve_on_loopback(app)

    async def close(self) -> None:
        """Stop listening and drop open connections; safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> FakeModelServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``; the OpenAI SDK wants ``f"{base_url}/v1"``."""
        if self._port is None:
            raise RuntimeError("FakeModelServer.base_url: call start() first")
        return f"http://127.0.0.1:{self._port}"

    # -- scripting --

    def script(self, *items: ScriptItem, api: str | None = None) -> None:
        """Queue replies: for any endpoint (``api=None``) or one API's endpoint only."""
        for item in items:
            if not isinstance(item, Reply | Fail | Drop):
                raise TypeError(
                    f"FakeModelServer.script: expected Reply, Fail or Drop, got {item!r}"
                )
        if api is None:
            self._shared.extend(items)
        elif api in self._queues:
            self._queues[api].extend(items)
        else:
            raise ValueError(
                f"FakeModelServer.script: unknown api {api!r}; use None or one of {API_NAMES}"
            )

    def pending(self, api: str | None = None) -> int:
        """How many scripted items are still queued (shared queue for None)."""
        if api is None:
            return len(self._shared)
        if api not in self._queues:
            raise ValueError(
                f"FakeModelServer.pending: unknown api {api!r}; use None or one of {API_NAMES}"
            )
        return len(self._queues[api])

    def fail_embeddings(self, *fails: Fail) -> None:
        """Queue failures for the next ``POST /v1/embeddings`` requests, one each."""
        for fail in fails:
            if not isinstance(fail, Fail):
                raise TypeError(f"FakeModelServer.fail_embeddings: expected Fail, got {fail!r}")
        self._embedding_fails.extend(fails)

    def same_meaning(self, *words: str) -> None:
        """Make ``words`` embed alike (each stands for the first), as synonyms do in a
        real model, so a test can find a note by meaning without a shared word."""
        if len(words) < 2:
            raise ValueError("FakeModelServer.same_meaning: give at least two words")
        head = words[0].lower()
        for word in words[1:]:
            self._meanings[word.lower()] = head

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/embeddings`` requests received, oldest first."""
        return [r for r in self.requests if r.api == "embeddings"]

    def _next_item(self, api: str, recorded: RecordedRequest) -> ScriptItem | None:
        own = self._queues[api]
        if own:
            return own.popleft()
        if self._shared:
            return self._shared.popleft()
        if self.responder is not None:
            return self.responder(recorded)
        return None

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}fake{next(self._ids):020d}"

    # -- request plumbing --

    async def _record(self, request: web.Request, api: str) -> RecordedRequest:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        recorded = RecordedRequest(
            api=api,
            path=request.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            json=body,
            time=time.perf_counter(),
        )
        self.requests.append(recorded)
        gate = self.gates.get(api)
        if gate is not None:
            await gate.wait()
        return recorded

    async def _write_stream(
        self,
        request: web.Request,
        events: list[_Event],
        headers: dict[str, str],
        drop_after: int | None,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                **headers,
            },
        )
        await resp.prepare(request)
        sent = 0
        try:
            for event in events:
                if drop_after is not None and (
                    event.kind == "end" or (event.kind == "delta" and sent >= drop_after)
                ):
                    _cut(request)
                    return resp
                if self.on_chunk is not None:
                    self.on_chunk(time.perf_counter())
                await resp.write(event.data)
                if event.kind == "delta":
                    sent += 1
            await resp.write_eof()
        except ConnectionError:
            # The client went away (a test abandoned the stream); nothing to do.
            pass
        return resp

    async def _write_json(
        self,
        request: web.Request,
        body: dict[str, Any],
        headers: dict[str, str],
        drop: bool,
    ) -> web.StreamResponse:
        if not drop:
            return web.json_response(body, headers=headers)
        data = json.dumps(body).encode()
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json", **headers}
        )
        resp.content_length = len(data)
        await resp.prepare(request)
        await resp.write(data[: len(data) // 2])
        _cut(request)
        return resp

    def _openai_headers(self) -> dict[str, str]:
        return {"x-request-id": self._new_id("req_"), "openai-processing-ms": "1"}

    def _anthropic_headers(self) -> dict[str, str]:
        return {"request-id": self._new_id("req_")}

    def _fail_headers(self, fail: Fail, base: dict[str, str]) -> dict[str, str]:
        headers = dict(base)
        if fail.retry_after is not None:
            value = fail.retry_after
            headers["Retry-After"] = str(int(value)) if value == int(value) else str(value)
        return headers

    # -- OpenAI Chat Completions --

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request, "chat")
        headers = self._openai_headers()
        body = recorded.json
        problem = _openai_request_problem(body, ("model", "messages"))
        if problem is None:
            problem = chat_problem(body, self.blind_models)
        if problem:
            return web.json_response(_openai_invalid(problem), status=400, headers=headers)
        item = self._next_item("chat", recorded)
        if item is None:
            return web.json_response(_openai_no_script(request), status=500, headers=headers)
        if isinstance(item, Fail):
            return web.json_response(
                _openai_error(item, "chat", recorded.api_key),
                status=item.status,
                headers=self._fail_headers(item, headers),
            )
        reply, drop_after = _unwrap(item)
        model = str(body["model"])
        created = int(time.time())
        completion_id = self._new_id("chatcmpl-")
        tool_ids = [call.id or self._new_id("call_") for call in reply.tool_calls]
        if not recorded.stream:
            completion = _chat_completion(reply, model, created, completion_id, tool_ids)
            return await self._write_json(request, completion, headers, drop_after is not None)
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        events = _chat_events(reply, model, created, completion_id, tool_ids, include_usage)
        return await self._write_stream(request, events, headers, drop_after)

    # -- OpenAI Responses --

    async def _handle_responses(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request, "responses")
        headers = self._openai_headers()
        body = recorded.json
        problem = _openai_request_problem(body, ("model",))
        if problem is None:
            problem = responses_problem(body, self.blind_models)
        hosted = problem is None and any(
            t.get("type") == "web_search" for t in body.get("tools") or []
        )
        if hosted and str(body["model"]) in self.no_hosted_tools:
            problem = f"Tool 'web_search' is not supported with {body['model']}."
        if problem:
            return web.json_response(_openai_invalid(problem), status=400, headers=headers)
        item = self._next_item("responses", recorded)
        if item is None:
            return web.json_response(_openai_no_script(request), status=500, headers=headers)
        if isinstance(item, Fail):
            return web.json_response(
                _openai_error(item, "responses", recorded.api_key),
                status=item.status,
                headers=self._fail_headers(item, headers),
            )
        reply, drop_after = _unwrap(item)
        include = body.get("include")
        plan = _ResponsesPlan(
            reply=reply,
            request=body,
            response_id=self._new_id("resp_"),
            created_at=time.time(),
            reasoning_id=self._new_id("rs_"),
            message_id=self._new_id("msg_"),
            calls=[
                (self._new_id("fc_"), call.id or self._new_id("call_"), call)
                for call in reply.tool_calls
            ],
            searches=[(self._new_id("ws_"), use) for use in reply.web],
            encrypted=isinstance(include, list) and "reasoning.encrypted_content" in include,
        )
        if not recorded.stream:
            return await self._write_json(
                request, plan.response("final"), headers, drop_after is not None
            )
        return await self._write_stream(request, plan.events(), headers, drop_after)

    # -- Anthropic Messages --

    async def _handle_anthropic(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request, "anthropic")
        headers = self._anthropic_headers()
        body = recorded.json
        betas = {b.strip() for b in recorded.headers.get("anthropic-beta", "").split(",")}
        problem = _anthropic_request_problem(body, self.no_hosted_tools, betas)
        if problem is None:
            problem = anthropic_problem(body, self.blind_models)
        if problem:
            return web.json_response(
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": problem},
                    "request_id": headers["request-id"],
                },
                status=400,
                headers=headers,
            )
        item = self._next_item("anthropic", recorded)
        if item is None:
            return web.json_response(
                {
                    "type": "error",
                    "error": {
                        "type": "api_error",
                        "message": f"{NO_SCRIPT_MESSAGE} for {request.method} {request.path}",
                    },
                    "request_id": headers["request-id"],
                },
                status=500,
                headers=headers,
            )
        if isinstance(item, Fail):
            return web.json_response(
                _anthropic_error(item, headers["request-id"]),
                status=item.status,
                headers=self._fail_headers(item, headers),
            )
        reply, drop_after = _unwrap(item)
        model = str(body["model"])
        message_id = self._new_id("msg_")
        tool_ids = [call.id or self._new_id("toolu_") for call in reply.tool_calls]
        server_ids = [self._new_id("srvtoolu_") for _ in reply.web]
        if not recorded.stream:
            message = _anthropic_message(reply, model, message_id, tool_ids, server_ids)
            return await self._write_json(request, message, headers, drop_after is not None)
        events = _anthropic_events(reply, model, message_id, tool_ids, server_ids)
        return await self._write_stream(request, events, headers, drop_after)

    # -- Gemini --

    async def _handle_gemini(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request, "gemini")
        model, _, method = request.match_info["target"].partition(":")
        headers = {"x-goog-request-id": self._new_id("")}
        if method != "streamGenerateContent" or request.query.get("alt") != "sse":
            body = gemini_wire.error_body(404, f"{request.path} is not served by this fake")
            return web.json_response(body, status=404, headers=headers)
        problem = gemini_wire.request_problem(recorded.json, model, self.gemini_signatures)
        if problem:
            return web.json_response(problem, status=400, headers=headers)
        item = self._next_item("gemini", recorded)
        if item is None:
            body = gemini_wire.error_body(500, f"{NO_SCRIPT_MESSAGE} for POST {request.path}")
            return web.json_response(body, status=500, headers=headers)
        if isinstance(item, Fail):
            body = gemini_wire.fail_body(item.status, item.kind, item.retry_after, item.message)
            return web.json_response(body, status=item.status, headers=headers)
        reply, drop_after = _unwrap(item)
        plan = gemini_wire.GeminiPlan(
            model=model,
            response_id=self._new_id(""),
            text=reply.text,
            thinking=reply.thinking,
            calls=[(call.name, call.arguments) for call in reply.tool_calls],
            input_tokens=reply.input_tokens + reply.cache_write_tokens,
            cached_tokens=reply.cache_read_tokens,
            output_tokens=reply.output_tokens,
            chunk_size=reply.chunk_size,
            stop=gemini_wire.finish_reason(reply.stop_reason),
            signs=gemini_wire.signs(model, recorded.json),
            include_thoughts=gemini_wire.includes_thoughts(recorded.json),
        )
        events = [
            _Event(gemini_wire.sse(event), "delta" if delta else "end")
            for event, delta in plan.events()
        ]
        self.gemini_signatures.update(plan.issued)
        return await self._write_stream(request, events, headers, drop_after)

    async def _handle_gemini_models(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request, "models")
        if self.valid_keys is not None and recorded.api_key not in self.valid_keys:
            body = gemini_wire.fail_body(400, "auth", None, "")
            return web.json_response(body, status=400)
        models = [
            {"name": f"models/{model}", "displayName": model, "version": "001"}
            for model in self.models
        ]
        return web.json_response({"models": models})

    # -- OpenAI embeddings --

    async def _handle_embeddings(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request, "embeddings")
        headers = self._openai_headers()
        body = recorded.json
        problem = _openai_request_problem(body, ("model", "input"))
        if problem is None:
            problem = _embedding_input_problem(body)
        if problem:
            return web.json_response(_openai_invalid(problem), status=400, headers=headers)
        if self._embedding_fails:
            fail = self._embedding_fails.popleft()
            return web.json_response(
                _openai_error(fail, "embeddings", recorded.api_key),
                status=fail.status,
                headers=self._fail_headers(fail, headers),
            )
        texts = [body["input"]] if isinstance(body["input"], str) else list(body["input"])
        model = str(body["model"])
        dims = body.get("dimensions")
        dims = dims if isinstance(dims, int) and dims > 0 else self.embedding_dims
        encoding = body.get("encoding_format", "float")
        data: list[dict[str, Any]] = []
        tokens = 0
        for index, text in enumerate(texts):
            vector = fake_embedding(text, model, dims, self._meanings)
            tokens += max(1, len(text.split()))
            embedding: Any = vector
            if encoding == "base64":
                # What the real API sends: the little-endian float32 bytes, base64.
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding = base64.b64encode(packed).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
            headers=headers,
        )

    # -- model list --

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        # One path serves both SDKs; the Anthropic SDK always sends its
        # version header, so that picks the shape.
        recorded = await self._record(request, "models")
        anthropic = "anthropic-version" in recorded.headers
        if self.valid_keys is not None and recorded.api_key not in self.valid_keys:
            fail = Fail(401, "auth")
            if anthropic:
                body = _anthropic_error(fail, self._new_id("req_"))
                return web.json_response(body, status=401, headers=self._anthropic_headers())
            body = _openai_error(fail, "chat", recorded.api_key)
            return web.json_response(body, status=401, headers=self._openai_headers())
        if anthropic:
            data = [
                {
                    "type": "model",
                    "id": model,
                    "display_name": model,
                    "created_at": "2026-01-01T00:00:00Z",
                    "lifecycle": "active",
                }
                for model in self.models
            ]
            return web.json_response(
                {
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                },
                headers=self._anthropic_headers(),
            )
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": model, "object": "model", "created": 1767225600, "owned_by": "fake"}
                    for model in self.models
                ],
            },
            headers=self._openai_headers(),
        )


def _cut(request: web.Request) -> None:
    # close() (not abort()) flushes what was already written, so the client
    # really receives the deltas before the connection ends.
    transport = request.transport
    if transport is not None:
        transport.close()


def _unwrap(item: Reply | Drop) -> tuple[Reply, int | None]:
    if isinstance(item, Drop):
        return item.reply, item.after_chunks
    return item, None


def _openai_request_problem(body: Any, required: tuple[str, ...]) -> str | None:
    if not isinstance(body, dict):
        return (
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)"
        )
    for name in required:
        if name not in body:
            return f"Missing required parameter: '{name}'."
    return None


_BAD_INPUT = (
    "'$.input' is invalid. Please check the API reference: "
    "https://platform.openai.com/docs/api-reference."
)


def _embedding_input_problem(body: dict[str, Any]) -> str | None:
    """The real API's complaint about ``input`` and ``encoding_format``, or None."""
    value = body["input"]
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts:
        return _BAD_INPUT
    for text in texts:
        if not isinstance(text, str) or not text:
            return _BAD_INPUT
    if len(texts) > 2048:
        return "'$.input' is too long: at most 2048 inputs per request."
    encoding = body.get("encoding_format", "float")
    if encoding not in {"float", "base64"}:
        return f"Invalid value: '{encoding}'. Supported values are: 'float' and 'base64'."
    return None


def _openai_invalid(message: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def _openai_no_script(request: web.Request) -> dict[str, Any]:
    return {
        "error": {
            "message": f"{NO_SCRIPT_MESSAGE} for {request.method} {request.path}",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


def _anthropic_request_problem(
    body: Any, no_hosted_tools: set[str], betas: set[str] | None = None
) -> str | None:
    if not isinstance(body, dict):
        return "There was an error parsing the body of your request as JSON."
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    messages = body["messages"]
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, dict) and last.get("role") == "assistant":
        content = last.get("content")
        final = content[-1] if isinstance(content, list) and content else None
        text = content if isinstance(content, str) else None
        if isinstance(final, dict) and final.get("type") == "text":
            text = final.get("text")
        if isinstance(text, str) and text != text.rstrip():
            return "messages: final assistant content cannot end with trailing whitespace"
    tools = body.get("tools") or []
    names = [t.get("name") for t in tools if isinstance(t, dict) and "name" in t]
    if len(names) != len(set(names)):
        return "tools: Tool names must be unique."
    for index, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind in _ANTHROPIC_SERVER_TOOLS and body["model"] in no_hosted_tools:
            return f"tools.{index}: '{kind}' is not supported for model '{body['model']}'"
        beta = _ANTHROPIC_BETA_TOOLS.get(str(kind))
        if beta is not None and beta not in (betas or set()):
            return f"tools.{index}: '{kind}' requires the beta header 'anthropic-beta: {beta}'"
        if kind in _ANTHROPIC_BETA_TOOLS and not (
            isinstance(tool.get("display_width_px"), int)
            and isinstance(tool.get("display_height_px"), int)
        ):
            return f"tools.{index}.{kind}.display_width_px: Field required"
    return _anthropic_toolset_problem(messages)


def _anthropic_toolset_problem(messages: Any) -> str | None:
    """A toolset member's tool_result must echo the toolset_name of its tool_use."""
    toolsets: dict[Any, Any] = {}
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for position, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and block.get("toolset_name"):
                toolsets[block.get("id")] = block["toolset_name"]
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in toolsets:
                wanted = toolsets[block.get("tool_use_id")]
                if block.get("toolset_name") != wanted:
                    return (
                        f"messages.{index}.content.{position}: the tool_result of a "
                        f"'{wanted}' toolset tool_use must have toolset_name '{wanted}'"
                    )
    return None


_ANTHROPIC_SERVER_TOOLS = frozenset({"web_search_20250305", "web_fetch_20250910"})
# Anthropic's computer tool versions that are betas, and the flag each needs.
_ANTHROPIC_BETA_TOOLS = {
    "computer_20241022": "computer-use-2024-10-22",
    "computer_20250124": "computer-use-2025-01-24",
    "computer_20251124": "computer-use-2025-11-24",
}


# --- Chat Completions bodies -------------------------------------------------


def _chat_usage(reply: Reply) -> dict[str, Any]:
    prompt = _total_input(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": reply.output_tokens,
        "total_tokens": prompt + reply.output_tokens,
        "prompt_tokens_details": {
            "cached_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_completion(
    reply: Reply, model: str, created: int, completion_id: str, tool_ids: list[str]
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        # OpenAI sends null content when the model only called tools.
        "content": reply.text if reply.text or not reply.tool_calls else None,
        "refusal": None,
        "annotations": [],
    }
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments_json(call)},
            }
            for call_id, call in zip(tool_ids, reply.tool_calls, strict=True)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _chat_finish_reason(reply),
            }
        ],
        "usage": _chat_usage(reply),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _chat_events(
    reply: Reply,
    model: str,
    created: int,
    completion_id: str,
    tool_ids: list[str],
    include_usage: bool,
) -> list[_Event]:
    def chunk(delta: dict[str, Any], kind: _EventKind, finish: str | None = None) -> _Event:
        payload: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            # With include_usage every chunk carries "usage": null until the last.
            payload["usage"] = None
        return _sse(payload, kind=kind)

    events = [chunk({"role": "assistant", "content": "", "refusal": None}, "head")]
    for piece in _split_text(reply.thinking, reply.chunk_size):
        events.append(chunk({"reasoning_content": piece}, "delta"))
    for piece in _split_text(reply.text, reply.chunk_size):
        events.append(chunk({"content": piece}, "delta"))
    for index, (call_id, call) in enumerate(zip(tool_ids, reply.tool_calls, strict=True)):
        opening = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [opening]}, "head"))
        for piece in _split_arguments(_arguments_json(call), reply.chunk_size):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, "delta")
            )
    events.append(chunk({}, "end", finish=_chat_finish_reason(reply)))
    if include_usage:
        events.append(
            _sse(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "service_tier": "default",
                    "system_fingerprint": "fp_fake",
                    "choices": [],
                    "usage": _chat_usage(reply),
                },
                kind="end",
            )
        )
    events.append(_Event(b"data: [DONE]\n\n", "end"))
    return events


# --- Responses bodies --------------------------------------------------------


@dataclass
class _ResponsesPlan:
    """Everything one Responses reply needs, so stream and final object agree."""

    reply: Reply
    request: dict[str, Any]
    response_id: str
    created_at: float
    reasoning_id: str
    message_id: str
    calls: list[tuple[str, str, ToolCall]]  # (item id, call_id, call)
    searches: list[tuple[str, WebSearch | WebFetch]]  # (item id, the hosted tool use)
    encrypted: bool

    @property
    def has_message(self) -> bool:
        # A reply that only calls tools has no message item; anything else
        # (even an empty answer) is one message.
        return bool(self.reply.text) or not self.reply.tool_calls

    def usage(self) -> dict[str, Any]:
        reply = self.reply
        total_in = _total_input(reply)
        return {
            "input_tokens": total_in,
            "input_tokens_details": {
                "cached_tokens": reply.cache_read_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
            },
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": total_in + reply.output_tokens,
        }

    def reasoning_item(self, done: bool) -> dict[str, Any]:
        item: dict[str, Any] = {"id": self.reasoning_id, "type": "reasoning", "summary": []}
        if done:
            item["summary"] = [{"type": "summary_text", "text": self.reply.thinking}]
            item["encrypted_content"] = (
                fake_encrypted_content(self.reply.thinking) if self.encrypted else None
            )
        return item

    def text_part(self, text: str) -> dict[str, Any]:
        annotations = [
            {
                "type": "url_citation",
                "start_index": 0,
                "end_index": len(text),
                "url": url,
                "title": title,
            }
            for url, title in (self.reply.citations if text else [])
        ]
        return {"type": "output_text", "annotations": annotations, "logprobs": [], "text": text}

    def search_item(self, item_id: str, use: WebSearch | WebFetch, done: bool) -> dict[str, Any]:
        action: dict[str, Any]
        if isinstance(use, WebSearch):
            action = {"type": "search", "query": use.query}
            if done:
                action["sources"] = [{"type": "url", "url": url} for _, url in use.results]
        else:
            action = {"type": "open_page", "url": use.url}
        return {
            "id": item_id,
            "type": "web_search_call",
            "status": "completed" if done else "in_progress",
            "action": action,
        }

    def message_item(self, done: bool) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "status": "completed" if done else "in_progress",
            "content": [self.text_part(self.reply.text)] if done else [],
            "role": "assistant",
        }

    def call_item(self, item_id: str, call_id: str, call: ToolCall, done: bool) -> dict[str, Any]:
        return {
            "id": item_id,
            "type": "function_call",
            "status": "completed" if done else "in_progress",
            "arguments": _arguments_json(call) if done else "",
            "call_id": call_id,
            "name": call.name,
        }

    def final_output(self) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = []
        if self.reply.thinking:
            output.append(self.reasoning_item(done=True))
        for item_id, use in self.searches:
            output.append(self.search_item(item_id, use, done=True))
        if self.has_message:
            output.append(self.message_item(done=True))
        for item_id, call_id, call in self.calls:
            output.append(self.call_item(item_id, call_id, call, done=True))
        return output

    def response(self, stage: Literal["start", "final"]) -> dict[str, Any]:
        """The Response object: as created (in progress) or as finished."""
        request = self.request
        incomplete = _responses_incomplete_reason(self.reply)
        final = stage == "final"
        status = "in_progress" if not final else "incomplete" if incomplete else "completed"
        reasoning = request.get("reasoning")
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "completed_at": time.time() if final and not incomplete else None,
            "error": None,
            "incomplete_details": {"reason": incomplete} if final and incomplete else None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"),
            "max_tool_calls": None,
            "model": str(request["model"]),
            "output": self.final_output() if final else [],
            "parallel_tool_calls": request.get("parallel_tool_calls", True),
            "previous_response_id": request.get("previous_response_id"),
            "reasoning": {
                "effort": reasoning.get("effort") if isinstance(reasoning, dict) else None,
                "summary": reasoning.get("summary") if isinstance(reasoning, dict) else None,
            },
            "service_tier": "default",
            "store": request.get("store", True),
            "temperature": request.get("temperature", 1.0),
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools", []),
            "top_p": request.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": self.usage() if final else None,
            "user": None,
            "metadata": {},
        }

    def events(self) -> list[_Event]:
        """The full SSE stream, in the real API's order."""
        events: list[_Event] = []
        seq = itertools.count()

        def emit(event_type: str, kind: _EventKind = "head", **fields: Any) -> None:
            payload = {"type": event_type, "sequence_number": next(seq), **fields}
            events.append(_sse(payload, event=event_type, kind=kind))

        reply = self.reply
        emit("response.created", response=self.response("start"))
        emit("response.in_progress", response=self.response("start"))
        index = 0
        if reply.thinking:
            ids: dict[str, Any] = {"item_id": self.reasoning_id, "output_index": index}
            emit("response.output_item.added", output_index=index, item=self.reasoning_item(False))
            emit(
                "response.reasoning_summary_part.added",
                **ids,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
            for piece in _split_text(reply.thinking, reply.chunk_size):
                emit(
                    "response.reasoning_summary_text.delta",
                    "delta",
                    **ids,
                    summary_index=0,
                    delta=piece,
                )
            emit(
                "response.reasoning_summary_text.done", **ids, summary_index=0, text=reply.thinking
            )
            emit(
                "response.reasoning_summary_part.done",
                **ids,
                summary_index=0,
                part={"type": "summary_text", "text": reply.thinking},
            )
            emit("response.output_item.done", output_index=index, item=self.reasoning_item(True))
            index += 1
        for item_id, use in self.searches:
            ids = {"item_id": item_id, "output_index": index}
            emit(
                "response.output_item.added",
                output_index=index,
                item=self.search_item(item_id, use, done=False),
            )
            emit("response.web_search_call.in_progress", **ids)
            emit("response.web_search_call.searching", **ids)
            emit("response.web_search_call.completed", **ids)
            emit(
                "response.output_item.done",
                output_index=index,
                item=self.search_item(item_id, use, done=True),
            )
            index += 1
        if self.has_message:
            text_ids: dict[str, Any] = {
                "item_id": self.message_id,
                "output_index": index,
                "content_index": 0,
            }
            emit("response.output_item.added", output_index=index, item=self.message_item(False))
            emit("response.content_part.added", **text_ids, part=self.text_part(""))
            for piece in _split_text(reply.text, reply.chunk_size):
                emit("response.output_text.delta", "delta", **text_ids, delta=piece, logprobs=[])
            emit("response.output_text.done", **text_ids, text=reply.text, logprobs=[])
            emit("response.content_part.done", **text_ids, part=self.text_part(reply.text))
            emit("response.output_item.done", output_index=index, item=self.message_item(True))
            index += 1
        for item_id, call_id, call in self.calls:
            arguments = _arguments_json(call)
            emit(
                "response.output_item.added",
                output_index=index,
                item=self.call_item(item_id, call_id, call, done=False),
            )
            for piece in _split_arguments(arguments, reply.chunk_size):
                emit(
                    "response.function_call_arguments.delta",
                    "delta",
                    item_id=item_id,
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                arguments=arguments,
            )
            emit(
                "response.output_item.done",
                output_index=index,
                item=self.call_item(item_id, call_id, call, done=True),
            )
            index += 1
        final = self.response("final")
        emit(f"response.{final['status']}", "end", response=final)
        return events


# --- Anthropic bodies --------------------------------------------------------


def _anthropic_usage(reply: Reply, output_tokens: int) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": reply.input_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }
    if reply.web:
        usage["server_tool_use"] = {
            "web_search_requests": sum(isinstance(u, WebSearch) for u in reply.web),
            "web_fetch_requests": sum(isinstance(u, WebFetch) for u in reply.web),
        }
    return usage


def _server_tool_use(use: WebSearch | WebFetch, server_id: str) -> dict[str, Any]:
    if isinstance(use, WebSearch):
        return {"type": "server_tool_use", "id": server_id, "name": "web_search", "input": {}}
    return {"type": "server_tool_use", "id": server_id, "name": "web_fetch", "input": {}}


def _server_tool_input(use: WebSearch | WebFetch) -> dict[str, Any]:
    return {"query": use.query} if isinstance(use, WebSearch) else {"url": use.url}


def _server_tool_result(use: WebSearch | WebFetch, server_id: str) -> dict[str, Any]:
    if isinstance(use, WebSearch):
        return {
            "type": "web_search_tool_result",
            "tool_use_id": server_id,
            "content": [
                {
                    "type": "web_search_result",
                    "title": title,
                    "url": url,
                    "encrypted_content": base64.b64encode(f"fake:{url}".encode()).decode(),
                    "page_age": None,
                }
                for title, url in use.results
            ],
        }
    return {
        "type": "web_fetch_tool_result",
        "tool_use_id": server_id,
        "content": {
            "type": "web_fetch_result",
            "url": use.url,
            "retrieved_at": "2026-01-01T00:00:00Z",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": use.text},
                "title": use.title,
                "citations": {"enabled": True},
            },
        },
    }


def _web_citation(url: str, title: str, text: str) -> dict[str, Any]:
    return {
        "type": "web_search_result_location",
        "cited_text": text[:150],
        "url": url,
        "title": title,
        "encrypted_index": base64.b64encode(f"idx:{url}".encode()).decode(),
    }


def _anthropic_blocks(
    reply: Reply, tool_ids: list[str], server_ids: list[str]
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.thinking:
        blocks.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": fake_signature(reply.thinking),
            }
        )
    for server_id, use in zip(server_ids, reply.web, strict=True):
        blocks.append({**_server_tool_use(use, server_id), "input": _server_tool_input(use)})
        blocks.append(_server_tool_result(use, server_id))
    if reply.text:
        text: dict[str, Any] = {"type": "text", "text": reply.text}
        if reply.citations:
            text["citations"] = [_web_citation(u, t, reply.text) for u, t in reply.citations]
        blocks.append(text)
    for call_id, call in zip(tool_ids, reply.tool_calls, strict=True):
        blocks.append(
            {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments}
            | ({"toolset_name": call.toolset} if call.toolset else {})
        )
    return blocks


def _anthropic_message(
    reply: Reply, model: str, message_id: str, tool_ids: list[str], server_ids: list[str]
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply, tool_ids, server_ids),
        "stop_reason": _anthropic_stop_reason(reply),
        "stop_sequence": None,
        "usage": _anthropic_usage(reply, reply.output_tokens),
    }


def _anthropic_events(
    reply: Reply, model: str, message_id: str, tool_ids: list[str], server_ids: list[str]
) -> list[_Event]:
    events: list[_Event] = []

    def emit(event_type: str, kind: _EventKind = "head", **fields: Any) -> None:
        events.append(_sse({"type": event_type, **fields}, event=event_type, kind=kind))

    start: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        # The real API reports one output token at the start and the total at the end.
        "usage": _anthropic_usage(reply, 1),
    }
    emit("message_start", message=start)
    emit("ping")
    index = 0
    if reply.thinking:
        emit(
            "content_block_start",
            index=index,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        )
        for piece in _split_text(reply.thinking, reply.chunk_size):
            emit(
                "content_block_delta",
                "delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": piece},
            )
        emit(
            "content_block_delta",
            index=index,
            delta={"type": "signature_delta", "signature": fake_signature(reply.thinking)},
        )
        emit("content_block_stop", index=index)
        index += 1
    for server_id, use in zip(server_ids, reply.web, strict=True):
        emit("content_block_start", index=index, content_block=_server_tool_use(use, server_id))
        for piece in _split_arguments(json.dumps(_server_tool_input(use)), reply.chunk_size):
            emit(
                "content_block_delta",
                "delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": piece},
            )
        emit("content_block_stop", index=index)
        index += 1
        # The result arrives whole: one start, no deltas.
        emit("content_block_start", index=index, content_block=_server_tool_result(use, server_id))
        emit("content_block_stop", index=index)
        index += 1
    if reply.text:
        opening: dict[str, Any] = {"type": "text", "text": ""}
        if reply.citations:
            opening["citations"] = []
        emit("content_block_start", index=index, content_block=opening)
        for url, title in reply.citations:
            citation = _web_citation(url, title, reply.text)
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "citations_delta", "citation": citation},
            )
        for piece in _split_text(reply.text, reply.chunk_size):
            emit(
                "content_block_delta",
                "delta",
                index=index,
                delta={"type": "text_delta", "text": piece},
            )
        emit("content_block_stop", index=index)
        index += 1
    for call_id, call in zip(tool_ids, reply.tool_calls, strict=True):
        emit(
            "content_block_start",
            index=index,
            content_block={"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
            | ({"toolset_name": call.toolset} if call.toolset else {}),
        )
        # The real API opens every tool input with an empty partial_json.
        emit(
            "content_block_delta",
            index=index,
            delta={"type": "input_json_delta", "partial_json": ""},
        )
        for piece in _split_arguments(_arguments_json(call), reply.chunk_size):
            emit(
                "content_block_delta",
                "delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": piece},
            )
        emit("content_block_stop", index=index)
        index += 1
    usage = _anthropic_usage(reply, reply.output_tokens)
    del usage["service_tier"]
    emit(
        "message_delta",
        "end",
        delta={"stop_reason": _anthropic_stop_reason(reply), "stop_sequence": None},
        usage=usage,
    )
    emit("message_stop", "end")
    return events
