"""The OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions, POST /v1/responses.

Each request runs an ordinary turn job. A session is continued by
X-Habakkuk-Session, by `user` (remembered in web.db per agent) or by
`previous_response_id`; otherwise a fresh session is seeded with the request's
earlier messages, system and developer messages becoming a note at the start.
`Idempotency-Key` derives the turn's id, so a client's retry attaches to the
first request's turn instead of running another. Nobody can approve calls here
(turns are unattended), and the agent uses its own tools: a request with
`tools` is refused.

Streaming follows the events bus; the job's result is the truth at the end (if
another process ran the turn, the whole reply is sent then).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from habakkuk.channels.web import web_turn_id as turn_id_for
from habakkuk.engine.events import (
    EventPayload,
    ModelReplied,
    Subscription,
    ToolCallStreamed,
    ToolStarted,
    TurnText,
)
from habakkuk.engine.llm.types import ContextBlock, Message, TextBlock

from .errors import ApiError
from .inputs import header, read_json
from .openai_requests import check_chat_request, check_responses_request
from .served import Served, json_response, server_of

MODEL_PREFIX = "habakkuk/"
NOTE_HEADER = "Notes from the client application (its system and developer messages):"


@dataclass
class Prepared:
    """A request resolved to a session and a turn."""

    agent: str
    session: str
    turn: str
    attached: bool  # the turn existed already (a retry with the same Idempotency-Key)
    model: str
    user: str | None
    previous_response_id: str | None = None


@dataclass
class Progress:
    """What the bus told us about the turn while it ran."""

    usage: dict[str, int] = field(default_factory=dict)
    streamed: str = ""


async def models(request: web.Request) -> web.Response:
    """GET /v1/models: one model per agent, habakkuk/<agent>."""
    server = server_of(request)
    created = int(server.started_at)
    data = [
        {
            "id": f"{MODEL_PREFIX}{name}",
            "object": "model",
            "created": created,
            "owned_by": "habakkuk",
        }
        for name in sorted(server.runtime.config.agents)
    ]
    return json_response({"object": "list", "data": data})


def _agent_of(server: Served, model: Any) -> str:
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model is required (habakkuk/<agent>)", param="model")
    name = model.removeprefix(MODEL_PREFIX)
    if name not in server.runtime.config.agents:
        known = ", ".join(f"{MODEL_PREFIX}{a}" for a in sorted(server.runtime.config.agents))
        raise ApiError(404, f"model {model!r} does not exist (models: {known})", param="model")
    return name


def _text_of(content: Any, where: str, kinds: tuple[str, ...]) -> str:
    """The text of a message's content: a string or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in kinds:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise ApiError(
                    400,
                    f"{where}.content[{index}]: only text parts are supported, not {kind!r}",
                    param=f"{where}.content[{index}]",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise ApiError(
                    400,
                    f"{where}.content[{index}].text must be a string",
                    param=f"{where}.content[{index}].text",
                )
            pieces.append(text)
        return "\n".join(pieces)
    raise ApiError(
        400, f"{where}.content must be a string or a list of text parts", param=f"{where}.content"
    )


def chat_messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of a Chat Completions request's messages."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    result = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} must be an object", param=where)
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant"):
            raise ApiError(
                400,
                f"{where}.role: {role!r} is not supported (system, developer, user, assistant)",
                param=f"{where}.role",
            )
        if message.get("tool_calls"):
            raise ApiError(
                400,
                f"{where}: tool calls are not supported; the agent uses its own",
                param=f"{where}.tool_calls",
            )
        result.append((role, _text_of(message.get("content"), where, ("text",))))
    return result


def response_messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of a Responses request's instructions and input."""
    result: list[tuple[str, str]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise ApiError(400, "instructions must be a string", param="instructions")
        result.append(("developer", instructions))
    items = body.get("input")
    if isinstance(items, str):
        return [*result, ("user", items)]
    if not isinstance(items, list) or not items:
        raise ApiError(400, "input must be a string or a non-empty list of messages", param="input")
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{where} must be an object", param=where)
        if item.get("type", "message") != "message":
            raise ApiError(
                400,
                f"{where}: items of type {item.get('type')!r} are not supported",
                param=f"{where}.type",
            )
        role = item.get("role")
        if role not in ("system", "developer", "user", "assistant"):
            raise ApiError(400, f"{where}.role: {role!r} is not supported", param=f"{where}.role")
        kinds = ("input_text", "output_text", "text")
        result.append((role, _text_of(item.get("content"), where, kinds)))
    return result


def seed_history(messages: list[tuple[str, str]]) -> list[Message]:
    """Earlier messages for a fresh session, same roles merged. The client's system and
    developer messages ride at the start as a context block: the model reads them as
    before, while the title, search and views keep to the user's own words."""
    notes = [text for role, text in messages if role in ("system", "developer") and text.strip()]
    history: list[Message] = []
    if notes:
        note = NOTE_HEADER + "\n\n" + "\n\n".join(notes)
        history.append(Message("user", [ContextBlock(note, "client")]))
    for role, text in messages:
        if role in ("system", "developer") or not text.strip():
            continue
        if history and history[-1].role == role:
            blocks = history[-1].blocks
            last = blocks[-1]
            if isinstance(last, TextBlock):
                blocks[-1] = TextBlock(last.text + "\n\n" + text)
            else:
                blocks.append(TextBlock(text))
        else:
            history.append(Message("user" if role == "user" else "assistant", [TextBlock(text)]))
    return history


async def prepare(
    request: web.Request, body: dict[str, Any], messages: list[tuple[str, str]]
) -> Prepared:
    """Resolve the session and queue (or find) the turn."""
    server = server_of(request)
    runtime = server.runtime
    store = server.web_store()
    agent = _agent_of(server, body.get("model"))
    if body.get("tools"):
        raise ApiError(
            400, "tools are not supported: the agent runs with its own tools", param="tools"
        )
    user = body.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > 256):
        raise ApiError(400, "user must be a string of at most 256 characters", param="user")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise ApiError(400, "previous_response_id must be a string", param="previous_response_id")
    if not messages or messages[-1][0] != "user" or not messages[-1][1].strip():
        raise ApiError(400, "the last message must be a user message with text")
    text = messages[-1][1]
    key = header(request, "Idempotency-Key", limit=255)
    if key:
        seen = await store.api_key(key)
        if seen is not None:
            session_id, turn = seen
            # Requeue (a no-op when it exists): the first request may have died
            # between recording the key and queueing the turn.
            await runtime.turns.submit(session_id, text, turn_id=turn)
            return Prepared(agent, session_id, turn, True, body["model"], user, previous)
    session_id = await _session_for(server, request, agent, user, previous, messages)
    turn = turn_id_for("v1", key) if key else f"turn_{secrets.token_hex(8)}"
    if key:
        session_id, turn = await store.remember_api_key(key, session_id, turn)
    stream = bool(body.get("stream"))
    if stream and not key:
        busy = await runtime.sessions.active_turns(session_id)
        if busy:
            raise ApiError(409, f"session {session_id} already has a turn queued or running")
    # A stream follows the turn through this process's events: it runs here.
    await runtime.turns.submit(session_id, text, turn_id=turn, attended=False, here=stream)
    if user:
        await store.remember_user(user, agent, session_id)
    return Prepared(agent, session_id, turn, False, body["model"], user, previous)


async def _session_for(
    server: Served,
    request: web.Request,
    agent: str,
    user: str | None,
    previous: str | None,
    messages: list[tuple[str, str]],
) -> str:
    runtime = server.runtime
    store = server.web_store()
    named = header(request, "X-Habakkuk-Session")
    if named:
        session = await runtime.sessions.session(named)  # NotFound -> 404
        if session.agent != agent:
            raise ApiError(
                400, f"session {named} belongs to agent {session.agent!r}, not {agent!r}"
            )
        return session.id
    if previous:
        found = await store.response(previous)
        if found is None:
            raise ApiError(404, f"previous response {previous!r} not found")
        if found[1] != agent:
            raise ApiError(
                400, f"response {previous} was made by agent {found[1]!r}, not {agent!r}"
            )
        return found[0]
    if user:
        known = await store.user_session(user, agent)
        if known is not None:
            return known
    session = await runtime.sessions.new_session(agent, origin="api")
    history = seed_history(messages[:-1])
    if history:
        await runtime.sessions.seed_session(session.id, history)
    return session.id


def _follow(server: Served, prepared: Prepared) -> Subscription:
    def ours(event: EventPayload) -> bool:
        if event.session != prepared.session:
            return False
        if isinstance(event, (TurnText, ToolCallStreamed, ModelReplied)):
            return event.turn == prepared.turn
        return isinstance(event, ToolStarted)  # a tool call names no turn

    return server.runtime.bus.subscribe(ours, maxsize=8192)


def _record_usage(progress: Progress, event: ModelReplied) -> None:
    for key, value in event.usage.items():
        if isinstance(value, int):
            progress.usage[key] = progress.usage.get(key, 0) + value


async def _wait_whole(server: Served, prepared: Prepared) -> tuple[Any, Progress]:
    progress = Progress()
    with _follow(server, prepared) as events:
        outcome = await server.runtime.turns.wait_turn(prepared.turn)
        while (event := events.get_nowait()) is not None:
            if isinstance(event, ModelReplied):
                _record_usage(progress, event)
    return outcome, progress


async def _stream_turn(
    server: Served,
    prepared: Prepared,
    events: Subscription,
    emit: Any,
    keepalive: Any,
) -> tuple[Any, Progress]:
    """Call `emit(text)` for each piece of reply text; returns (outcome, progress)."""
    progress = Progress()
    gap = False
    waiter = asyncio.create_task(server.runtime.turns.wait_turn(prepared.turn))
    try:
        while True:
            getter = asyncio.create_task(events.get())
            done, _ = await asyncio.wait(
                {getter, waiter},
                timeout=server.keepalive_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:
                getter.cancel()
                await keepalive()
                continue
            if getter in done:
                event = getter.result()
                match event:
                    case TurnText(text=piece):
                        if gap and progress.streamed:
                            piece = "\n\n" + piece
                        gap = False
                        progress.streamed += piece
                        await emit(piece)
                    case ToolCallStreamed() | ToolStarted():
                        gap = True
                    case ModelReplied():
                        _record_usage(progress, event)
                continue
            getter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await getter
            while (late := events.get_nowait()) is not None:
                match late:
                    case TurnText(text=piece):
                        progress.streamed += piece
                        await emit(piece)
                    case ModelReplied():
                        _record_usage(progress, late)
            outcome = waiter.result()
            if outcome.status == "done" and not progress.streamed and outcome.reply:
                progress.streamed = outcome.reply
                await emit(outcome.reply)
            return outcome, progress
    finally:
        if not waiter.done():
            waiter.cancel()


async def _turn_text(server: Served, prepared: Prepared, outcome: Any) -> str:
    """The turn's text as streaming shows it: each assistant text, a blank line between."""
    # Only this turn's messages: reading the whole transcript made each request on a
    # continued session (user, previous_response_id) cost more than the one before.
    written = await server.runtime.sessions.turn_messages(prepared.session, prepared.turn)
    texts = [m.message.text for m in written if m.role == "assistant" and m.message.text.strip()]
    return "\n\n".join(texts) or str(outcome.reply)


def _failure(outcome: Any) -> str:
    if outcome.status == "cancelled":
        return "the turn was stopped"
    return f"the turn failed: {outcome.error or outcome.status}"


# Not 5xx: the openai client retries those, and without an Idempotency-Key a
# retry would run the turn again.
TURN_FAILED_STATUS = 424


def _headers(prepared: Prepared) -> dict[str, str]:
    return {"X-Habakkuk-Session": prepared.session}


# -- chat completions ----------------------------------------------------------------------


def _chat_usage(progress: Progress) -> dict[str, Any]:
    prompt = progress.usage.get("input_tokens", 0) + progress.usage.get("cache_read_tokens", 0)
    completion = progress.usage.get("output_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": progress.usage.get("cache_read_tokens", 0)},
    }


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """POST /v1/chat/completions, whole or streamed."""
    server = server_of(request)
    body = await read_json(request)
    check_chat_request(body)
    prepared = await prepare(request, body, chat_messages(body))
    completion_id = "chatcmpl-" + prepared.turn.removeprefix("turn_")
    created = int(time.time())
    if not body.get("stream"):
        outcome, progress = await _wait_whole(server, prepared)
        if outcome.status != "done":
            raise ApiError(TURN_FAILED_STATUS, _failure(outcome))
        text = await _turn_text(server, prepared, outcome)
        return json_response(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": prepared.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": _chat_usage(progress),
            },
            headers=_headers(prepared),
        )
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    with _follow(server, prepared) as events:
        response = await _open_sse(request, prepared)
        server.track_stream()

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": prepared.model,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }

        async def emit(text: str) -> None:
            await _data(response, chunk({"content": text}, None))

        async def keepalive() -> None:
            await response.write(b": keepalive\n\n")

        with contextlib.suppress(ConnectionError):
            await _data(response, chunk({"role": "assistant", "content": ""}, None))
            outcome, progress = await _stream_turn(server, prepared, events, emit, keepalive)
            if outcome.status != "done":
                error = {"message": _failure(outcome), "type": "server_error", "code": None}
                await _data(response, {"error": error})
            else:
                await _data(response, chunk({}, "stop"))
                if include_usage:
                    last = chunk({}, None)
                    last["choices"] = []
                    last["usage"] = _chat_usage(progress)
                    await _data(response, last)
            await response.write(b"data: [DONE]\n\n")
    return response


async def _open_sse(request: web.Request, prepared: Prepared) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            **_headers(prepared),
        }
    )
    await response.prepare(request)
    return response


async def _data(response: web.StreamResponse, data: Any, event: str | None = None) -> None:
    head = f"event: {event}\n" if event else ""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    await response.write(f"{head}data: {text}\n\n".encode())


# -- responses -----------------------------------------------------------------------------------


def _response_usage(progress: Progress) -> dict[str, Any]:
    cached = progress.usage.get("cache_read_tokens", 0)
    prompt = progress.usage.get("input_tokens", 0) + cached
    output = progress.usage.get("output_tokens", 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }


def _response_object(
    prepared: Prepared,
    response_id: str,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": prepared.model,
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "previous_response_id": prepared.previous_response_id,
        "usage": usage,
        "error": error,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": None,
        "top_p": None,
        "user": prepared.user,
        "store": True,
    }


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content if status == "completed" else [],
    }


async def responses(request: web.Request) -> web.StreamResponse:
    """POST /v1/responses, whole or streamed."""
    server = server_of(request)
    body = await read_json(request)
    check_responses_request(body)
    prepared = await prepare(request, body, response_messages(body))
    suffix = prepared.turn.removeprefix("turn_")
    response_id, item_id = f"resp_{suffix}", f"msg_{suffix}"
    await server.web_store().remember_response(response_id, prepared.session, prepared.agent)
    created = int(time.time())
    if not body.get("stream"):
        outcome, progress = await _wait_whole(server, prepared)
        if outcome.status != "done":
            raise ApiError(TURN_FAILED_STATUS, _failure(outcome))
        text = await _turn_text(server, prepared, outcome)
        output = [_message_item(item_id, text, "completed")]
        return json_response(
            _response_object(
                prepared, response_id, created, "completed", output, _response_usage(progress)
            ),
            headers=_headers(prepared),
        )
    sequence = 0

    with _follow(server, prepared) as events:
        response = await _open_sse(request, prepared)
        server.track_stream()

        async def send(kind: str, data: dict[str, Any]) -> None:
            nonlocal sequence
            await _data(response, {"type": kind, "sequence_number": sequence, **data}, kind)
            sequence += 1

        async def emit(text: str) -> None:
            await send(
                "response.output_text.delta",
                {
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                    "logprobs": [],
                },
            )

        async def keepalive() -> None:
            await response.write(b": keepalive\n\n")

        with contextlib.suppress(ConnectionError):
            start = _response_object(prepared, response_id, created, "in_progress", [], None)
            await send("response.created", {"response": start})
            await send("response.in_progress", {"response": start})
            await send(
                "response.output_item.added",
                {"output_index": 0, "item": _message_item(item_id, "", "in_progress")},
            )
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            await send(
                "response.content_part.added",
                {"item_id": item_id, "output_index": 0, "content_index": 0, "part": part},
            )
            outcome, progress = await _stream_turn(server, prepared, events, emit, keepalive)
            if outcome.status != "done":
                error = {"code": "server_error", "message": _failure(outcome)}
                failed = _response_object(prepared, response_id, created, "failed", [], None, error)
                await send("response.failed", {"response": failed})
                return response
            text = progress.streamed
            await send(
                "response.output_text.done",
                {
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                },
            )
            await send(
                "response.content_part.done",
                {
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "part": {**part, "text": text},
                },
            )
            item = _message_item(item_id, text, "completed")
            await send("response.output_item.done", {"output_index": 0, "item": item})
            final = _response_object(
                prepared, response_id, created, "completed", [item], _response_usage(progress)
            )
            await send("response.completed", {"response": final})
    return response


def setup(app: web.Application) -> None:
    """Register /v1/."""
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/responses", responses)
