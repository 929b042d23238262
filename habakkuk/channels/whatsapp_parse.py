"""WhatsApp's message events (neonize's protobufs) to the gateway's InboundMessage.

A chat is named by its JID without the device part, `<user>@<server>`: a person
`4915123456789@s.whatsapp.net` (or `…@lid`, WhatsApp's privacy id), a group
`120363…@g.us`. Neither contains a colon, so it fits an Address. The sender is the
person's phone number, `+4915123456789`, which is what `allow_from` holds; when WhatsApp
addresses them by their LID, the phone number comes from the event's SenderAlt.

Media is not downloaded here: an Attachment's `file_id` is the media message itself
(URL, direct path, media key and hashes; no thumbnail), protobuf-serialized and base64
encoded, so a download works after a restart too, with nothing kept in memory.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .adapter import Attachment, InboundMessage

if TYPE_CHECKING:
    from neonize.proto.Neonize_pb2 import JID
    from neonize.proto.Neonize_pb2 import Message as MessageEv
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import ContextInfo
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

USER_SERVER = "s.whatsapp.net"
LID_SERVER = "lid"
GROUP_SERVER = "g.us"


@dataclass(frozen=True)
class Me:
    """Who the linked device is: its phone-number JID user and its LID user (may be "")."""

    user: str
    lid: str = ""

    def owns(self, jid_text: str) -> bool:
        """True when `jid_text` (`user[:device]@server`) is one of our own JIDs."""
        user, _, server = jid_text.partition("@")
        user = user.split(":")[0].split(".")[0]
        if server == LID_SERVER:
            return bool(self.lid) and user == self.lid
        return bool(self.user) and user == self.user


def jid_text(jid: JID) -> str:
    """A JID as `user@server`, without the device (the form chats are named by)."""
    return f"{jid.User}@{jid.Server}" if jid.User else jid.Server


def parse_jid(text: str) -> JID:
    """`user@server` (a chat of an Address) as neonize's JID."""
    from neonize.proto.Neonize_pb2 import JID

    user, at, server = text.partition("@")
    if not at or not user:
        raise ValueError(f"{text!r} is not a WhatsApp chat (user@server)")
    return JID(User=user, Server=server, Device=0, RawAgent=0, Integrator=0, IsEmpty=False)


def unwrap(message: WAMessage) -> WAMessage:
    """The content inside WhatsApp's wrappers (disappearing, view-once, captioned document)."""
    for _ in range(4):  # wrappers nest at most a few deep
        if message.HasField("ephemeralMessage"):
            message = message.ephemeralMessage.message
        elif message.HasField("viewOnceMessage"):
            message = message.viewOnceMessage.message
        elif message.HasField("viewOnceMessageV2"):
            message = message.viewOnceMessageV2.message
        elif message.HasField("documentWithCaptionMessage"):
            message = message.documentWithCaptionMessage.message
        else:
            break
    return message


def message_text(message: WAMessage) -> str:
    """The words of a message: its text, or its media's caption."""
    if message.conversation:
        return message.conversation
    if message.HasField("extendedTextMessage"):
        return message.extendedTextMessage.text
    for kind in ("imageMessage", "videoMessage", "documentMessage"):
        if message.HasField(kind):
            return str(getattr(message, kind).caption)
    return ""


def context_of(message: WAMessage) -> ContextInfo | None:
    """The ContextInfo (mentions, the quoted message) of whichever part carries one."""
    for kind in (
        "extendedTextMessage",
        "imageMessage",
        "documentMessage",
        "audioMessage",
        "videoMessage",
    ):
        if message.HasField(kind):
            part = getattr(message, kind)
            return part.contextInfo if part.HasField("contextInfo") else None
    return None


def phone_of(event: MessageEv) -> tuple[str, list[str]]:
    """The sender as `+<number>` and the other forms allow_from may name them by."""
    source = event.Info.MessageSource
    sender, alt = source.Sender, source.SenderAlt
    if sender.Server == LID_SERVER and alt.User and alt.Server == USER_SERVER:
        sender, alt = alt, sender
    aliases = [sender.User, jid_text(sender)]
    if alt.User:
        aliases.append(jid_text(alt))
    if sender.Server == USER_SERVER:
        return f"+{sender.User}", aliases
    return jid_text(sender), aliases[1:]  # no phone number known: the LID itself


def attachments(message: WAMessage, message_id: str) -> list[Attachment]:
    """The media a message carries, each with the media message as its file id."""
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

    found: list[Attachment] = []
    if message.HasField("imageMessage"):
        image = message.imageMessage
        carrier = WAMessage(imageMessage=image)
        ext = "png" if image.mimetype == "image/png" else "jpg"
        kind_name = ("photo", f"photo-{message_id}.{ext}", image.mimetype or "image/jpeg")
        found.append(_attachment(carrier, "imageMessage", *kind_name, image.fileLength))
    if message.HasField("documentMessage"):
        doc = message.documentMessage
        carrier = WAMessage(documentMessage=doc)
        found.append(
            _attachment(
                carrier,
                "documentMessage",
                "document",
                doc.fileName or doc.title or "document",
                doc.mimetype or "application/octet-stream",
                doc.fileLength,
            )
        )
    if message.HasField("audioMessage"):
        audio = message.audioMessage
        carrier = WAMessage(audioMessage=audio)
        kind = "voice" if audio.PTT else "audio"
        mime = audio.mimetype or "audio/ogg; codecs=opus"
        name = f"{kind}-{message_id}.ogg" if "ogg" in mime else f"{kind}-{message_id}.m4a"
        found.append(_attachment(carrier, "audioMessage", kind, name, mime, audio.fileLength))
    if message.HasField("videoMessage"):
        video = message.videoMessage
        carrier = WAMessage(videoMessage=video)
        found.append(
            _attachment(
                carrier,
                "videoMessage",
                "video",
                f"video-{message_id}.mp4",
                video.mimetype or "video/mp4",
                video.fileLength,
            )
        )
    return found


def _attachment(
    carrier: WAMessage, part: str, kind: str, name: str, mime: str, size: int
) -> Attachment:
    media = getattr(carrier, part)
    # The thumbnail and the quote are not needed to download, and would bloat the job row.
    for bulky in ("JPEGThumbnail", "contextInfo", "waveform", "streamingSidecar"):
        if bulky in media.DESCRIPTOR.fields_by_name:
            media.ClearField(bulky)
    file_id = base64.b64encode(carrier.SerializeToString()).decode()
    media_type = mime.split(";")[0].strip()
    return Attachment(kind, file_id, name, media_type, int(size) or None)  # type: ignore[arg-type]  # kind is one of the Literal's values, chosen above


def media_message(file_id: str) -> WAMessage:
    """The media message an Attachment's file id holds; ValueError when it is not one."""
    from google.protobuf.message import DecodeError
    from neonize.proto.waE2E.WAWebProtobufsE2E_pb2 import Message as WAMessage

    try:
        return WAMessage.FromString(base64.b64decode(file_id, validate=True))
    except (ValueError, DecodeError) as exc:
        raise ValueError(f"not a WhatsApp media id: {exc}") from None


def addressed(me: Me, text: str, context: ContextInfo | None) -> bool:
    """In a group: a mention of our JID (or LID), or a reply to one of our messages."""
    if context is not None:
        if any(me.owns(jid) for jid in context.mentionedJID):
            return True
        if context.stanzaID and me.owns(context.participant):
            return True
    return bool(me.user) and f"@{me.user}" in text


def strip_mention(me: Me, text: str) -> str:
    """The text without `@<our number>` / `@<our lid>` (how a mention is written)."""
    for user in (me.user, me.lid):
        if user:
            text = re.sub(rf"@{re.escape(user)}\b", "", text)
    return " ".join(text.split(" ")).strip()


def to_inbound(account: str, me: Me, event: MessageEv) -> InboundMessage | None:
    """One message event as the gateway's InboundMessage; None for what we do not answer
    (our own messages, reactions, protocol and status messages, empty ones)."""
    info = event.Info
    source = info.MessageSource
    if source.IsFromMe or source.Chat.Server == "broadcast":
        return None
    message = unwrap(event.Message)
    text = message_text(message)
    files = attachments(message, info.ID)
    if not text and not files:
        return None  # a reaction, a receipt-like protocol message, a poll vote, ...
    sender, aliases = phone_of(event)
    is_group = source.IsGroup or source.Chat.Server == GROUP_SERVER
    context = context_of(message)
    return InboundMessage(
        channel=account,
        chat=jid_text(source.Chat),
        message_id=info.ID,
        sender=sender,
        sender_aliases=aliases,
        sender_name=info.Pushname,
        text=strip_mention(me, text) if is_group else text,
        is_group=is_group,
        addressed=not is_group or addressed(me, text, context),
        attachments=files,
        at=float(info.Timestamp) or 0.0,
    )
