"""Email in and out: a raw message read into what the gateway needs, and a reply written
as a MIME message.

In: the text is the text/plain part (else the HTML part turned into text), without the
quoted tail a mail client adds under a reply ("On ... wrote:" and the `>` lines), so the
model reads what is new. Every other part with a file name, or of a media type that is
not text, is an attachment (audio is a voice note, transcribed by the gateway).

Out: multipart/alternative with the Markdown as the plain part and the same rendered to
HTML (raw HTML in the Markdown is escaped, not passed through), inside the thread
(Subject "Re: ...", In-Reply-To, References), with a Message-ID derived from the delivery
so a retried send carries the same one. SMTP itself cannot drop a duplicate; a mail client
that threads by Message-ID shows a resend as the same message.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import mimetypes
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy
from email.charset import QP, Charset
from email.encoders import encode_base64
from email.errors import HeaderParseError
from email.header import Header, decode_header, make_header
from email.message import Message
from email.parser import BytesParser
from email.utils import format_datetime, parseaddr, parsedate_to_datetime
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

AttachmentKind = Literal["photo", "document", "voice", "audio", "video"]
_MESSAGE_ID = re.compile(r"<([^<>\s]+)>")
_ATTRIBUTION = re.compile(
    r"^\s*(on\b.{0,300}\bwrote:|am\b.{0,300}\bschrieb\b.{0,100}:|le\b.{0,300}\ba écrit\s?:)\s*$",
    re.IGNORECASE,
)
_FORWARD_BAR = re.compile(
    r"^\s*-{2,}\s*(original message|ursprüngliche nachricht)\s*-{2,}\s*$", re.I
)
MAX_ID = 250
_UTF8 = Charset("utf-8")
_UTF8.body_encoding = QP  # replies stay readable as they travel (not base64)
_RE = re.compile(r"^\s*((re|aw|sv|antw)\s*:\s*)+", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    """One attachment of an inbound message: its bytes are kept until the batch is done."""

    kind: AttachmentKind
    name: str
    media_type: str
    data: bytes


@dataclass
class Inbound:
    """An inbound email, read."""

    message_id: str  # without the angle brackets
    sender: str  # the From address, lowercased
    sender_name: str
    subject: str
    text: str
    in_reply_to: str
    references: list[str]
    auto: bool  # an auto-reply, a bounce or a list message: never answered
    at: float
    parts: list[Part] = field(default_factory=list)


def parse(raw: bytes, fallback_id: str) -> Inbound:
    """Read a raw RFC 5322 message. `fallback_id` stands in for a missing Message-ID
    (derived from the mailbox position, so a redelivery gets the same one).

    The compat32 policy: ten times faster than the default one here, and we read only a
    few headers (decoded from RFC 2047 below) and the parts' payloads."""
    message = BytesParser(policy=policy.compat32).parsebytes(raw)
    name, address = parseaddr(_header(message, "From"))
    ids = message_ids(_header(message, "Message-ID"))
    text, parts = _body(message)
    at = 0.0
    with contextlib.suppress(TypeError, ValueError, IndexError):
        at = parsedate_to_datetime(_header(message, "Date")).timestamp()
    return Inbound(
        message_id=ids[0] if ids else fallback_id,
        sender=address.strip().lower(),
        sender_name=name.strip(),
        subject=_one_line(_header(message, "Subject")),
        text=strip_quoted(text),
        in_reply_to=next(iter(message_ids(_header(message, "In-Reply-To"))), ""),
        references=message_ids(_header(message, "References")),
        auto=_automatic(message),
        at=at,
        parts=parts,
    )


def _header(message: Message, name: str) -> str:
    """A header's text, RFC 2047 words decoded ("" when absent or undecodable)."""
    value = message.get(name)
    if value is None:
        return ""
    try:
        return str(make_header(decode_header(str(value))))
    except (HeaderParseError, LookupError, UnicodeDecodeError, ValueError):
        return str(value)


def message_ids(header: str) -> list[str]:
    """The `<id>`s of a Message-ID, In-Reply-To or References header, brackets removed.
    An id longer than any real one is replaced by its digest: it becomes part of job ids."""
    return [
        found if len(found) <= MAX_ID else "h." + hashlib.sha256(found.encode()).hexdigest()[:32]
        for found in _MESSAGE_ID.findall(header)
    ]


def _automatic(message: Message) -> bool:
    """Mail no person wrote to us: answering it could start a loop between robots."""
    auto = _header(message, "Auto-Submitted").strip().lower() or "no"
    precedence = _header(message, "Precedence").strip().lower()
    sender = parseaddr(_header(message, "From"))[1].lower()
    return (
        auto not in ("", "no")
        or precedence in ("bulk", "junk", "list", "auto_reply")
        or bool(message.get("List-Id"))
        or sender.startswith(("mailer-daemon@", "postmaster@"))
    )


def _body(message: Message) -> tuple[str, list[Part]]:
    """The text to read (plain preferred, else HTML as text) and the attachments."""
    plain: str | None = None
    rich: str | None = None
    parts: list[Part] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        media = part.get_content_type()
        filename = part.get_filename()
        if filename:  # compat32 leaves RFC 2047 words in it
            with contextlib.suppress(HeaderParseError, LookupError, UnicodeDecodeError):
                filename = str(make_header(decode_header(filename)))
        disposition = part.get_content_disposition()
        if disposition == "attachment" or filename or not media.startswith("text/"):
            data = part.get_payload(decode=True)
            if isinstance(data, bytes):
                parts.append(_attachment(part, media, filename, data, len(parts)))
            continue
        content = _text_of(part)
        if media == "text/plain" and plain is None:
            plain = content
        elif media == "text/html" and rich is None:
            rich = content
    if plain is not None and plain.strip():
        return plain, parts
    return html_to_text(rich or ""), parts


def _text_of(part: Message) -> str:
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return data.decode(charset, "replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", "replace")


def _attachment(part: Message, media: str, filename: str | None, data: bytes, index: int) -> Part:
    kind: AttachmentKind = "document"
    if media.startswith("image/"):
        kind = "photo"
    elif media.startswith("audio/"):
        kind = "voice"
    elif media.startswith("video/"):
        kind = "video"
    name = filename or f"part{index + 1}{mimetypes.guess_extension(media) or '.bin'}"
    return Part(kind, _one_line(name), media, data)


def strip_quoted(text: str) -> str:
    """The new text of a reply: without the quoted tail ("On ... wrote:" and what
    follows it, `>` lines, a forwarded "Original Message") and the signature."""
    kept: list[str] = []
    lines = text.replace("\r\n", "\n").split("\n")
    for index, line in enumerate(lines):
        if _ATTRIBUTION.match(line) or _FORWARD_BAR.match(line):
            break
        # A long attribution wraps: "On ..., Bob <bob@example.org>" / "wrote:".
        wrapped = (" ".join(lines[index : end + 1]) for end in range(index + 1, index + 3))
        if line.strip() and any(_ATTRIBUTION.match(joined) for joined in wrapped):
            break
        if line.rstrip() == "--":  # the signature separator ("-- ")
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


class _TextOfHtml(HTMLParser):
    BLOCKS = frozenset(
        {"p", "div", "br", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1
        elif tag in self.BLOCKS:
            self.out.append("\n")
        if tag == "li":
            self.out.append("\n- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head"):
            self._skip = max(0, self._skip - 1)
        elif tag in self.BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.out.append(data)


def html_to_text(markup: str) -> str:
    """HTML as plain text: blocks on their own lines, scripts and styles dropped, and a
    quoted reply (`<blockquote>`) left in for strip_quoted to cut at its attribution."""
    parser = _TextOfHtml()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.out)
    text = re.sub(r"[ \t\xa0]+", " ", text)
    return re.sub(r"\n\s*\n+", "\n\n", text).strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- out ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    """What a reply is made of, before it is MIME."""

    sender: str  # our address
    to: str
    subject: str
    markdown: str
    message_id: str  # without brackets
    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()  # (name, bytes)


def reply_subject(subject: str) -> str:
    """ "Re: " once before the subject (an empty one gets a plain "Re:")."""
    bare = _RE.sub("", subject).strip()
    return f"Re: {bare}" if bare else "Re:"


def derived_message_id(seed: str, address: str) -> str:
    """A Message-ID from `seed` (the delivery and the part), at our address's domain."""
    digest = hashlib.sha256(seed.encode()).hexdigest()[:32]
    domain = address.rpartition("@")[2] or "habakkuk.invalid"
    return f"hk.{digest}@{domain}"


@functools.cache
def _markdown() -> MarkdownIt:
    """The renderer, made once (making one compiles its rules: ~20 ms)."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": False, "linkify": False})
    renderer.enable(["table", "strikethrough"])
    return renderer


def markdown_to_html(markdown: str) -> str:
    """The Markdown as an HTML document (CommonMark with tables and strikethrough); HTML
    written in the Markdown is shown as text, never passed into the mail as markup."""
    body = _markdown().render(markdown)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
        f'<body style="font-family: sans-serif">{body}</body></html>'
    )


def build_message(out: Outgoing, now: float) -> Message:
    """The reply as a MIME message: plain and HTML alternatives, then attachments.

    Built with the compat32 classes (email.mime): the default policy's header objects
    cost ten times as much, making and sending, for headers we write ourselves."""
    from email.mime.base import MIMEBase
    from email.mime.multipart import MIMEMultipart
    from email.mime.nonmultipart import MIMENonMultipart

    body = MIMEMultipart("alternative")
    for text, subtype in ((out.markdown or " ", "plain"), (markdown_to_html(out.markdown), "html")):
        part = MIMENonMultipart("text", subtype)
        part.set_payload(text, _UTF8)
        body.attach(part)
    message: Message = body
    if out.files:
        message = MIMEMultipart("mixed")
        message.attach(body)
        for name, data in out.files:
            media = mimetypes.guess_type(name)[0] or "application/octet-stream"
            main, _, sub = media.partition("/")
            attached = MIMEBase(main, sub)
            attached.set_payload(data)
            encode_base64(attached)
            filename: str | tuple[str, str, str] = name if name.isascii() else ("utf-8", "", name)
            attached.add_header("Content-Disposition", "attachment", filename=filename)
            message.attach(attached)
    message["From"] = out.sender
    message["To"] = out.to
    message["Subject"] = (
        Header(out.subject, "utf-8").encode() if not out.subject.isascii() else out.subject
    )
    message["Date"] = format_datetime(datetime.fromtimestamp(now, UTC))
    message["Message-ID"] = f"<{out.message_id}>"
    if out.in_reply_to:
        message["In-Reply-To"] = f"<{out.in_reply_to}>"
    if out.references:
        message["References"] = " ".join(f"<{r}>" for r in out.references)
    message["Auto-Submitted"] = "auto-replied" if out.in_reply_to else "auto-generated"
    return message
