"""The part of neonize's async WhatsApp client the adapter uses, as a narrow Protocol.

WhatsApp's wire is the multi-device protocol: a Noise handshake and Signal-encrypted
protobufs over a websocket to WhatsApp's servers, which nobody can fake without being
WhatsApp. The library (neonize, the Python binding of the Go library whatsmeow, whose Go
core ships inside its wheel) does all of that and hands us events: protobuf objects of
its own (`neonize.proto.Neonize_pb2.Message`, `Connected`, ...). So that event boundary
is where the adapter ends: it registers handlers for those events, builds the protobuf
messages it sends itself, and calls the handful of client methods below. The tests drive
the adapter with an in-memory implementation of this Protocol that produces the
library's real protobuf types (tests/channels/fake_whatsapp.py), and check that
neonize's own `NewAClient` has these methods with compatible signatures.

neonize is imported only here (and only when a WhatsApp account runs or links): its
import loads a 19 MB Go shared library.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from google.protobuf.message import Message as ProtoMessage
    from neonize.proto.Neonize_pb2 import JID, Device, SendResponse, UploadResponse
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage
    from neonize.utils.enum import ChatPresence, ChatPresenceMedia, MediaType

EventT = TypeVar("EventT", bound="ProtoMessage")
# A handler of one event type: the library calls it with (client, event) on our loop.
Handler = Callable[[Any, EventT], Awaitable[None]]
QrHandler = Callable[[Any, bytes], Coroutine[None, None, None]]


class EventRegistry(Protocol):
    """`client.event`: where handlers are registered, before `connect`."""

    def __call__(self, event: type[EventT]) -> Callable[[Handler[EventT]], None]:
        """`client.event(MessageEv)(handler)` registers `handler` for that event type."""
        ...

    def qr(self, f: QrHandler) -> None:
        """Call `f` with each pairing QR code (bytes of the code's text) while unpaired."""
        ...


class WhatsAppClient(Protocol):
    """What the adapter and `habakkuk whatsapp link` call on a neonize `NewAClient`."""

    @property
    def event(self) -> EventRegistry:
        """Where handlers are registered (read-only here: the library's own Event)."""
        ...

    async def connect(self) -> Any:
        """Start connecting (the Go core runs until stopped); returns its task."""
        ...

    async def idle(self) -> None:
        """Wait until the Go core has stopped (logged out, stopped, failed)."""
        ...

    async def disconnect(self) -> None:
        """Close the websocket."""
        ...

    async def stop(self) -> None:
        """Stop the Go core for this client (ends `idle`)."""
        ...

    async def get_me(self) -> Device:
        """Who this linked device is (its JID once paired)."""
        ...

    async def send_message(self, to: JID, message: WAMessage) -> SendResponse:
        """Encrypt and send one message; the response carries its message ID."""
        ...

    async def upload(self, binary: bytes, media_type: MediaType | None = None) -> UploadResponse:
        """Encrypt and upload media; the response has what a media message needs."""
        ...

    async def download_any(self, message: WAMessage) -> bytes | None:
        """Download and decrypt the media a message carries."""
        ...

    async def send_chat_presence(
        self, jid: JID, state: ChatPresence, media: ChatPresenceMedia
    ) -> None:
        """Show (or stop showing) "typing..." in a chat."""
        ...


ClientFactory = Callable[[Path], WhatsAppClient]


def open_client(db_path: Path) -> WhatsAppClient:
    """A neonize client whose device keys live in the SQLite file `db_path`.

    whatsmeow keeps the keys in SQLite and writes them in transactions; the file is
    created here first with mode 0600 (in the 0700 channels folder) so it never exists
    with wider permissions. neonize names the client by the database's path.
    """
    from neonize.aioze.client import NewAClient

    if not db_path.exists():
        db_path.touch(mode=0o600)
    db_path.chmod(0o600)
    client: WhatsAppClient = NewAClient(str(db_path))
    return client
