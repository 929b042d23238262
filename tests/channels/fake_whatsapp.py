"""WhatsApp for tests, at the library's event boundary.

WhatsApp's wire is end-to-end encrypted (a Noise handshake, then Signal sessions) over a
websocket to WhatsApp's own servers: there is no public wire to fake. So the fake stands
where the adapter meets the library: `MemoryClient` implements the adapter's narrow
`WhatsAppClient` Protocol (habakkuk/channels/whatsapp_client.py) and produces neonize's
real protobuf events (`neonize.proto.Neonize_pb2.Message`, `Connected`, ...) carrying
real WhatsApp message protobufs (`waE2E.Message`), so the adapter's parsing runs on the
library's own types; what the bot sends is the protobuf it built, read back here.

`FakeWhatsApp` is the network: which device stores are linked (a QR code is "scanned"
with `scan()`), people writing (`message`, `replay`, `drop`), the media they sent and
the bot uploaded, and everything the bot sent (`sent`, `texts`, `files`). Tests install
it as the client factory with `install(monkeypatch)`.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf.message import Message as ProtoMessage
from neonize.exc import DownloadError, SendMessageError
from neonize.proto import Neonize_pb2 as ev
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import (
    AudioMessage,
    ContextInfo,
    DocumentMessage,
    ExtendedTextMessage,
    ImageMessage,
)
from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage
from neonize.utils.enum import ChatPresence, ChatPresenceMedia, MediaType

from habakkuk.channels import whatsapp_client
from tests.helpers import eventually

ME = "4915100000001"  # the linked device's number
ME_LID = "99887766554433"
PERSON = "4915123456789"  # the allowed person
PERSON_LID = "11223344556677"
GROUP = "120363000000000001@g.us"

E = TypeVar("E", bound=ProtoMessage)


def complete(message: ProtoMessage) -> None:
    """Give every unset required field (neonize's events are proto2) its default, as the
    Go core fills them all: an event must survive the library's own FromString."""
    for field_ in message.DESCRIPTOR.fields:
        if not field_.is_required:
            nested = field_.message_type is not None and not field_.is_repeated
            if nested and message.HasField(field_.name):
                complete(getattr(message, field_.name))
            continue
        if field_.message_type is not None:
            complete(getattr(message, field_.name))  # touching it sets it
            getattr(message, field_.name).SetInParent()
        elif not message.HasField(field_.name):
            setattr(message, field_.name, field_.default_value)


def jid(user: str, server: str = "s.whatsapp.net") -> ev.JID:
    return ev.JID(User=user, Server=server, Device=0, RawAgent=0, Integrator=0, IsEmpty=False)


@dataclass
class Sent:
    """One message the bot sent: to which chat, the protobuf it built, the id it got."""

    chat: str
    message: WAMessage
    id: str

    @property
    def text(self) -> str:
        m = self.message
        return m.conversation or m.extendedTextMessage.text or m.imageMessage.caption


class MemoryEvents:
    """neonize's `client.event` registry: handlers by event type, and the QR handler."""

    def __init__(self) -> None:
        self.handlers: dict[type[ProtoMessage], Callable[[Any, Any], Awaitable[None]]] = {}
        self.qr_handler: Callable[[Any, bytes], Coroutine[None, None, None]] | None = None

    def __call__(self, event: type[E]) -> Callable[[Callable[[Any, E], Awaitable[None]]], None]:
        def register(handler: Callable[[Any, E], Awaitable[None]]) -> None:
            self.handlers[event] = handler

        return register

    def qr(self, f: Callable[[Any, bytes], Coroutine[None, None, None]]) -> None:
        self.qr_handler = f


class MemoryClient:
    """One client on the fake network, for one device store."""

    def __init__(self, network: FakeWhatsApp, db_path: Path):
        self.network = network
        self.db_path = db_path
        self._event = MemoryEvents()
        self.connected = False
        self.stopped = asyncio.Event()

    @property
    def event(self) -> MemoryEvents:
        return self._event

    async def emit(self, event: ProtoMessage) -> None:
        """Hand an event to its handler, as the library does (on our loop)."""
        handler = self._event.handlers.get(type(event))
        if handler is not None:
            await handler(self, event)

    async def connect(self) -> asyncio.Task[None]:
        network = self.network
        network.clients.append(self)

        async def come_up() -> None:
            if network.refusal is not None:
                await self.emit(network.refusal)
                return
            if str(self.db_path) not in network.linked:
                network.waiting_scan.append(self)
                assert self._event.qr_handler is not None
                await self._event.qr_handler(self, b"2@fake-pairing-code,abc,def,ghi")
                if network.scan_on_qr:
                    await network.scan()
                return
            await self._up()

        return asyncio.get_running_loop().create_task(come_up())

    async def _up(self) -> None:
        self.connected = True
        await self.emit(ev.Connected(status=True))
        for pending in list(self.network.pending):  # what was not acked comes again
            await self.network.deliver(pending)

    async def idle(self) -> None:
        await self.stopped.wait()

    async def disconnect(self) -> None:
        self.connected = False

    async def stop(self) -> None:
        self.connected = False
        self.stopped.set()

    async def get_me(self) -> ev.Device:
        if str(self.db_path) not in self.network.linked:
            return ev.Device()
        return ev.Device(JID=jid(ME), LID=jid(ME_LID, "lid"), PushName="Habakkuk")

    async def send_message(self, to: ev.JID, message: WAMessage) -> ev.SendResponse:
        network = self.network
        if not self.connected:
            raise SendMessageError("websocket not connected")
        if network.send_error:
            raise SendMessageError(network.send_error)
        if network.held is not None:
            await network.held.wait()
        sent = Sent(f"{to.User}@{to.Server}", message, f"3EB0{next(network.ids):012X}")
        network.sent.append(sent)
        return ev.SendResponse(ID=sent.id, Timestamp=int(time.time()))

    async def upload(self, binary: bytes, media_type: MediaType | None = None) -> ev.UploadResponse:
        digest = hashlib.sha256(binary).digest()
        path = f"/v/t62/{digest.hex()[:16]}"
        self.network.media[path] = binary
        return ev.UploadResponse(
            url=f"https://mmg.whatsapp.net{path}",
            DirectPath=path,
            MediaKey=b"k" * 32,
            FileEncSHA256=digest,
            FileSHA256=digest,
            FileLength=len(binary),
        )

    async def download_any(self, message: WAMessage) -> bytes | None:
        for part in ("imageMessage", "documentMessage", "audioMessage", "videoMessage"):
            if message.HasField(part):
                data = self.network.media.get(getattr(message, part).directPath)
                if data is None:
                    raise DownloadError("failed to download: 404")
                return data
        raise DownloadError("no media in message")

    async def send_chat_presence(
        self, jid: ev.JID, state: ChatPresence, media: ChatPresenceMedia
    ) -> None:
        self.network.presences.append((f"{jid.User}@{jid.Server}", state))


@dataclass
class FakeWhatsApp:
    """The fake network. `install(monkeypatch)` makes the adapter's clients ours."""

    linked: set[str] = field(default_factory=set)
    clients: list[MemoryClient] = field(default_factory=list)
    waiting_scan: list[MemoryClient] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    presences: list[tuple[str, ChatPresence]] = field(default_factory=list)
    media: dict[str, bytes] = field(default_factory=dict)
    # messages handed out but not yet acknowledged: delivered again on the next connect
    pending: list[ev.Message] = field(default_factory=list)
    refusal: ProtoMessage | None = None  # an event every connect gets instead of Connected
    send_error: str = ""
    held: asyncio.Event | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    link_all: bool = True  # a device store opened by a test counts as linked
    scan_on_qr: bool = False  # the person scans each QR code as soon as it is shown

    def open(self, db_path: Path) -> whatsapp_client.WhatsAppClient:
        """The client factory (habakkuk.channels.whatsapp_client.open_client's place)."""
        if self.link_all:
            self.linked.add(str(db_path))
        return MemoryClient(self, db_path)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(whatsapp_client, "open_client", self.open)

    @property
    def client(self) -> MemoryClient:
        """The newest connected client."""
        live = [c for c in self.clients if c.connected]
        assert live, "no connected WhatsApp client"
        return live[-1]

    async def connected(self) -> MemoryClient:
        await eventually(lambda: any(c.connected for c in self.clients), what="a client up")
        return self.client

    async def scan(self) -> None:
        """The person scans the QR code: the waiting device is linked and connects."""
        await eventually(lambda: bool(self.waiting_scan), what="a QR code shown")
        client = self.waiting_scan.pop()
        self.linked.add(str(client.db_path))
        await client.emit(ev.PairStatus(ID=jid(ME), Status=ev.PairStatus.PStatus.Value("SUCCESS")))
        await client._up()

    # -- people writing -----------------------------------------------------------------

    def event(
        self,
        content: WAMessage,
        *,
        sender: str = PERSON,
        chat: str = "",
        lid: bool = False,
        name: str = "Alice",
        message_id: str = "",
    ) -> ev.Message:
        """A message event as the library delivers it."""
        chat_jid = chat or f"{sender}@s.whatsapp.net"
        user, _, server = chat_jid.partition("@")
        group = server == "g.us"
        sender_jid, alt = jid(sender), ev.JID()
        if lid:
            sender_jid, alt = (
                jid(PERSON_LID if sender == PERSON else sender[::-1], "lid"),
                jid(sender),
            )
        source = ev.MessageSource(
            Chat=jid(user, server), Sender=sender_jid, SenderAlt=alt, IsGroup=group
        )
        info = ev.MessageInfo(
            MessageSource=source,
            ID=message_id or f"3A{next(self.ids):014X}",
            Pushname=name,
            Timestamp=int(time.time()),
            Type="text",
        )
        event = ev.Message(Info=info, Message=content)
        complete(event)
        assert event.IsInitialized()
        return event

    async def deliver(self, event: ev.Message) -> None:
        """Hand a message to the connected client; acked once its handler returned."""
        if event not in self.pending:
            self.pending.append(event)
        live = [c for c in self.clients if c.connected]
        if not live:
            return  # stays pending: the next connect gets it
        await live[-1].emit(event)
        self.pending.remove(event)

    async def message(self, text: str = "", **how: Any) -> ev.Message:
        """Someone writes `text` (kwargs: sender, chat, lid, mentions, quote, reply_to_me)."""
        mentions: list[str] = how.pop("mentions", [])
        quote: str = how.pop("quote", "")
        context = ContextInfo(mentionedJID=mentions)
        if quote:
            context.stanzaID = quote
            context.participant = f"{ME}@s.whatsapp.net"
        if mentions or quote:
            content = WAMessage(
                extendedTextMessage=ExtendedTextMessage(text=text, contextInfo=context)
            )
        else:
            content = WAMessage(conversation=text)
        event = self.event(content, **how)
        await self.deliver(event)
        return event

    async def file(
        self, name: str, data: bytes, media_type: str, caption: str = "", **how: Any
    ) -> ev.Message:
        """Someone sends a file: an image, a voice note (.ogg) or a document."""
        path = f"/v/in/{hashlib.sha256(data).hexdigest()[:16]}"
        self.media[path] = data
        common: dict[str, Any] = {
            "URL": f"https://mmg.whatsapp.net{path}",
            "directPath": path,
            "mediaKey": b"m" * 32,
            "fileSHA256": hashlib.sha256(data).digest(),
            "fileEncSHA256": hashlib.sha256(data).digest(),
            "fileLength": len(data),
            "mimetype": media_type,
        }
        if media_type.startswith("image/"):
            content = WAMessage(
                imageMessage=ImageMessage(caption=caption, JPEGThumbnail=b"t" * 900, **common)
            )
        elif media_type.startswith("audio/"):
            content = WAMessage(
                audioMessage=AudioMessage(PTT=name.endswith(".ogg"), seconds=2, **common)
            )
        else:
            doc = DocumentMessage(fileName=name, caption=caption, **common)
            content = WAMessage(documentMessage=doc)
        event = self.event(content, **how)
        await self.deliver(event)
        return event

    async def replay(self, event: ev.Message) -> None:
        """WhatsApp delivers the same message again (as after a missing ack)."""
        await self.deliver(event)

    async def drop(self) -> None:
        """The websocket closes under the client."""
        for client in [c for c in self.clients if c.connected]:
            client.connected = False
            await client.emit(ev.Disconnected(status=True))

    # -- what the bot did ------------------------------------------------------------------

    def texts(self, chat: str = f"{PERSON}@s.whatsapp.net") -> list[str]:
        """The text of every text message the bot sent to `chat`, oldest first."""
        return [
            s.text
            for s in self.sent
            if s.chat == chat
            and (s.message.conversation or s.message.HasField("extendedTextMessage"))
        ]

    def files(self, chat: str = f"{PERSON}@s.whatsapp.net") -> list[tuple[str, bytes]]:
        found: list[tuple[str, bytes]] = []
        for s in self.sent:
            m = s.message
            if s.chat != chat:
                continue
            if m.HasField("documentMessage"):
                found.append((m.documentMessage.fileName, self.media[m.documentMessage.directPath]))
            elif m.HasField("imageMessage"):
                found.append(("image", self.media[m.imageMessage.directPath]))
            elif m.HasField("audioMessage"):
                found.append(("audio", self.media[m.audioMessage.directPath]))
        return found

    async def wait_for(self, predicate: Callable[[], bool], what: str = "the bot") -> None:
        await eventually(predicate, what=what)


class WhatsAppDriver:
    """The PlatformDriver of the fake: the allowed person in a private chat with the bot."""

    kind = "whatsapp"
    has_buttons = False

    def __init__(self, network: FakeWhatsApp):
        self.network = network

    def channel_yaml(self, name: str) -> str:
        return f"type: whatsapp\nallow_from: ['+{PERSON}']\n"

    def env(self) -> dict[str, str]:
        return {}

    async def say(self, text: str) -> None:
        await self.network.message(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        await self.network.file(name, data, media_type, caption)

    async def press(self, label: str) -> None:
        raise AssertionError("WhatsApp linked devices have no buttons")

    def texts(self) -> list[str]:
        return self.network.texts()

    def files(self) -> list[tuple[str, bytes]]:
        return self.network.files()
