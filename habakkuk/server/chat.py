"""The web channel: POST /api/chat, the conversation event stream, live activity.

A conversation (the client's id) is bound to an agent and a session in web.db.
A message becomes a turn job whose id derives from the client's message id, so
a resend is a no-op. The watcher appends each finished turn's reply to the
conversation's log and wakes its streams; a sweep catches turns that finished
while no event reached this process (another process ran them, or a restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aiohttp import BodyPartReader, web

from habakkuk.engine.errors import NotFound
from habakkuk.engine.events import Event, Subscription
from habakkuk.engine.timeouts import next_within

from .app import field, json_response, only_fields, server_of
from .errors import ApiError
from .inputs import MAX_CURSOR, cursor, header, query_int, read_json
from .webstore import approval_dedupe

if TYPE_CHECKING:
    from .app import HttpServer
    from .webstore import Conversation, WebStore

log = logging.getLogger(__name__)

MAX_FILES = 10
IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
MAX_TEXT = 100_000
ACTIVITY_KINDS = {
    "turn.start",
    "turn.text",
    "turn.thinking",
    "turn.reset",
    "turn.end",
    "tool.start",
    "tool.end",
}
# A pending turn whose job never appeared (the process died between the two
# writes) is given up after this long; resending with the same id requeues it.
ORPHAN_SECONDS = 300.0


def turn_id_for(scope: str, key: str) -> str:
    """A turn id derived from a client-chosen key, so a resend maps to the same turn."""
    digest = hashlib.sha256(f"{scope}\0{key}".encode()).hexdigest()[:24]
    return f"turn_{digest}"


def check_conversation(value: Any, name: str = "conversation") -> str:
    """A conversation id: 1-200 printable characters without a slash."""
    if not isinstance(value, str) or not value.strip():
        raise ApiError(400, f"{name} is required (a string)")
    if len(value) > 200 or "/" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ApiError(400, f"{name} must be at most 200 printable characters without '/'")
    return value


def activity(event: Event) -> dict[str, Any] | None:
    """A bus event as a dashboard activity item, or None for other events."""
    data = event.data
    item: dict[str, Any] = {
        "kind": "",
        "tool": "",
        "id": "",
        "input": "",
        "text": "",
        "is_error": False,
        "turn": str(data.get("turn", "")),
        "session": event.session,
    }
    if event.kind == "turn.text":
        item.update(kind="text", text=str(data.get("text", "")))
    elif event.kind == "turn.thinking":
        item.update(kind="thinking", text=str(data.get("text", "")))
    elif event.kind == "tool.start":
        raw = json.dumps(data.get("input", {}), ensure_ascii=False, default=str)
        item.update(
            kind="tool_start",
            tool=str(data.get("tool", "")),
            id=str(data.get("call_id", "")),
            input=raw[:2000],
            text=str(data.get("title", "")),
        )
    elif event.kind == "tool.end":
        item.update(
            kind="tool_done",
            tool=str(data.get("tool", "")),
            id=str(data.get("call_id", "")),
            text=str(data.get("preview", ""))[:4000],
            is_error=bool(data.get("is_error")),
        )
    elif event.kind == "turn.reset":
        item.update(kind="retry")
    elif event.kind == "turn.end":
        if data.get("status") == "done":
            item.update(kind="turn_done", text=str(data.get("reply", "")))
        else:
            item.update(
                kind="turn_error",
                text=str(data.get("error") or data.get("status", "")),
                is_error=True,
            )
    else:
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


@dataclass
class Attachment:
    filename: str
    content_type: str
    data: bytes


class WebChannel:
    """Messages in, replies out, for the web account."""

    def __init__(self, server: HttpServer):
        self.server = server
        self.runtime = server.runtime
        self.typing: dict[str, str] = {}  # conversation -> running turn
        self._locks: dict[str, asyncio.Lock] = {}
        self._subscription: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self.closing = asyncio.Event()

    @property
    def store(self) -> WebStore:
        return self.server.web_store()

    async def start(self) -> None:
        """Follow the bus for turn progress and start the reply watcher."""
        kinds = {
            "turn.start",
            "turn.end",
            "job.finished",
            "approval.pending",
            "approval.answered",
            "approval.withdrawn",
        }
        self._subscription = self.runtime.bus.subscribe(lambda e: e.kind in kinds, maxsize=4096)
        self._task = asyncio.create_task(self._watch(), name="web-channel-watcher")

    async def stop(self) -> None:
        self.closing.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    # -- watcher ---------------------------------------------------------------

    async def _watch(self) -> None:
        assert self._subscription is not None
        await self._guarded(self.sweep())
        while not self.closing.is_set():
            got, event = await next_within(self._subscription.get(), self.server.sweep_seconds)
            if not got:
                await self._guarded(self.sweep())
                continue
            await self._guarded(self._on_event(event))

    async def _guarded(self, work: Any) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("web channel: delivering a reply failed; the sweep retries it")

    async def _on_event(self, event: Event) -> None:
        if event.kind == "job.finished":
            if event.data.get("job_kind") == "turn":
                await self.deliver(str(event.data.get("job", "")))
            return
        if event.kind == "approval.pending":
            await self._post_approval(event)
            return
        if event.kind.startswith("approval."):
            return
        turn = str(event.data.get("turn", ""))
        pending = await self.store.pending_for(turn)
        if pending is None:
            return
        conversation = pending[0]
        if event.kind == "turn.start":
            self.typing[conversation] = turn
        elif self.typing.get(conversation) == turn:
            self.typing.pop(conversation, None)
        self.store.wake(conversation)

    async def _post_approval(self, event: Event) -> None:
        request = event.data.get("request")
        for conversation in await self.store.conversations_of(event.session):
            tool = getattr(request, "tool", "a tool")
            summary = getattr(request, "summary", "")
            await self.store.append(
                conversation,
                "notice",
                f"Approval needed: {tool}: {summary}\nAnswer yes or no.",
                session=event.session,
                dedupe=approval_dedupe(str(event.data.get("id")), conversation),
            )

    async def sweep(self) -> None:
        """Deliver every pending turn that has finished."""
        for turn, _conversation, _session in await self.store.pending_turns():
            await self.deliver(turn)

    async def deliver(self, turn: str) -> bool:
        """Append the finished turn's reply to its conversation; True when appended."""
        pending = await self.store.pending_for(turn)
        if pending is None:
            return False
        conversation, session = pending
        outcome = await self.runtime.turn_outcome(turn)
        if outcome is None:
            row = await self.store.find(f"turn:{turn}")
            if row is not None and time.time() - row.at < ORPHAN_SECONDS:
                return False
            role, text = "error", "This message was not queued; send it again."
        elif outcome.status == "done":
            role, text = "assistant", outcome.reply or "(no reply)"
        elif outcome.status == "failed":
            role, text = "error", f"The turn failed: {outcome.error or 'unknown error'}"
        elif outcome.status == "cancelled":
            role, text = "notice", "Stopped."
        else:
            return False
        if self.typing.get(conversation) == turn:
            self.typing.pop(conversation, None)
        binding = await self.store.conversation(conversation)
        _, created = await self.store.append(
            conversation,
            role,
            text,
            turn=turn,
            session=session,
            agent=binding.agent if binding else "",
            dedupe=f"reply:{turn}",
            settle=True,
        )
        if not created:
            await self.store.db.write(
                lambda c: c.execute("DELETE FROM pending_turns WHERE turn = ?", (turn,))
            )
        return created

    # -- messages in -------------------------------------------------------------

    def _lock(self, conversation: str) -> asyncio.Lock:
        lock = self._locks.get(conversation)
        if lock is None:
            if len(self._locks) > 10_000:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            lock = self._locks[conversation] = asyncio.Lock()
        return lock

    async def handle(
        self,
        conversation: str,
        text: str,
        *,
        agent: str | None = None,
        client_id: str | None = None,
        attachments: list[Attachment] | None = None,
        dedupe_scope: str = "in",  # the namespace of client ids (webhooks use their own)
    ) -> dict[str, Any]:
        """One message from the web: a command, an approval answer or a new turn."""
        async with self._lock(conversation):
            return await self._handle(
                conversation, text, agent, client_id, attachments or [], dedupe_scope
            )

    async def _handle(
        self,
        conversation: str,
        text: str,
        agent: str | None,
        client_id: str | None,
        attachments: list[Attachment],
        scope: str,
    ) -> dict[str, Any]:
        store = self.store
        dedupe = f"{scope}:{conversation}:{client_id}" if client_id else None
        if dedupe is not None:
            seen = await store.find(dedupe)
            if seen is not None:
                if seen.turn:
                    # Requeue (a no-op when it exists): the first request may have
                    # died between recording the message and queueing its turn.
                    await self.runtime.submit(
                        seen.session, seen.text, turn_id=seen.turn, attended=True
                    )
                return {"message": "already received", "turn": seen.turn or None}
        if agent is not None:
            self.runtime.config.agent(agent)  # unknown agent -> 404
        binding = await store.conversation(conversation)
        stripped = text.strip()
        if stripped.startswith("/") and not attachments:
            return await self._command(conversation, text, binding, agent, client_id, dedupe)
        if binding is not None and not attachments:
            answered = await self._approval_answer(conversation, stripped, binding, dedupe)
            if answered is not None:
                return answered
        if binding is None or (agent is not None and agent != binding.agent):
            session = await self.runtime.new_session(
                agent or (binding.agent if binding else None), origin="web"
            )
            binding = await store.bind(conversation, session.agent, session.id)
        blocks: list[dict[str, Any]] = []
        if attachments:
            from habakkuk.engine.llm.types import DocumentBlock, ImageBlock, block_to_json

            lines = [text] if text.strip() else []
            for item in attachments:
                path = await self.runtime.save_attachment(binding.agent, item.filename, item.data)
                lines.append(
                    f"[attached file: {path} ({item.content_type}, {len(item.data)} bytes)]"
                )
                media = item.content_type.split(";")[0].strip().lower()
                # Images and PDFs also go to the model, by blob reference.
                if media in IMAGE_TYPES or media == "application/pdf":
                    blob = str(await self.runtime.blobs.put(item.data))
                    name = path.rsplit("/", 1)[-1]
                    block = (
                        ImageBlock(media, blob=blob, name=name)
                        if media in IMAGE_TYPES
                        else DocumentBlock(name, media, blob=blob)
                    )
                    blocks.append(block_to_json(block))
            text = "\n".join(lines)
        turn = turn_id_for(conversation, client_id) if client_id else _random_turn()
        await store.append(
            conversation,
            "user",
            text,
            turn=turn,
            session=binding.session,
            agent=binding.agent,
            dedupe=dedupe or f"turn:{turn}",
            pending=True,
        )
        await self.runtime.submit(
            binding.session,
            text,
            turn_id=turn,
            attended=True,
            extra={"blocks": blocks} if blocks else None,
        )
        return {"message": "queued", "turn": turn, "session": binding.session}

    async def _command(
        self,
        conversation: str,
        text: str,
        binding: Conversation | None,
        agent: str | None,
        client_id: str | None,
        dedupe: str | None,
    ) -> dict[str, Any]:
        """A chat command (habakkuk.conversation): the command and its reply are logged."""
        from habakkuk.conversation.commands import dispatch, plain

        from .web_conversation import WebConversation

        store = self.store
        await store.append(
            conversation,
            "user",
            text,
            session=binding.session if binding else "",
            agent=binding.agent if binding else "",
            dedupe=dedupe,
        )
        conv = WebConversation(self, conversation, binding, agent, client_id)
        reply = await dispatch(text, conv)
        binding = conv.binding
        session = binding.session if binding else None
        # The dashboard shows text as it is, so without the Markdown a chat renders.
        note = plain(reply.text) if reply is not None else ""
        if note:
            role = "error" if reply is not None and reply.error else "notice"
            await store.append(
                conversation, role, note, session=session or "",
                agent=binding.agent if binding else "",
            )  # fmt: skip
        return {"message": note, "turn": conv.turn, "session": session}

    async def _approval_answer(
        self, conversation: str, text: str, binding: Conversation, dedupe: str | None
    ) -> dict[str, Any] | None:
        from habakkuk.conversation.answers import answer_word

        answer = answer_word(text)
        if answer is None:
            return None
        waiting = [a for a in self.runtime.approvals.pending if a.session == binding.session]
        if not waiting:
            return None
        approval = waiting[0]
        await self.runtime.approvals.respond(approval.id, answer, by="web")
        store = self.store
        await store.append(
            conversation, "user", text, session=binding.session, agent=binding.agent, dedupe=dedupe
        )
        said = {"allow_once": "Approved", "allow_session": "Approved for this session"}
        note = f"{said.get(answer, 'Denied')}: {approval.tool}."
        await store.append(
            conversation, "notice", note, session=binding.session, agent=binding.agent
        )
        return {"message": note, "turn": None, "session": binding.session}


def _random_turn() -> str:
    import secrets

    return f"turn_{secrets.token_hex(8)}"


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


async def transcribe(server: HttpServer, audio: Attachment) -> str:
    """The recording's text, through the channels' one transcription client.

    501 without `transcription:` in config, 502 when the service fails, 422 when
    it heard nothing.
    """
    from habakkuk.channels.transcription import TranscriptionError
    from habakkuk.channels.transcription import transcribe as speech_to_text

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
    from .app import UPLOAD_LIMIT

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
            title = (await server.runtime.session(row.session)).title
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
    with server.runtime.bus.subscribe(lambda e: e.kind in ACTIVITY_KINDS) as subscription:
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
    server: HttpServer,
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
            if event.kind == "turn.start" and event.session != following:
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
    with server.runtime.bus.subscribe(lambda e: e.kind in ACTIVITY_KINDS) as subscription:
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
