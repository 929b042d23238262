"""Signal through a signal-cli daemon in HTTP mode (`signal-cli daemon --http`).

- In: the daemon's Server-Sent Events stream (`GET /api/v1/events?account=...`), one
  `receive` event per envelope and a `:` keepalive comment every 15 s; both beat. A
  stream that ends after it was heard from is reopened at once; one that cannot open
  ends the run (the supervisor backs off). Messages of different chats are handed to the
  gateway at once, each chat's in order (lanes.py); one it cannot take ends the run.
- Out: JSON-RPC 2.0 on `POST /api/v1/rpc` (send, sendTyping, sendReaction, remoteDelete,
  getAttachment), every request naming `account` so a multi-account daemon picks ours.
- A private chat is the person's UUID (their ACI), a group chat is its base64 group id;
  the phone number is the sender's alias (allow_from and pairing match either).
- A message id is `<timestamp>@<author>` for what people send (Signal names a message by
  its author and timestamp: quotes and reactions need both) and the bare timestamp the
  send returned for ours.
- Text goes out plain with style ranges (signal_format.py); files as base64 data URIs.
- Groups: a message is addressed to us when it mentions our number, quotes one of our
  messages, or is a /command.

What survives a restart: the SSE stream has no replay position. signal-cli stores each
envelope, acknowledges it to Signal's server and then pushes it to the connected
streams; an envelope pushed while no stream is open is gone for us. Run the daemon with
`--receive-mode on-connection`, so it receives only while Habakkuk's stream is open and
Signal's server keeps what arrives meanwhile (for weeks) until we reconnect. What can
be lost at a crash: the envelopes in flight (read, not yet taken by the gateway: the
LANES being handed over at most, and the next one waiting for a slot), and any pushed
before the daemon notices the stream is gone (its next write fails: at most one
keepalive, 15 s). An envelope signal-cli pushes again (killed between pushing and
clearing its message cache, it handles the cached envelope again) keeps its timestamp
and author, so the gateway drops it as seen. Sends carry no idempotency key
(signal-cli has none, and no history of what we sent to look in): a crash between Signal
accepting a chunk and its id being recorded resends that one chunk, as with Telegram. The
window is only the time from signal-cli's answer to the record (channels/deliveries.py),
and the start of each send is written first (delivery_attempts), so such a chunk is known.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import mimetypes
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import (
    Adapter,
    Address,
    Attachment,
    Beat,
    Button,
    Capability,
    FatalAdapterError,
    InboundMessage,
    Inbox,
    SendError,
    Undeliverable,
    Unsupported,
)
from .format import markdown_chunks
from .lanes import Lanes
from .platforms import AdapterContext
from .signal_format import signal_chunks, styled
from .signal_rpc import DEFAULT_BASE_URL, MISDIRECTED, SignalRpc
from .signal_setup import SETUP as SETUP  # the registry reads a platform's step here
from .signal_wire import DataMessage, Envelope, FileRef, SseEvent, parse_event
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

# Signal's limit on an attachment.
FILE_LIMIT = 100 * 1024 * 1024
# Signal clients show at most this many edits of a message; later ones are dropped.
MAX_EDITS = 10
# Messages handed to the gateway at once (each chat's in order): its writes of different
# chats share the store's batches, and a slow one holds up only its own chat.
LANES = 16
# An SSE line longer than this is not signal-cli talking (its events are one JSON line).
MAX_LINE = 16 * 1024 * 1024
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_NUMBER = re.compile(r"\+\d{3,15}")


def is_person(chat: str) -> bool:
    """True for a private chat (a UUID or a phone number), False for a group id."""
    return bool(_UUID.fullmatch(chat) or _NUMBER.fullmatch(chat))


def message_key(timestamp: int, author: str) -> str:
    """The message id of a person's message (see the module's docstring)."""
    return f"{timestamp}@{author}"


class SignalAdapter(Adapter):
    """One Signal account served by a signal-cli HTTP daemon."""

    type = "signal"
    capabilities: frozenset[Capability] = frozenset(
        {"edit", "typing", "reactions", "files", "download"}
    )
    max_file_bytes = FILE_LIMIT

    def __init__(self, config: ChannelConfig):
        super().__init__(config.name)
        self.config = config
        self.rpc = SignalRpc(config.base_url or DEFAULT_BASE_URL, config.account or "")
        self.base_url = self.rpc.base_url
        self.number = self.rpc.number
        self.self_uuid = ""  # learnt from an envelope of our own (a sync message)
        self._edits: dict[str, int] = {}
        self._reactions: dict[tuple[str, str], str] = {}
        self._heard = False

    async def close(self) -> None:
        """Close the HTTP session for good (idempotent; later calls raise SendError)."""
        await self.rpc.close()

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        while True:
            heard = await self._stream(inbox, beat)
            if not heard:
                return  # ended before a word: let the supervisor back off

    async def _stream(self, inbox: Inbox, beat: Beat) -> bool:
        """Follow the event stream until it ends; True when anything came through it."""
        url = f"{self.base_url}/api/v1/events?account={quote(self.number, safe='')}"
        self._heard = False
        try:
            async with self.rpc.session().get(
                url, headers={"Accept": "text/event-stream"}
            ) as response:
                if response.status == 400:
                    raise FatalAdapterError(
                        f"events: the daemon at {self.base_url} has no account {self.number} "
                        f"(register or link it: signal-cli -a {self.number} register)"
                    )
                if response.status == 421:
                    raise FatalAdapterError(MISDIRECTED.format(base=self.base_url))
                if response.status != 200:
                    raise SendError(f"events: HTTP {response.status}")
                beat()
                try:
                    await self._read(response, inbox, beat)
                except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
                    if not self._heard:
                        raise
                    log.info("signal %s: the event stream dropped (%s)", self.account, exc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SendError(f"events: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        return self._heard

    async def _read(self, response: aiohttp.ClientResponse, inbox: Inbox, beat: Beat) -> None:
        """Read events until the stream ends, each chat's messages handed over in order
        and different chats' at once (lanes.py); a message the gateway could not take
        ends the read with its error at once. Those in flight are waited for when the
        stream ends or drops (pushed to us, they are nowhere else), cancelled at a failure
        or a stop."""
        failed: asyncio.Future[Exception] = asyncio.get_running_loop().create_future()

        async def hand_over(message: InboundMessage) -> None:
            try:
                await inbox(message)
            except Exception as exc:  # the gateway could not take it: the run ends with it
                if not failed.done():
                    failed.set_result(exc)
                raise

        def forget_done() -> None:
            with contextlib.suppress(Exception):  # a failure is `failed`'s to report
                lanes.through()

        lanes: Lanes[InboundMessage] = Lanes(hand_over, forget_done, width=LANES, name="signal")
        reader = asyncio.create_task(self._lines(response, lanes, beat), name="signal:read")
        try:
            either: set[asyncio.Future[Any]] = {reader, failed}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not failed.done():  # the stream ended or dropped: those in flight still go in
                with contextlib.suppress(Exception):  # a failure is `failed`'s to report
                    await lanes.drain()
            if failed.done():
                raise failed.result()
            reader.result()  # the stream's own error, if it ended with one
        finally:
            await cancel_and_wait(reader)
            await lanes.cancel()

    async def _lines(
        self, response: aiohttp.ClientResponse, lanes: Lanes[InboundMessage], beat: Beat
    ) -> None:
        """The stream's lines as events, each message to the lane of its chat (`_heard`
        once a line came)."""
        buffer = b""
        event = SseEvent()
        seq = 0
        async for piece in response.content.iter_any():
            buffer += piece
            if len(buffer) > MAX_LINE and b"\n" not in buffer:
                raise SendError(f"events: a line over {MAX_LINE} bytes")
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                self._heard = True
                beat()
                done = event.feed(raw.decode("utf-8", errors="replace").rstrip("\r"))
                if done is not None:
                    message = self._on_event(done)
                    if message is not None:
                        seq += 1
                        await lanes.submit(message.chat, seq, message)  # waits for a slot
                    beat()
                    event = SseEvent()

    def _on_event(self, event: SseEvent) -> InboundMessage | None:
        """The person's message an event carries, if any."""
        if event.name not in ("receive", "message") or not event.data:
            return None
        try:
            envelope = parse_event("\n".join(event.data))
        except ValueError as exc:
            log.warning("signal %s: an event that is not signal-cli's JSON: %s", self.account, exc)
            return None
        if envelope is None:
            return None
        if envelope.account and envelope.account != self.number:
            raise FatalAdapterError(
                f"the daemon at {self.base_url} serves {envelope.account}, not {self.number} "
                "(a single-account daemon: start it without -a, or with this account)"
            )
        if envelope.error:
            log.info("signal %s: an envelope it could not read: %s", self.account, envelope.error)
        return self.convert(envelope)

    def _is_self(self, uuid: str, number: str) -> bool:
        return bool((number and number == self.number) or (uuid and uuid == self.self_uuid))

    def convert(self, envelope: Envelope) -> InboundMessage | None:
        """An envelope as an InboundMessage (None for what is not a person's message)."""
        if envelope.source_number == self.number and envelope.source_uuid:
            self.self_uuid = envelope.source_uuid
        data = envelope.data
        sender = envelope.source_uuid or envelope.source_number
        if data is None or data.is_control or not sender:
            return None
        if self._is_self(envelope.source_uuid, envelope.source_number):
            return None
        if not data.text and not data.attachments:
            return None  # a sticker, a shared contact, a payment: nothing to read
        is_group = bool(data.group_id)
        chat = data.group_id if is_group else sender
        text, mentioned = self._text(data)
        quoted = data.quote is not None and self._is_self(
            data.quote.author_uuid, data.quote.author_number
        )
        timestamp = data.timestamp or envelope.timestamp
        return InboundMessage(
            channel=self.account,
            chat=chat,
            message_id=message_key(timestamp, sender),
            sender=sender,
            sender_aliases=[envelope.source_number]
            if envelope.source_number and envelope.source_uuid
            else [],
            sender_name=envelope.source_name,
            text=text,
            is_group=is_group,
            addressed=not is_group or mentioned or quoted or text.startswith("/"),
            attachments=[_attachment(ref, chat) for ref in data.attachments],
            at=timestamp / 1000 if timestamp else 0.0,
        )

    def _text(self, data: DataMessage) -> tuple[str, bool]:
        """The text with each mention written out (ours removed); and whether we were one."""
        if not data.mentions:
            return data.text.strip(), False
        units = data.text.encode("utf-16-le")
        pieces: list[bytes] = []
        position = 0
        mentioned = False
        for mention in sorted(data.mentions, key=lambda m: m.start):
            if mention.start < position:
                continue  # overlapping ranges: not what Signal sends
            pieces.append(units[position * 2 : mention.start * 2])
            if self._is_self(mention.uuid, mention.number):
                mentioned = True
            else:
                who = mention.number or mention.name or mention.uuid
                pieces.append(f"@{who}".encode("utf-16-le"))
            position = mention.start + mention.length
        pieces.append(units[position * 2 :])
        text = b"".join(pieces).decode("utf-16-le", errors="replace")
        return re.sub(r"[ \t]{2,}", " ", text).strip(), mentioned

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return signal_chunks(markdown)

    def _target(self, chat: str) -> dict[str, Any]:
        return {"recipient": [chat]} if is_person(chat) else {"groupId": chat}

    def _message_ref(self, message_id: str) -> tuple[int, str]:
        """A message id as (timestamp, author); ours are bare timestamps."""
        stamp, _, author = message_id.partition("@")
        try:
            return int(stamp), author or self.number
        except ValueError:
            raise Undeliverable(f"{message_id!r} is not a Signal message id") from None

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        body = styled(chunk)
        params = self._target(to.chat) | {"message": body.text}
        if body.styles:
            params["textStyle"] = body.text_style
        if reply_to:
            timestamp, author = self._message_ref(reply_to)
            params |= {"quoteTimestamp": timestamp, "quoteAuthor": author}
        if silent:
            params["noUrgent"] = True  # no push notification (the progress draft)
        result = await self.rpc.call("send", params)
        return _timestamp("send", result)

    async def edit_text(
        self, to: Address, message_id: str, chunk: str, buttons: list[list[Button]] | None = None
    ) -> None:
        edits = self._edits.get(message_id, 0)
        if edits >= MAX_EDITS:
            raise Undeliverable(f"Signal shows at most {MAX_EDITS} edits of a message")
        timestamp, _ = self._message_ref(message_id)
        body = styled(chunk)
        params = self._target(to.chat) | {"message": body.text, "editTimestamp": timestamp}
        if body.styles:
            params["textStyle"] = body.text_style
        await self.rpc.call("send", params)
        self._edits[message_id] = edits + 1

    async def delete(self, to: Address, message_id: str) -> None:
        timestamp, _ = self._message_ref(message_id)
        await self.rpc.call("remoteDelete", self._target(to.chat) | {"targetTimestamp": timestamp})
        self._edits.pop(message_id, None)

    async def typing(self, to: Address) -> None:
        await self.rpc.call("sendTyping", self._target(to.chat))

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:
        timestamp, author = self._message_ref(message_id)
        key = (to.chat, message_id)
        params = self._target(to.chat) | {"targetAuthor": author, "targetTimestamp": timestamp}
        if emoji:
            await self.rpc.call("sendReaction", params | {"emoji": emoji})
            self._reactions[key] = emoji
            return
        previous = self._reactions.pop(key, None)
        if previous:  # Signal removes a reaction by naming it
            await self.rpc.call("sendReaction", params | {"emoji": previous, "remove": True})

    async def download(self, attachment: Attachment) -> bytes:
        file_id, _, chat = attachment.file_id.partition("|")
        where = {"recipient": chat} if is_person(chat) else {"groupId": chat}
        result = await self.rpc.call("getAttachment", {"id": file_id} | where, timeout=300)
        encoded = result.get("data") if isinstance(result, dict) else None
        if not isinstance(encoded, str):
            raise SendError(f"getAttachment: no data for {attachment.name}")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise SendError(f"getAttachment: {attachment.name} is not base64") from None
        if len(data) > self.max_file_bytes:
            raise Undeliverable(f"{attachment.name} is over Signal's 100 MB limit")
        return data

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over Signal's 100 MB limit")
        media = mimetypes.guess_type(name)[0] or "application/octet-stream"
        encoded = base64.b64encode(data).decode("ascii")
        uri = f"data:{media};filename={quote(name, safe='')};base64,{encoded}"
        params = self._target(to.chat) | {"attachments": [uri]}
        if caption.strip():
            body = styled(markdown_chunks(caption, 1 << 20)[0])
            params["message"] = body.text
            if body.styles:
                params["textStyle"] = body.text_style
        try:
            result = await self.rpc.call("send", params, timeout=300)
        except Undeliverable:
            raise
        except SendError as exc:
            if "AttachmentInvalid" in str(exc):  # this file refused; the chat is reachable
                raise Unsupported(str(exc)) from None
            raise
        return _timestamp("send", result)


def _timestamp(method: str, result: Any) -> str:
    stamp = result.get("timestamp") if isinstance(result, dict) else None
    if not isinstance(stamp, int):
        raise SendError(f"{method}: the answer has no timestamp")
    return str(stamp)


def _attachment(ref: FileRef, chat: str) -> Attachment:
    media = ref.content_type.split(";")[0].strip().lower()
    kind: Literal["photo", "document", "voice", "audio", "video"] = "document"
    if media.startswith("image/"):
        kind = "photo"
    elif media.startswith("video/"):
        kind = "video"
    elif media.startswith("audio/"):
        # signal-cli does not say which audio is a voice note; Signal's recorder sends
        # one without a file name (a newer signal-cli's voiceNote flag is read too)
        kind = "voice" if ref.voice_note or not ref.filename else "audio"
    name = ref.filename or f"{kind}{mimetypes.guess_extension(media) or ''}"
    return Attachment(kind, f"{ref.id}|{chat}", name, ref.content_type, ref.size)


def build(config: ChannelConfig, context: AdapterContext) -> SignalAdapter:
    """The adapter of one Signal account (habakkuk.channels.platforms)."""
    return SignalAdapter(config)
