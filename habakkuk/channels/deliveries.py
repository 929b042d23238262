"""Delivery jobs: everything Habakkuk sends to a chat goes out as a durable job.

- A turn's reply is the job `reply:<turn id>`, so a turn that reruns after a
  crash, or is announced twice, never replies twice. The reply text is read
  from the finished turn job when the delivery runs.
- Each chunk sent is recorded in `delivery_chunks` in the same transaction as
  a check that the job is still ours, so a retry resumes at the first unsent
  chunk.
- A crash between the platform's answer to a send and that record leaves a chunk
  that may or may not have reached the chat. Where every send carries a key derived
  from the delivery and its chunk (`Adapter.keyed_sends`: Discord's nonce, Matrix's
  transaction id, email's Message-ID, the web chat's job), the platform drops the
  resend. Elsewhere the start of each send is written first (`delivery_attempts`,
  in the same trip as the previous chunk's record), so a resumed chunk is known to
  be ambiguous (`Sending.attempted`): Slack looks for it before posting again;
  Telegram, Signal and WhatsApp cannot ask, so they send it again, and their window
  is only the time from the platform's answer to the record (nothing else between).
- `Undeliverable` (bot blocked, chat gone) fails the job for good; anything
  else retries with the queue's backoff.
- Nothing fails in silence: a part the adapter cannot send to a chat it can reach
  (a file to a chat without files, a file over the platform's limit or gone from
  disk) becomes a line in that chat saying what was not sent and why (a file's
  caption goes with it, and where the file is saved when it still is), and the job
  fails for good with an error starting UNSENT_PREFIX, which the overview counts.
- Deliveries of one chat share a serial key, so they arrive in order; the job
  kind names the channel account (`delivery:<account>`), so only the process
  holding that account's connection claims them.
- Each message sent is noted as the account's last message out, and each send that
  failed as its last error (channels/health.py: the supervisor writes them down).
- A delivery that went out fires the message_out hooks (subject: the channel
  account), once per delivery whatever its number of chunks; a silent reply sends
  nothing and fires nothing. A delivery resumed after a crash may fire them again,
  as a turn resumed fires its turn hooks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from habakkuk.engine.agent.requests import turn_request
from habakkuk.engine.blobs import BlobNotFound, BlobStore
from habakkuk.engine.hook_events import HookFirer
from habakkuk.engine.i18n import t, use_language
from habakkuk.engine.jobs import Job, JobQueue, Lease, payload_of
from habakkuk.engine.pools import PermanentJobError
from habakkuk.engine.silent import SILENT

from .adapter import (
    Adapter,
    Address,
    Button,
    SendError,
    Undeliverable,
    Unsupported,
    poll_as_text,
)
from .delivery_types import (
    DELIVERIES,
    DELIVERY_PREFIX,
    UNSENT_PREFIX,
    Delivery,
    FileDelivery,
    PollDelivery,
    ReplyDelivery,
    TextDelivery,
)
from .health import ActivityLog
from .store import ChannelStore
from .voice_replies import ReplySpeaker

log = logging.getLogger(__name__)

DELIVERY_MAX_ATTEMPTS = 12
REPLY_PREFIX = "reply:"
# What a delivery is, as message_out hooks are told.
_KINDS: dict[type, str] = {
    ReplyDelivery: "reply",
    TextDelivery: "text",
    FileDelivery: "file",
    PollDelivery: "poll",
}
# delivery_chunks index of the notice about an unsent part (the part itself is chunk 0).
NOTICE_CHUNK = 1000
# delivery_chunks index of a reply's voice note (its text chunks count from 0).
VOICE_CHUNK = 2000


def unsent_notice(what: str, reason: str) -> str:
    """The line a chat gets for a part it could not receive (in the chat's language)."""
    return t("chat.unsent", what=what, reason=reason)


@dataclass(frozen=True)
class Sending:
    """The delivery an adapter's send belongs to (`SENDING` while the worker sends)."""

    job: str  # the delivery job id: stable across retries, so an adapter may dedupe by it
    delivery: Delivery
    status: str = ""  # a reply's turn status: done, failed, cancelled
    # the index of the part being sent (its delivery_chunks index): with `job`, what a
    # platform's transaction id derives from (Matrix), so a resend after a crash between
    # the send and its record makes no second message
    chunk: int = 0
    # when an earlier send of this chunk started (0: none did) and left no record: it
    # may have reached the chat, so an adapter that can look (Slack) looks first
    attempted: float = 0.0


# Set while the worker runs one delivery job. Platforms dedupe by their message ids; an
# adapter whose platform is a log of its own (the web chat's web.db) dedupes by the job.
SENDING: ContextVar[Sending | None] = ContextVar("habakkuk_delivery", default=None)


def _sending_chunk(index: int, attempted: float = 0.0) -> None:
    """Say which part the next adapter call sends, and when an earlier send of it
    started (see Sending.chunk and Sending.attempted)."""
    current = SENDING.get()
    if current is not None:
        SENDING.set(replace(current, chunk=index, attempted=attempted))


AdapterFor = Callable[[str], Awaitable[Adapter | None]]
FailureText = Callable[[str], str]
Settled = Callable[[str], Awaitable[None]]


def delivery_kind(account: str) -> str:
    """The job kind of deliveries through channel account `account`."""
    return f"{DELIVERY_PREFIX}{account}"


def reply_id(turn_id: str) -> str:
    """The delivery job id of a turn's reply."""
    return f"{REPLY_PREFIX}{turn_id}"


def serial_key(address: Address) -> str:
    return f"chat:{address}"


async def enqueue_delivery(queue: JobQueue, job_id: str, delivery: Delivery) -> bool:
    """Queue a delivery (idempotent by `job_id`); True when it was new."""
    return await queue.enqueue(
        job_id,
        delivery_kind(delivery.to.channel),
        delivery,
        serial_key=serial_key(delivery.to),
        max_attempts=DELIVERY_MAX_ATTEMPTS,
    )


async def enqueue_reply(queue: JobQueue, turn: Job) -> bool:
    """Queue the reply delivery of a finished channel turn (idempotent)."""
    request = turn_request(turn)
    reply_to = request.reply_to if request is not None else None
    if reply_to is None or not reply_to.to:
        return False
    try:
        to = Address.parse(reply_to.to)
    except ValueError as exc:
        log.info("turn %s has no reply: reply_to.to %s", turn.id, exc)
        return False
    delivery = ReplyDelivery(to, turn.id, reply_to.message or None, reply_to.voice)
    return await enqueue_delivery(queue, reply_id(turn.id), delivery)


class DeliveryWorker:
    """The handler of delivery jobs: `run(lease)` for a Pool."""

    def __init__(
        self,
        queue: JobQueue,
        store: ChannelStore,
        adapter_for: AdapterFor,
        failure_text: FailureText,
        settled: Settled | None = None,
        hooks: HookFirer | None = None,
        blobs: BlobStore | None = None,
        activity: ActivityLog | None = None,
        speaker: ReplySpeaker | None = None,
        language_of: Callable[[str], str] | None = None,
    ):
        self.queue = queue
        # speaks replies whose chat asked for voice (tts:); None: they go as text
        self.speaker = speaker
        # A file delivery's blob may have been stored by another node (PostgreSQL homes):
        # fetched here before sending.
        self.blobs = blobs
        self.store = store
        self.adapter_for = adapter_for
        self.failure_text = failure_text
        # waits until a turn's progress draft is final, so removing it cannot race its creation
        self.settled = settled
        self.hooks = hooks
        self.activity = activity or ActivityLog()
        # the language tag of a channel (Config.language_of): a failure's notice and an
        # unsent part's are said in it
        self.language_of = language_of

    async def run(self, lease: Lease) -> dict[str, Any]:
        delivery = payload_of(lease.job, DELIVERIES)
        address = delivery.to
        adapter = await self.adapter_for(address.channel)
        if adapter is None:
            # Not connected right now: the queue's backoff retries later.
            raise SendError(f"channel {address.channel} is not connected")
        token = SENDING.set(Sending(lease.job.id, delivery))
        language = self.language_of(address.channel) if self.language_of is not None else ""
        try:
            with use_language(language):
                return await self._deliver(lease, adapter, delivery)
        except Undeliverable as exc:
            self.activity.failed(address.channel, f"delivery {lease.job.id}: {exc}")
            raise PermanentJobError(f"undeliverable: {exc}") from None
        except SendError as exc:  # retried with the queue's backoff
            self.activity.failed(address.channel, f"delivery {lease.job.id}: {exc}")
            raise
        finally:
            SENDING.reset(token)

    async def _deliver(self, lease: Lease, adapter: Adapter, delivery: Delivery) -> dict[str, Any]:
        """Send one delivery of any kind (run() sets the chat's language around it)."""
        address = delivery.to
        if isinstance(delivery, ReplyDelivery):
            return await self._reply(lease, adapter, delivery)
        if isinstance(delivery, TextDelivery):
            result = await self._send_text(
                lease,
                adapter,
                address,
                delivery.text,
                reply_to=delivery.reply_to,
                buttons=[list(row) for row in delivery.buttons] or None,
            )
            self._message_out(lease, adapter, delivery, result, text=delivery.text)
            return result
        if isinstance(delivery, FileDelivery):
            result = await self._send_file(lease, adapter, delivery)
            sent = {"path": str(delivery.path), "name": delivery.name or delivery.path.name}
            self._message_out(lease, adapter, delivery, result, **sent, caption=delivery.caption)
            return result
        result = await self._send_poll(lease, adapter, delivery)
        options = list(delivery.options)
        self._message_out(
            lease, adapter, delivery, result, question=delivery.question, options=options
        )
        return result

    async def _reply(
        self, lease: Lease, adapter: Adapter, delivery: ReplyDelivery
    ) -> dict[str, Any]:
        turn_id = delivery.turn
        turn = await self.queue.get(turn_id)
        if turn is None:
            raise PermanentJobError(f"turn {turn_id} not found")
        if not turn.finished:
            raise SendError(f"turn {turn_id} has not finished")
        if self.settled is not None:
            await self.settled(turn_id)
        await self._remove_draft(adapter, turn_id)
        text = ""
        if turn.status == "done":
            text = str((turn.result or {}).get("reply", "")).strip()
        elif turn.status == "failed" and not (turn.error or "").startswith(SILENT):
            # (a [SILENT] failure is told otherwise: a spending limit's, once per period)
            text = self.failure_text(turn.error or "unknown error")
        if not text or text == SILENT:  # a silent or stopped turn: only its draft goes
            return {"chunks": 0}
        SENDING.set(Sending(lease.job.id, delivery, turn.status))
        # Only an answer is read aloud (a failure's notice is text), and only where the
        # chat can get a file.
        voice = delivery.voice if turn.status == "done" and adapter.can("files") else ""
        if voice == "only":
            spoken = await self._voice_note(lease, adapter, delivery, text)
            if spoken is not None:
                self._message_out(
                    lease, adapter, delivery, spoken, turn=turn_id, status=turn.status,
                    text=text, voice=True,
                )  # fmt: skip
                return spoken
        result = await self._send_text(
            lease, adapter, delivery.to, text, reply_to=delivery.reply_to
        )
        if voice == "also":
            spoken = await self._voice_note(lease, adapter, delivery, text)
            if spoken is not None:
                result["messages"] = [*result["messages"], *spoken["messages"]]
                result["voice"] = True
        # A reply read aloud says so to the message_out hooks (`voice`); text alone does not.
        spoke = {"voice": True} if result.get("voice") else {}
        self._message_out(
            lease, adapter, delivery, result, turn=turn_id, status=turn.status, text=text,
            **spoke,
        )  # fmt: skip
        return result

    async def _voice_note(
        self, lease: Lease, adapter: Adapter, delivery: ReplyDelivery, text: str
    ) -> dict[str, Any] | None:
        """The reply spoken and sent as a voice note (chunk VOICE_CHUNK, so a retry does not
        send it twice); None when it could not be spoken or this chat refused it, so the
        text is what the user gets (never a retry loop on the speech)."""
        sent = await self.store.sent_chunks(lease.job.id)
        if VOICE_CHUNK in sent:
            return {"chunks": 1, "messages": [sent[VOICE_CHUNK]], "voice": True}
        spoken = await self.speaker.speak(text) if self.speaker is not None else None
        if spoken is None:
            return None
        # Recorded as started like a file or poll: a crash mid-send leaves a trace a
        # platform that can look (Slack) uses before sending the note again.
        attempted = await self._attempted(adapter, lease.job.id)
        await self._start(lease, adapter, VOICE_CHUNK)
        _sending_chunk(VOICE_CHUNK, attempted.get(VOICE_CHUNK, 0.0))
        try:
            message_id = await adapter.send_voice(
                delivery.to, spoken.path, duration=spoken.duration, name=spoken.name
            )
        except Unsupported as exc:  # over the limit, a kind it refuses: the text goes
            log.info("a voice reply to %s was refused: %s", delivery.to, exc)
            return None
        self.activity.message_out(delivery.to.channel)
        await self.store.record_chunk(lease, VOICE_CHUNK, message_id)
        return {"chunks": 1, "messages": [message_id], "voice": True}

    def _message_out(
        self,
        lease: Lease,
        adapter: Adapter,
        delivery: Delivery,
        result: dict[str, Any],
        **fields: Any,
    ) -> None:
        """Fire the message_out hooks of a delivery that went out (subject: the account)."""
        if self.hooks is None:
            return
        to = delivery.to
        self.hooks.fire(
            "message_out",
            to.channel,
            {
                "channel": to.channel,
                "type": adapter.type,
                "conversation": to.conversation,
                "chat": to.chat,
                "thread": to.thread,
                "kind": _KINDS[type(delivery)],
                "delivery": lease.job.id,
                "messages": list(result.get("messages", [])),
                **fields,
            },
        )

    async def _remove_draft(self, adapter: Adapter, turn_id: str) -> None:
        draft = await self.store.draft(turn_id)
        if draft is None:
            return
        to, message_id = draft
        if adapter.can("edit"):
            try:
                await adapter.delete(Address.parse(to), message_id)
            except SendError as exc:
                log.info("could not remove the progress draft of %s: %s", turn_id, exc)
        await self.store.drop_draft(turn_id)

    async def _send_text(
        self,
        lease: Lease,
        adapter: Adapter,
        address: Address,
        text: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        first_chunk: int = 0,
    ) -> dict[str, Any]:
        chunks = adapter.render(text)
        started = -1  # the chunk whose start was written in the last trip
        attempted: dict[int, float] = {}
        if adapter.keyed_sends:
            sent = await self.store.sent_chunks(lease.job.id)
        else:
            indexes = range(first_chunk, first_chunk + len(chunks))
            progress = await self.store.begin_send(lease, indexes)
            sent, attempted = progress.sent, progress.attempted
            started = -1 if progress.started is None else progress.started
        ids = []
        for index, chunk in enumerate(chunks, start=first_chunk):
            if index in sent:
                ids.append(sent[index])
                continue
            last = index == first_chunk + len(chunks) - 1
            if index != started:
                await self._start(lease, adapter, index)
            _sending_chunk(index, attempted.get(index, 0.0))
            message_id = await adapter.send_text(
                address,
                chunk,
                reply_to=reply_to if index == first_chunk else None,
                buttons=buttons if last and adapter.can("buttons") else None,
            )
            self.activity.message_out(address.channel)  # a note in memory: no wait
            # Nothing slow between the answer and the record: a crash there may double
            # the chunk on a platform without keyed sends. The next chunk's attempt goes
            # in the same trip.
            started = index + 1 if not last and not adapter.keyed_sends else -1
            await self.store.record_chunk(
                lease, index, message_id, then=started if started >= 0 else None
            )
            ids.append(message_id)
        return {"chunks": len(chunks), "messages": ids}

    async def _attempted(self, adapter: Adapter, job: str) -> dict[int, float]:
        """When the unrecorded sends of `job`'s chunks started (none where sends are keyed)."""
        if adapter.keyed_sends:
            return {}
        return await self.store.attempted_chunks(job)

    async def _start(self, lease: Lease, adapter: Adapter, index: int) -> None:
        """Write that the send of chunk `index` starts, where the platform cannot drop a
        resend by itself (a lost lease raises here, before anything is sent)."""
        if not adapter.keyed_sends:
            await self.store.start_chunk(lease, index)

    async def _send_file(
        self, lease: Lease, adapter: Adapter, delivery: FileDelivery
    ) -> dict[str, Any]:
        sent = await self.store.sent_chunks(lease.job.id)
        if 0 in sent:
            return {"messages": [sent[0]]}
        path = delivery.path
        name = delivery.name or path.name
        if self.blobs is not None:
            with contextlib.suppress(BlobNotFound):  # then it is "no longer on disk"
                path = await self.blobs.ensure_local(path)
        reason = ""
        on_disk = await asyncio.to_thread(path.is_file)
        if not on_disk:
            reason = t("chat.unsent.gone")
        elif not adapter.can("files"):
            reason = t("chat.unsent.no_files", type=adapter.type)
        else:
            attempted = await self._attempted(adapter, lease.job.id)
            await self._start(lease, adapter, 0)
            _sending_chunk(0, attempted.get(0, 0.0))
            try:
                if delivery.voice:
                    message_id = await adapter.send_voice(
                        delivery.to,
                        path,
                        duration=delivery.duration,
                        caption=delivery.caption,
                        name=name,
                    )
                else:
                    message_id = await adapter.send_file(
                        delivery.to, path, caption=delivery.caption, name=name
                    )
            except Unsupported as exc:  # over the platform's limit, a kind it refuses
                reason = str(exc)
            else:
                self.activity.message_out(delivery.to.channel)
                await self.store.record_chunk(lease, 0, message_id)
                return {"messages": [message_id]}
        if on_disk:  # where it is, so the user can still get it
            reason = t("chat.unsent.saved_at", reason=reason, path=path)
        await self._unsent(
            lease,
            adapter,
            delivery.to,
            t("chat.unsent.file", name=name),
            reason,
            caption=delivery.caption,
        )

    async def _unsent(
        self,
        lease: Lease,
        adapter: Adapter,
        to: Address,
        what: str,
        reason: str,
        *,
        caption: str = "",
    ) -> NoReturn:
        """Tell the chat that `what` was not sent and why (after its `caption`, which is
        still worth reading), once, then fail the job for good (PermanentJobError, its
        error starting UNSENT_PREFIX). A notice that cannot be sent either is the job's
        error (retried, or final when the chat is gone)."""
        notice = unsent_notice(what, reason)
        text = f"{caption.strip()}\n\n{notice}" if caption.strip() else notice
        await self._send_text(lease, adapter, to, text, first_chunk=NOTICE_CHUNK)
        raise PermanentJobError(f"{UNSENT_PREFIX}{what}: {reason} (the chat was told)")

    async def _send_poll(
        self, lease: Lease, adapter: Adapter, delivery: PollDelivery
    ) -> dict[str, Any]:
        question, options, multiple = delivery.question, list(delivery.options), delivery.multiple
        as_text = poll_as_text(question, options, multiple)
        if not adapter.can("polls"):
            return await self._send_text(lease, adapter, delivery.to, as_text)
        sent = await self.store.sent_chunks(lease.job.id)
        if 0 in sent:
            return {"messages": [sent[0]]}
        attempted = await self._attempted(adapter, lease.job.id)
        await self._start(lease, adapter, 0)
        _sending_chunk(0, attempted.get(0, 0.0))
        try:
            message_id = await adapter.send_poll(delivery.to, question, options, multiple=multiple)
        except Unsupported:  # this poll refused (too many options, ...): it goes as text
            return await self._send_text(
                lease, adapter, delivery.to, as_text, first_chunk=NOTICE_CHUNK
            )
        self.activity.message_out(delivery.to.channel)
        await self.store.record_chunk(lease, 0, message_id)
        return {"messages": [message_id]}
