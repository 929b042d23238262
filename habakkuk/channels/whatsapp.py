"""WhatsApp as a linked device (WhatsApp Web's multi-device protocol), through neonize.

- The device keys live in `channels/whatsapp-<account>.db` (SQLite, written by whatsmeow
  in transactions; the file 0600 in the 0700 channels folder). `habakkuk whatsapp link`
  (or `habakkuk setup`) pairs the device by QR code; an unlinked device is a fatal error
  naming that command.
- Messages arrive as the library's events (whatsapp_session.EventQueue); each becomes an
  InboundMessage whose message id is WhatsApp's own, so a message WhatsApp delivers
  again (it redelivers what was not acknowledged, and an offline sync repeats) is dropped
  by the gateway as seen. In groups we answer a mention of our number or a reply to us.
- Health: whatsmeow pings the server every ~20 s and reports only a failure
  (KeepAliveTimeout) or a close; so while connected and no timeout is outstanding the
  server is being heard from, and the adapter beats every few seconds.
- Replies quote the message they answer (ContextInfo), typing is the chat presence
  "composing", reactions are reaction messages, files go up encrypted and out as image,
  document or audio messages (voice notes as push-to-talk Ogg Opus); media in is
  downloaded and decrypted by the library. WhatsApp has no buttons for a linked device
  (they are a Business API feature), so approvals are typed ("yes" / "no").
- Sends cannot carry an id of our choosing through neonize 0.5.2: whatsmeow's
  SendMessage takes one (SendRequestExtra.ID, and WhatsApp drops a second message with
  the same id), but neonize's `send_message` passes no extra and its Go side builds
  SendRequestExtra with AdditionalNodes only (goneonize/main.go, still so upstream);
  `send_fb_message` takes an ID but sends Messenger's consumer-application messages, not
  a WhatsApp chat message. So a delivery resumed after a crash between WhatsApp's answer
  and the recorded chunk sends that chunk again, as with Telegram: the window is the time
  from the answer to the record, and the start of each send is written first
  (delivery_attempts), so such a chunk is known.
- neonize 0.5.2 does not expose whatsmeow's SynchronousAck: the Go core acknowledges a
  message when it arrives, not after our handler returned, so a crash in the moment
  between its arrival and the gateway's durable enqueue loses that one message.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from habakkuk.engine.channel_config import ChannelConfig

from . import whatsapp_client
from .adapter import (
    Adapter,
    Address,
    Attachment,
    Beat,
    Button,
    Capability,
    FatalAdapterError,
    Inbox,
    SendError,
    Undeliverable,
    Unsupported,
)
from .format_whatsapp import whatsapp_chunks
from .platforms import AdapterContext, PlatformSetup, SetupCheckFailed, SetupField
from .whatsapp_client import ClientFactory, WhatsAppClient
from .whatsapp_parse import Me, jid_text, media_message, parse_jid, to_inbound
from .whatsapp_session import (
    EventQueue,
    close_client,
    connect_device,
    describe,
    device_path,
    link_device,
)

if TYPE_CHECKING:
    from neonize.proto.Neonize_pb2 import JID, SendResponse
    from neonize.proto.Neonize_pb2 import Message as MessageEv
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ContextInfo
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

BEAT_EVERY = 5.0  # seconds between beats while connected and keepalives are answered
IMAGE_LIMIT = 16 * 1024 * 1024
DOCUMENT_LIMIT = 100 * 1024 * 1024
QUOTES_KEPT = 512  # recent inbound messages remembered to quote them in a reply
UNDELIVERABLE_HINTS = ("not on whatsapp", "forbidden", "not-authorized", "item-not-found", "403")


class WhatsAppAdapter(Adapter):
    """One linked WhatsApp device."""

    type = "whatsapp"
    capabilities: frozenset[Capability] = frozenset({"typing", "reactions", "files", "download"})
    max_file_bytes = DOCUMENT_LIMIT

    def __init__(self, config: ChannelConfig, db_path: Path, factory: ClientFactory):
        super().__init__(config.name)
        self.config = config
        self.db_path = db_path
        self.factory = factory
        self.me = Me("")
        self._client: WhatsAppClient | None = None
        self._events: EventQueue | None = None
        # message id -> (chat, sender JID text, its content): what a quote and a reaction need
        self._recent: OrderedDict[str, tuple[str, str, WAMessage]] = OrderedDict()

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        client = self.factory(self.db_path)
        events = EventQueue()
        self._client, self._events = client, events
        self.me = await connect_device(client, events, account=self.account)
        beat()
        stale = False
        while True:
            try:
                async with asyncio.timeout(BEAT_EVERY):
                    happening = await events.get()
            except TimeoutError:
                if not stale:
                    beat()
                continue
            if happening.kind == "message" and happening.message is not None:
                await self._receive(happening.message, inbox)
                beat()
            elif happening.kind == "stale":
                stale = True
            elif happening.kind in ("fresh", "connected"):
                stale = False
                beat()
            elif happening.kind == "fatal":
                raise FatalAdapterError(f"WhatsApp {self.account}: {happening.detail}")
            elif happening.kind in ("disconnected", "ended"):
                raise ConnectionError(f"WhatsApp {self.account}: {happening.detail}")

    async def _receive(self, event: MessageEv, inbox: Inbox) -> None:
        message = to_inbound(self.account, self.me, event)
        if message is None:
            return
        source = event.Info.MessageSource
        # Quote the author by phone number when WhatsApp named them by LID (as neonize does).
        phone = (
            source.SenderAlt if source.Sender.Server == "lid" and source.SenderAlt.User else None
        )
        author = jid_text(phone if phone is not None else source.Sender)
        self._remember(message.message_id, message.chat, author, event.Message)
        await inbox(message)

    def _remember(self, message_id: str, chat: str, sender: str, content: WAMessage) -> None:
        self._recent[message_id] = (chat, sender, content)
        self._recent.move_to_end(message_id)
        while len(self._recent) > QUOTES_KEPT:
            self._recent.popitem(last=False)

    async def close(self) -> None:
        client, self._client = self._client, None
        if self._events is not None:
            self._events.close()
        if client is not None:
            await close_client(client)

    # -- sending -----------------------------------------------------------------------

    def _connected(self) -> WhatsAppClient:
        if self._client is None:
            raise SendError(f"whatsapp {self.account}: not connected")
        return self._client

    def _chat(self, to: Address) -> JID:
        try:
            return parse_jid(to.chat)
        except ValueError as exc:
            raise Undeliverable(str(exc)) from None

    async def _send(self, to: Address, message: WAMessage) -> SendResponse:
        from neonize.exc import NeonizeError

        try:
            return await self._connected().send_message(self._chat(to), message)
        except NeonizeError as exc:
            raise _mapped(f"send to {to.chat}", exc) from None

    def render(self, markdown: str) -> list[str]:
        return whatsapp_chunks(markdown)

    def _quote(self, to: Address, message_id: str) -> ContextInfo:
        """What makes a message a reply: the quoted message's id, author and content."""
        from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ContextInfo

        known = self._recent.get(message_id)
        if known is not None:
            _, sender, content = known
            return ContextInfo(stanzaID=message_id, participant=sender, quotedMessage=content)
        # Not seen by this run (a reply resumed after a restart): in a private chat the
        # author is the chat; the person's phone shows the quote from its own copy.
        participant = "" if to.chat.endswith("@g.us") else to.chat
        return ContextInfo(stanzaID=message_id, participant=participant)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ExtendedTextMessage
        from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

        if reply_to:
            text = ExtendedTextMessage(text=chunk, contextInfo=self._quote(to, reply_to))
            message = WAMessage(extendedTextMessage=text)
        else:
            message = WAMessage(conversation=chunk)
        response = await self._send(to, message)
        return str(response.ID)

    async def typing(self, to: Address) -> None:
        from neonize.exc import NeonizeError
        from neonize.utils.enum import ChatPresence, ChatPresenceMedia

        composing = ChatPresence.CHAT_PRESENCE_COMPOSING
        try:
            await self._connected().send_chat_presence(
                self._chat(to), composing, ChatPresenceMedia.CHAT_PRESENCE_MEDIA_TEXT
            )
        except NeonizeError as exc:
            raise _mapped("typing", exc) from None

    async def react(self, to: Address, message_id: str, emoji: str | None) -> None:
        from neonize.proto.waCommon.WACommon_pb2 import MessageKey
        from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage
        from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ReactionMessage

        known = self._recent.get(message_id)
        key = MessageKey(remoteJID=to.chat, fromMe=False, ID=message_id)
        if known is not None and to.chat.endswith("@g.us"):
            key.participant = known[1]
        reaction = ReactionMessage(
            key=key, text=emoji or "", senderTimestampMS=int(time.time() * 1000)
        )
        await self._send(to, WAMessage(reactionMessage=reaction))

    async def download(self, attachment: Attachment) -> bytes:
        from neonize.exc import NeonizeError

        try:
            media = media_message(attachment.file_id)
        except ValueError as exc:
            raise Undeliverable(f"{attachment.name}: {exc}") from None
        try:
            data = await self._connected().download_any(media)
        except NeonizeError as exc:
            raise _mapped(f"download {attachment.name}", exc) from None
        if data is None:
            raise Undeliverable(f"download {attachment.name}: WhatsApp returned no data")
        return data

    async def send_voice(
        self,
        to: Address,
        path: Path,
        *,
        duration: float | None = None,
        caption: str = "",
        name: str = "",
    ) -> str:
        """A push-to-talk voice note (an .ogg goes as one) with its length in seconds."""
        return await self.send_file(to, path, caption=caption, name=name, duration=duration)

    async def send_file(
        self,
        to: Address,
        path: Path,
        *,
        caption: str = "",
        name: str = "",
        duration: float | None = None,
    ) -> str:
        from neonize.exc import NeonizeError

        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > DOCUMENT_LIMIT:
            raise Unsupported(f"{name} is over WhatsApp's 100 MB limit")
        try:
            message = await build_media(self._connected(), data, name, caption, duration)
        except NeonizeError as exc:
            raise _mapped(f"upload {name}", exc) from None
        response = await self._send(to, message)
        return str(response.ID)


async def build_media(
    client: WhatsAppClient, data: bytes, name: str, caption: str, duration: float | None = None
) -> WAMessage:
    """Upload `data` and build the message that shows it: an image (JPEG/PNG up to
    16 MB), a push-to-talk voice note (.ogg/.opus), audio, or else a document."""
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import (
        AudioMessage,
        DocumentMessage,
        ImageMessage,
    )
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage
    from neonize.utils.enum import MediaType

    lower = name.lower()
    if lower.endswith((".jpg", ".jpeg", ".png")) and len(data) <= IMAGE_LIMIT:
        up = await client.upload(data, MediaType.MediaImage)
        mime = "image/png" if lower.endswith(".png") else "image/jpeg"
        image = ImageMessage(
            URL=up.url,
            directPath=up.DirectPath,
            mediaKey=up.MediaKey,
            fileEncSHA256=up.FileEncSHA256,
            fileSHA256=up.FileSHA256,
            fileLength=up.FileLength,
            mimetype=mime,
            caption=caption or None,
        )
        return WAMessage(imageMessage=image)
    if lower.endswith((".ogg", ".opus", ".oga", ".mp3", ".m4a")):
        up = await client.upload(data, MediaType.MediaAudio)
        voice = lower.endswith((".ogg", ".opus", ".oga"))
        mime = "audio/ogg; codecs=opus" if voice else _audio_mime(lower)
        audio = AudioMessage(
            URL=up.url,
            directPath=up.DirectPath,
            mediaKey=up.MediaKey,
            fileEncSHA256=up.FileEncSHA256,
            fileSHA256=up.FileSHA256,
            fileLength=up.FileLength,
            mimetype=mime,
            PTT=voice,
            seconds=max(1, round(duration)) if duration is not None else None,
        )
        return WAMessage(audioMessage=audio)
    up = await client.upload(data, MediaType.MediaDocument)
    document = DocumentMessage(
        URL=up.url,
        directPath=up.DirectPath,
        mediaKey=up.MediaKey,
        fileEncSHA256=up.FileEncSHA256,
        fileSHA256=up.FileSHA256,
        fileLength=up.FileLength,
        mimetype=_document_mime(lower),
        fileName=name,
        title=name,
        caption=caption or None,
    )
    return WAMessage(documentMessage=document)


def _audio_mime(name: str) -> str:
    return "audio/mpeg" if name.endswith(".mp3") else "audio/mp4"


def _document_mime(name: str) -> str:
    import mimetypes

    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _mapped(what: str, exc: Exception) -> SendError:
    """A library error as what the delivery worker needs: never retried, or retried."""
    text = f"{what}: {exc}"
    if any(hint in str(exc).lower() for hint in UNDELIVERABLE_HINTS):
        return Undeliverable(text)
    return SendError(text)


def build(config: ChannelConfig, context: AdapterContext) -> WhatsAppAdapter:
    """The adapter of one WhatsApp account (habakkuk.channels.platforms)."""
    path = context.state_path(config, ".db")
    return WhatsAppAdapter(config, path, whatsapp_client.open_client)


async def link(config: ChannelConfig, channels_dir: Path, show: Callable[[str], None]) -> str:
    """Link the account's device (SetupLink): show the QR codes, return "+<number>"."""
    path = device_path(channels_dir, config.name)
    return await link_device(whatsapp_client.open_client, path, config.name, show)


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Connect with the account's device keys and return who we are; SetupCheckFailed
    when the device is not linked (nothing to type: `habakkuk whatsapp link` links it)."""
    from habakkuk.engine.home import Home, default_home, ensure_private_dir

    channels_dir = Home(default_home()).channels_dir
    ensure_private_dir(channels_dir)
    client = whatsapp_client.open_client(device_path(channels_dir, config.name))
    events = EventQueue()
    try:
        async with asyncio.timeout(30):
            me = await connect_device(client, events, account=config.name)
    except (FatalAdapterError, ConnectionError) as exc:
        raise SetupCheckFailed(str(exc)) from None
    except TimeoutError:
        raise SetupCheckFailed(f"WhatsApp {config.name}: no connection within 30s") from None
    finally:
        events.close()
        await close_client(client)
    return describe(me)


SETUP = PlatformSetup(
    type="whatsapp",
    title="WhatsApp",
    instructions=(
        "Habakkuk joins WhatsApp as a linked device of a phone number (best a number of its "
        "own: it answers every chat that number has).\n"
        "1. Keep WhatsApp on that phone.\n"
        "2. The next step shows a QR code: on the phone open Settings > Linked devices > "
        "Link a device and scan it.\n"
        "3. Later, `habakkuk whatsapp link` links it again (after unlinking).\n"
        "Approvals are typed (yes / no): WhatsApp has no buttons for linked devices."
    ),
    fields=(
        SetupField(
            "allow_from",
            "Your phone number with country code, e.g. +4915123456789 (others pair with a code)",
        ),
    ),
    check=check_setup,
    link=link,
    fixed={"groups": "mention"},
)
