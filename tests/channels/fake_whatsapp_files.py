"""The WhatsApp fake across processes: a folder stands for WhatsApp's side.

For the kill -9 test the bot runs in a real `habakkuk --serve` subprocess, so the
in-memory fake (fake_whatsapp.py) cannot reach it. Here the same event boundary is
backed by files: the test writes each incoming message, neonize's own `Message` event
protobuf, to `inbox/`; the client in the subprocess hands each to the adapter and
deletes it once its handler returned (the acknowledgement: an unacknowledged message is
delivered again on the next connect, as WhatsApp does). Every message the bot sends is
written to `sent/` as `<n>.json` (chat, id, the protobuf in base64). A number in
`hold_after` makes sends after that many hang (a `held` file says one is hanging), so
the test can kill the process mid-delivery.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf.message import Message as ProtoMessage

if TYPE_CHECKING:
    from neonize.proto.Neonize_pb2 import JID, Device, SendResponse, UploadResponse
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage
    from neonize.utils.enum import ChatPresence, ChatPresenceMedia, MediaType

E = TypeVar("E", bound=ProtoMessage)
ME = "4915100000001"


class FileEvents:
    """neonize's `client.event` registry (handlers by event type, the QR handler)."""

    def __init__(self) -> None:
        self.handlers: dict[type[ProtoMessage], Callable[[Any, Any], Awaitable[None]]] = {}
        self.qr_handler: Callable[[Any, bytes], Coroutine[None, None, None]] | None = None

    def __call__(self, event: type[E]) -> Callable[[Callable[[Any, E], Awaitable[None]]], None]:
        def register(handler: Callable[[Any, E], Awaitable[None]]) -> None:
            self.handlers[event] = handler

        return register

    def qr(self, f: Callable[[Any, bytes], Coroutine[None, None, None]]) -> None:
        self.qr_handler = f


class FileClient:
    """A linked device whose WhatsApp is the folder `root`."""

    def __init__(self, root: Path):
        self.root = root
        self._event = FileEvents()
        self.stopped = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)

    @property
    def event(self) -> FileEvents:
        return self._event

    async def _emit(self, event: ProtoMessage) -> None:
        handler = self._event.handlers.get(type(event))
        if handler is not None:
            await handler(self, event)

    async def connect(self) -> asyncio.Task[None]:
        from neonize.proto import Neonize_pb2 as ev

        async def run() -> None:
            await self._emit(ev.Connected(status=True))
            inbox = self.root / "inbox"
            while not self.stopped.is_set():
                for path in sorted(inbox.glob("*.bin")):
                    await self._emit(ev.Message.FromString(path.read_bytes()))
                    path.unlink()  # acknowledged
                await asyncio.sleep(0.05)

        self._poller = asyncio.get_running_loop().create_task(run())
        return self._poller

    async def idle(self) -> None:
        await self.stopped.wait()

    async def disconnect(self) -> None:
        if self._poller is not None:
            self._poller.cancel()

    async def stop(self) -> None:
        self.stopped.set()

    async def get_me(self) -> Device:
        from neonize.proto import Neonize_pb2 as ev

        return ev.Device(JID=ev.JID(User=ME, Server="s.whatsapp.net"))

    async def send_message(self, to: JID, message: WAMessage) -> SendResponse:
        from neonize.proto import Neonize_pb2 as ev

        sent = self.root / "sent"
        hold = self.root / "hold_after"
        if hold.exists() and len(list(sent.iterdir())) >= int(hold.read_text()):
            (self.root / "held").write_text("1")
            await asyncio.Event().wait()  # hangs until the process is killed
        number = len(list(sent.iterdir())) + 1
        message_id = f"3EB0{os.getpid():06d}{next(self._ids):06d}"
        record = {
            "chat": f"{to.User}@{to.Server}",
            "id": message_id,
            "message": base64.b64encode(message.SerializeToString()).decode(),
        }
        tmp = sent / f".{number}.tmp"
        tmp.write_text(json.dumps(record))
        tmp.rename(sent / f"{number:04d}.json")
        return ev.SendResponse(ID=message_id, Timestamp=int(time.time()))

    async def upload(self, binary: bytes, media_type: MediaType | None = None) -> UploadResponse:
        from neonize.proto import Neonize_pb2 as ev

        digest = hashlib.sha256(binary).digest()
        (self.root / "media" / digest.hex()).write_bytes(binary)
        return ev.UploadResponse(
            url=f"https://mmg.whatsapp.net/{digest.hex()}",
            DirectPath=digest.hex(),
            MediaKey=b"k" * 32,
            FileEncSHA256=digest,
            FileSHA256=digest,
            FileLength=len(binary),
        )

    async def download_any(self, message: WAMessage) -> bytes | None:
        from neonize.exc import DownloadError

        for part in ("imageMessage", "documentMessage", "audioMessage", "videoMessage"):
            if message.HasField(part):
                path = self.root / "media" / str(getattr(message, part).directPath)
                if path.exists():
                    return path.read_bytes()
        raise DownloadError("failed to download: 404")

    async def send_chat_presence(
        self, jid: JID, state: ChatPresence, media: ChatPresenceMedia
    ) -> None:
        return None


def install(root: str) -> None:
    """Make this process's WhatsApp clients FileClients on the folder `root`."""
    from habakkuk.channels import whatsapp_client

    folder = Path(root)
    for sub in ("inbox", "sent", "media"):
        (folder / sub).mkdir(parents=True, exist_ok=True)

    def open_client(db_path: Path) -> whatsapp_client.WhatsAppClient:
        return FileClient(folder)

    whatsapp_client.open_client = open_client


def write_message(root: Path, event: ProtoMessage, seq: int) -> None:
    """Someone writes: the event goes to the inbox, atomically."""
    tmp = root / "inbox" / f".{seq}.tmp"
    tmp.write_bytes(event.SerializeToString())
    tmp.rename(root / "inbox" / f"{seq:06d}.bin")


def sent_texts(root: Path) -> list[str]:
    """The texts the bot sent, in order."""
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

    texts: list[str] = []
    for path in sorted((root / "sent").glob("*.json")):
        record = json.loads(path.read_text())
        message = WAMessage.FromString(base64.b64decode(record["message"]))
        texts.append(message.conversation or message.extendedTextMessage.text)
    return texts
