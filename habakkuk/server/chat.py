"""The web chat's HTTP side: POST /api/chat, the conversation event stream, live activity.

The web chat is a channel account of type web (habakkuk.channels.web): a
message goes to the gateway as an `InboundMessage` whose id is the client's
`id` (so a resend is a no-op) and whose turn id derives from it; replies,
command answers and approval prompts are delivery jobs the adapter appends to
the conversation's log in web.db, waking its streams. The conversation's
session is the gateway's binding, mirrored in web.db for the dashboard's list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aiohttp import BodyPartReader, web

from habakkuk.channels.adapter import Address, InboundMessage
from habakkuk.channels.web import chat_of, conversation_of, web_turn_id
from habakkuk.conversation.commands import plain
from habakkuk.engine.agent.requests import turn_request
from habakkuk.engine.errors import NotFound
from habakkuk.engine.events import (
    EventPayload,
    Subscription,
    ToolEnded,
    ToolStarted,
    TurnEnded,
    TurnEvent,
    TurnReset,
    TurnStarted,
    TurnText,
    TurnThinking,
)
from habakkuk.engine.timeouts import next_within

from .errors import ApiError
from .inputs import MAX_CURSOR, body_deadline, cursor, header, query_int, read_json
from .served import UPLOAD_LIMIT, Attachment, field, json_response, only_fields, server_of

if TYPE_CHECKING:
    from habakkuk.channels.service import ChannelService
    from habakkuk.engine.llm.types import Block

    from .served import Served
    from .webstore import WebStore

log = logging.getLogger(__name__)

MAX_FILES = 10
MAX_TEXT = 100_000
# What /live and /api/live follow: the activity items, and a turn's start (to follow a
# conversation onto its new session).
ACTIVITY_EVENTS = (
    TurnStarted,
    TurnText,
    TurnThinking,
    TurnReset,
    TurnEnded,
    ToolStarted,
    ToolEnded,
)


def check_conversation(value: Any, name: str = "conversation") -> str:
    """A conversation id: 1-200 printable characters without a slash."""
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, f"{name} is required (a string)")
    if len(value) > 200 or "/" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ApiError(400, f"{name} must be at most 200 printable characters without '/'")
    return value


def activity(event: EventPayload) -> dict[str, Any] | None:
    """A bus event as a dashboard activity item, or None for other events."""
    item: dict[str, Any] = {
        "kind": "",
        "tool": "",
        "id": "",
        "input": "",
        "text": "",
        "is_error": False,
        "turn": event.turn if isinstance(event, TurnEvent) else "",
        "session": event.session,
    }
    match event:
        case TurnText(text=text):
            item.update(kind="text", text=text)
        case TurnThinking(text=text):
            item.update(kind="thinking", text=text)
        case ToolStarted():
            raw = json.dumps(event.input, ensure_ascii=False, default=str)
            item.update(
                kind="tool_start",
                tool=event.tool,
                id=event.call_id,
                input=raw[:2000],
                text=event.title,
            )
        case ToolEnded():
            item.update(
                kind="tool_done",
                tool=event.tool,
                id=event.call_id,
                text=event.preview[:4000],
                is_error=event.is_error,
            )
        case TurnReset():
            item.update(kind="retry")
        case TurnEnded(status="done"):
            item.update(kind="turn_done", text=event.reply)
        case TurnEnded():
            item.update(kind="turn_error", text=event.error or event.status, is_error=True)
        case _:
            return None
    return item


# -- server-sent events ---------------------------------------------------------------------


async def open_stream(request: web.Request) -> web.StreamResponse:
    """Start a text/event-stream response."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache, no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    await response.write(b"retry: 3000\n\n")
    return response


def sse(event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE frame; `data` is JSON-encoded on one line."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


# -- the channel ---------------------------------------------------------------------------


class WebChannel:
    """The HTTP side of the web chat's channel account (habakkuk.channels.web).

    A message becomes an `InboundMessage` for the gateway, like a Telegram
    message: its commands, approvals and turns; replies come back as delivery
    jobs the account's adapter appends to web.db. This keeps the display state
    only: the log of what the user sent, and who is typing.
    """

    def __init__(self, server: Served):
        self.server = server
        self.runtime = server.runtime
        self.account = server.config.account
        self.typing: dict[str, str] = {}  # conversation -> running turn
        self._locks: dict[str, asyncio.Lock] = {}
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._service: ChannelService | None = None
        self.closing = asyncio.Event()

    @property
    def store(self) -> WebStore:
        return self.server.web_store()

    @property
    def service(self) -> ChannelService:
        if self._service is None:
            raise ApiError(503, "the server is shutting down")
        return self._service

    async def start(self) -> None:
        """Join the gateway as the web account and follow turns for typing."""
        service = self.runtime.channel_service()
        service.start(supervise=False)  # only the web account, unless the workers run
        await service.started()
        self.account = service.attach_web(self.account, self.store).name
        self._service = service
        self._subscription = self.runtime.bus.subscribe(
            lambda e: isinstance(e, (TurnStarted, TurnEnded)), maxsize=4096
        )
        self._task = asyncio.create_task(self._follow(self._subscription), name="web-typing")

    async def stop(self) -> None:
        self.closing.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None
        if self._service is not None:
            service, self._service = self._service, None
            await service.detach_web(self.account)

    async def _follow(self, subscription: Subscription) -> None:
        async for event in subscription:
            try:
                await self._typing(event)
            except Exception:
                log.exception("web channel: following %s failed", event.kind)

    async def _typing(self, event: EventPayload) -> None:
        if not isinstance(event, (TurnStarted, TurnEnded)):
            return
        turn = event.turn
        if isinstance(event, TurnEnded):
            for conversation, running in list(self.typing.items()):
                if running == turn:
                    self.typing.pop(conversation, None)
                    self.store.wake(conversation)
            return
        job = await self.runtime.queue.get(turn)
        request = turn_request(job) if job is not None else None
        if request is None or request.reply_to is None:
            return
        try:
            address = Address.parse(request.reply_to.to)
        except ValueError:
            return
        if address.channel == self.account:
            conversation = conversation_of(address)
            self.typing[conversation] = turn
            self.store.wake(conversation)

    # -- messages in -------------------------------------------------------------

    def _lock(self, conversation: str) -> asyncio.Lock:
        lock = self._locks.get(conversation)
        if lock is None:
            if len(self._locks) > 10_000:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            lock = self._locks[conversation] = asyncio.Lock()
        return lock

    def address(self, conversation: str) -> Address:
        """The channel address of a web conversation."""
        return Address(self.account, chat_of(conversation))

    async def handle(
        self,
        conversation: str,
        text: str,
        *,
        agent: str | None = None,
        client_id: str | None = None,
        attachments: list[Attachment] | None = None,
    ) -> dict[str, Any]:
        """One message from the web, through the gateway: a command, an answer or a turn."""
        async with self._lock(conversation):
            return await self._handle(conversation, text, agent, client_id, attachments or [])

    async def _handle(
        self,
        conversation: str,
        text: str,
        agent: str | None,
        client_id: str | None,
        attachments: list[Attachment],
    ) -> dict[str, Any]:
        store, gateway = self.store, self.service.gateway
        message_id = client_id or secrets.token_hex(8)
        dedupe = f"in:{conversation}:{message_id}"
        turn = web_turn_id(conversation, message_id)
        msg = InboundMessage(self.account, chat_of(conversation), message_id, "web", turn_id=turn)
        seen = await store.find(dedupe)
        if seen is not None:
            # Handed over again (a no-op once handled): the first request may have
            # died between logging the message and the gateway taking it.
            msg.text = seen.text
            await gateway.handle(msg)
            return {"message": "already received", "turn": seen.turn or None}
        if agent is not None:
            self.runtime.config.agent(agent)  # unknown agent -> 404
            await self._choose_agent(msg, agent)
        if attachments:
            text, msg.blocks = await self._attachments(msg, text, attachments)
        msg.text = text
        command = text.strip().startswith("/") and not attachments
        session = None
        if not command:
            # Bound (in web.db too) before the turn is queued: /live follows the session
            # from the turn's start.
            await gateway.session_for(gateway.channels[self.account], msg)
            session = await self._mirror(conversation, msg)
        # Logged before the gateway queues the turn, so the reply always streams after it.
        await store.append(
            conversation, "user", text, turn="" if command else turn,
            session=session or await self._session_of(msg), dedupe=dedupe,
        )  # fmt: skip
        handled = await gateway.handle(msg)
        session = await self._mirror(conversation, msg)
        if handled is None or handled.kind == "turn":
            return {"message": "queued", "turn": turn, "session": session}
        note = plain(handled.text) if handled.text else ""
        if handled.kind == "answer" and note:
            await store.append(conversation, "notice", f"{note}.", session=session or "")
        return {"message": note, "turn": handled.turn, "session": session}

    async def _choose_agent(self, msg: InboundMessage, agent: str) -> None:
        """A message naming another agent than the conversation's starts a session of it."""
        gateway = self.service.gateway
        binding = await gateway.store.binding(msg.address.conversation)
        if binding is not None:
            with contextlib.suppress(NotFound):
                if (await self.runtime.sessions.session(binding.session)).agent == agent:
                    return
        session = await self.runtime.sessions.new_session(
            agent, origin=f"channel:{self.account}", chat=True
        )
        await gateway.store.bind(msg.address.conversation, session.id, agent_override=agent)

    async def _session_of(self, msg: InboundMessage) -> str:
        binding = await self.service.gateway.store.binding(msg.address.conversation)
        return binding.session if binding is not None else ""

    async def _mirror(self, conversation: str, msg: InboundMessage) -> str | None:
        """Record the gateway's session of the conversation in web.db (the dashboard's list)."""
        session_id = await self._session_of(msg)
        if not session_id:
            return None
        binding = await self.store.conversation(conversation)
        if binding is None or binding.session != session_id:
            try:
                agent = (await self.runtime.sessions.session(session_id)).agent
            except NotFound:
                agent = ""
            await self.store.bind(conversation, agent, session_id)
        return session_id

    async def _attachments(
        self, msg: InboundMessage, text: str, attachments: list[Attachment]
    ) -> tuple[str, list[Block]]:
        """Save uploads to the agent's inbox; what the model gets of each is the channels'
        attachments rule (images and PDFs as they are, other documents as their text)."""
        from habakkuk.channels.attachments import for_model

        gateway = self.service.gateway
        session = await gateway.session_for(gateway.channels[self.account], msg)
        assert session is not None
        blocks: list[Block] = []
        lines = [text] if text.strip() else []
        for item in attachments:
            path = await self.runtime.sessions.save_attachment(
                session.agent, item.filename, item.data
            )
            lines.append(f"[attached file: {path} ({item.content_type}, {len(item.data)} bytes)]")
            name = path.rsplit("/", 1)[-1]
            given = await for_model(self.runtime.blobs, item.data, item.content_type, name, path)
            blocks.extend(given.blocks)
            if given.note:
                lines.append(given.note)
        return "\n".join(lines), blocks


# -- handlers ------------------------------------------------------------------------------


async def post_chat(request: web.Request) -> web.Response:
    """POST /api/chat: JSON {conversation, text, agent?, id?} or multipart with files."""
    server = server_of(request)
    attachments: list[Attachment] = []
    if request.content_type == "multipart/form-data":
        body, attachments = await _read_multipart(request)
    else:
        body = await read_json(request, limit=1024 * 1024)
        only_fields(body, {"conversation", "text", "agent", "id"})
    conversation = check_conversation(body.get("conversation"))
    audio = body.pop("audio", None)
    transcript = None
    if audio is not None:
        transcript = await transcribe(server, audio)
        body["text"] = "\n".join(t for t in (str(body.get("text") or ""), transcript) if t)
    text = field(body, "text", str, default="")
    if not text.strip() and not attachments:
        raise ApiError(400, "text is required")
    if len(text) > MAX_TEXT:
        raise ApiError(413, f"text is over {MAX_TEXT} characters")
    agent = field(body, "agent", str)
    client_id = field(body, "id", str)
    if client_id is not None and not 0 < len(client_id) <= 200:
        raise ApiError(400, "id must be 1 to 200 characters")
    result = await server.channel.handle(
        conversation, text, agent=agent or None, client_id=client_id, attachments=attachments
    )
    if transcript is not None:
        result["transcript"] = transcript
    return json_response(result, 202)


async def transcribe(server: Served, audio: Attachment) -> str:
    """The recording's text, through the channels' one transcription client.

    501 without `transcription:` in config, 502 when the service fails, 422 when
    it heard nothing.
    """
    from habakkuk.voice.transcription import TranscriptionError
    from habakkuk.voice.transcription import transcribe as speech_to_text

    settings = server.runtime.config.transcription
    if settings is None:
        raise ApiError(501, "transcription is not configured (transcription: in config)")
    try:
        return await speech_to_text(
            settings, server.runtime.env, audio.data, audio.filename, audio.content_type
        )
    except TranscriptionError as exc:
        raise ApiError(422 if exc.kind == "empty" else 502, str(exc)) from None


async def _read_multipart(request: web.Request) -> tuple[dict[str, Any], list[Attachment]]:

    async with body_deadline(request):
        return await _read_parts(request)


async def _read_parts(request: web.Request) -> tuple[dict[str, Any], list[Attachment]]:
    body: dict[str, Any] = {}
    files: list[Attachment] = []
    total = 0
    try:
        reader = await request.multipart()
        while True:
            part = await reader.next()
            if part is None:
                break
            if not isinstance(part, BodyPartReader):
                raise ApiError(400, "nested multipart bodies are not accepted")
            name = part.name or ""
            if name in ("conversation", "text", "agent", "id"):
                value = await part.read(decode=False)
                if len(value) > MAX_TEXT * 4:
                    raise ApiError(413, f"{name} is too long")
                body[name] = value.decode("utf-8", errors="replace")
            elif name == "file":
                if len(files) >= MAX_FILES:
                    raise ApiError(400, f"at most {MAX_FILES} files per message")
                data = bytearray()
                while chunk := await part.read_chunk(65536):
                    total += len(chunk)
                    if total > UPLOAD_LIMIT:
                        raise ApiError(413, "attachments are over 25 MB together")
                    data.extend(chunk)
                files.append(
                    Attachment(
                        # Some clients percent-encode the name; the runtime keeps
                        # only a safe base name of the decoded form.
                        unquote(part.filename or "file"),
                        part.headers.get("Content-Type", "application/octet-stream"),
                        bytes(data),
                    )
                )
            elif name == "audio":
                if "audio" in body:
                    raise ApiError(400, "at most one audio recording per message")
                recording = await part.read(decode=False)
                total += len(recording)
                if total > UPLOAD_LIMIT:
                    raise ApiError(413, "attachments are over 25 MB together")
                body["audio"] = Attachment(
                    unquote(part.filename or "recording"),
                    part.headers.get("Content-Type", "audio/webm"),
                    bytes(recording),
                )
            else:
                raise ApiError(400, f"unknown form field {name!r}")
    except ApiError:
        raise
    except (ValueError, AssertionError, RuntimeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"malformed multipart body: {exc}") from None
    return body, files


async def conversations(request: web.Request) -> web.Response:
    """GET /api/chat/conversations?limit=50"""
    server = server_of(request)
    limit = query_int(request, "limit", 50, 1, 500)
    items = []
    from habakkuk.engine.export import rfc3339

    for row in await server.web_store().conversations(limit):
        title = ""
        with contextlib.suppress(NotFound):
            title = (await server.runtime.sessions.session(row.session)).title
        items.append(
            {
                "conversation": row.conversation,
                "agent": row.agent,
                "session": row.session,
                "title": title,
                "last_at": rfc3339(row.last_at),
            }
        )
    return json_response({"conversations": items})


async def events(request: web.Request) -> web.StreamResponse:
    """GET /api/chat/{conversation}/events?after=N: replay, then live messages."""
    server = server_of(request)
    conversation = check_conversation(request.match_info["conversation"])
    # Both cursors are checked before the stream starts: after it, only the body is left.
    after = query_int(request, "after", 0, 0, MAX_CURSOR)
    last_id = header(request, "Last-Event-ID")
    if last_id:
        after = cursor(last_id, "Last-Event-ID")
    store = server.web_store()
    channel = server.channel
    response = await open_stream(request)
    server.track_stream()
    loop = asyncio.get_running_loop()
    last_write = loop.time()
    typing_sent: tuple[str, float] | None = None
    with contextlib.suppress(ConnectionError), store.watch(conversation) as wake:
        while not channel.closing.is_set():
            wake.clear()
            rows = await store.events(conversation, after)
            for row in rows:
                await response.write(sse("message", row.to_json(), row.seq))
                after = row.seq
            if rows:
                last_write = loop.time()
                if len(rows) >= 500:
                    continue
            turn = channel.typing.get(conversation)
            now = loop.time()
            if turn and (
                typing_sent is None
                or typing_sent[0] != turn
                or now - typing_sent[1] >= server.typing_seconds
            ):
                await response.write(sse("typing", {"turn": turn, "active": True}))
                typing_sent, last_write = (turn, now), now
            elif not turn and typing_sent is not None:
                await response.write(sse("typing", {"turn": typing_sent[0], "active": False}))
                typing_sent, last_write = None, now
            timeout = max(0.05, server.keepalive_seconds - (now - last_write))
            if turn:
                timeout = min(timeout, server.typing_seconds)
            woken, _ = await next_within(wake.wait(), timeout)
            if not woken and loop.time() - last_write >= server.keepalive_seconds - 0.01:
                await response.write(b": keepalive\n\n")
                last_write = loop.time()
    return response


async def live(request: web.Request) -> web.StreamResponse:
    """GET /api/chat/{conversation}/live: the current session's activity from the bus."""
    server = server_of(request)
    conversation = check_conversation(request.match_info["conversation"])
    store = server.web_store()
    binding = await store.conversation(conversation)
    following = binding.session if binding else ""
    with server.runtime.bus.subscribe(lambda e: isinstance(e, ACTIVITY_EVENTS)) as subscription:
        response = await open_stream(request)
        server.track_stream()
        with contextlib.suppress(ConnectionError):
            if binding is not None:
                await response.write(
                    sse("session", {"session": binding.session, "agent": binding.agent})
                )
            await _pump_activity(server, response, subscription, conversation, following)
    return response


async def _pump_activity(
    server: Served,
    response: web.StreamResponse,
    subscription: Subscription,
    conversation: str | None,
    following: str,
) -> None:
    store = server.web_store()
    channel = server.channel
    while not channel.closing.is_set():
        got, event = await next_within(subscription.get(), server.keepalive_seconds)
        if not got:
            await response.write(b": keepalive\n\n")
            continue
        if conversation is not None:
            if isinstance(event, TurnStarted) and event.session != following:
                binding = await store.conversation(conversation)
                if binding is not None and binding.session == event.session:
                    following = binding.session
                    await response.write(
                        sse("session", {"session": binding.session, "agent": binding.agent})
                    )
            if event.session != following:
                continue
        item = activity(event)
        if item is not None:
            await response.write(sse("activity", item))


async def live_all(request: web.Request) -> web.StreamResponse:
    """GET /api/live: activity of every session in this process."""
    server = server_of(request)
    with server.runtime.bus.subscribe(lambda e: isinstance(e, ACTIVITY_EVENTS)) as subscription:
        response = await open_stream(request)
        server.track_stream()
        with contextlib.suppress(ConnectionError):
            await _pump_activity(server, response, subscription, None, "")
    return response


def setup(app: web.Application) -> None:
    """Register the chat routes."""
    app.router.add_post("/api/chat", post_chat)
    app.router.add_get("/api/chat/conversations", conversations)
    app.router.add_get("/api/chat/{conversation}/events", events)
    app.router.add_get("/api/chat/{conversation}/live", live)
    app.router.add_get("/api/live", live_all)
