"""Email: a mailbox read over IMAP (IDLE, else polling), replies sent over SMTP.

- In: the INBOX from the last UID handed to the gateway (email_imap.py, our own small
  client: see its docstring for why). IDLE when the server offers it, re-issued well
  inside the silent limit (and at most every 25 minutes, RFC 2177's advice), so every
  keepalive and every re-IDLE is a beat; else a NOOP and a fetch every `poll_timeout`
  seconds. The first start takes the mailbox's UIDNEXT and answers nothing already there;
  a changed UIDVALIDITY (the mailbox was recreated) takes the current position again.
- The position and the threads live in channels/email-<account>.json (email_state.py),
  saved after each batch was handed to the gateway. The gateway's message id is the
  Message-ID, the same on every redelivery, so a UID replayed after a crash is dropped.
- A sender is the From address, lowercased; `allow_from` takes addresses, and
  `@example.org` lets a whole domain in (matched as the sender's alias). Every email is
  addressed to us (a private chat: chat = the sender, thread = the conversation). A
  conversation is a thread: the root of References/In-Reply-To, so a reply chain stays
  one conversation and a new subject starts another. Our own mail and automatic mail
  (auto-replies, bounces, lists) are never answered: two robots must not loop.
- Out: over SMTP (aiosmtplib, one connection kept: email_smtp.py) inside the thread,
  plain and HTML parts (email_format.py), a Message-ID derived from the delivery job.
  No buttons: approvals are typed (a reply "yes" or "no"). Files go out as attachments.
- Anything read from email is outside content: a session this channel starts is
  tainted from its first turn (engine/channel_config.py: origin_taint).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from email.message import Message
from pathlib import Path

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import write_private_file

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
from .deliveries import SENDING
from .email_format import (
    Inbound,
    Outgoing,
    build_message,
    derived_message_id,
    parse,
    reply_subject,
)
from .email_imap import ImapAuthError, ImapClient, ImapError
from .email_smtp import SmtpLink
from .email_state import EmailState
from .platforms import AdapterContext, PlatformSetup, SetupCheckFailed, SetupField

log = logging.getLogger(__name__)

REIDLE_SECONDS = 25 * 60  # RFC 2177: servers may drop an IDLE after 30 minutes
FILE_LIMIT = 25 * 1024 * 1024  # what most providers accept in one message


class EmailAdapter(Adapter):
    """One mailbox: IMAP in, SMTP out."""

    type = "email"
    keyed_sends = True  # every message's Message-ID derives from the delivery
    capabilities: frozenset[Capability] = frozenset({"files", "download"})
    max_file_bytes = FILE_LIMIT

    def __init__(self, config: ChannelConfig, password: str, state_path: Path):
        super().__init__(config.name)
        self.config = config
        self.password = password
        self.state_path = state_path
        self.address = (config.address or "").lower()
        self.username = config.username or self.address
        self.imap_host, self.imap_port = _host_port(config.imap or "", "imap")
        self.smtp_host, self.smtp_port = _host_port(config.smtp or "", "smtp")
        self.tls = config.tls_mode
        try:
            self.state = EmailState.load(state_path)
        except ValueError as exc:
            raise FatalAdapterError(str(exc)) from None
        # Attachments of the batch being handed over, by file id (the gateway downloads
        # them while `inbox` runs; a replayed batch reads them again).
        self._files: dict[str, bytes] = {}
        self._client: ImapClient | None = None
        self._outbox = SmtpLink(
            self.smtp_host, self.smtp_port, self.tls, self.username, self.password
        )

    @property
    def idle_seconds(self) -> float:
        """How long one IDLE lasts: inside the silent limit, so re-IDLE is a beat too."""
        return max(1.0, min(REIDLE_SECONDS, self.config.silent_limit_seconds / 2))

    # -- receiving ----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        client = ImapClient(self.imap_host, self.imap_port, self.tls)
        self._client = client
        try:
            await client.connect()
            try:
                await client.login(self.username, self.password)
            except ImapAuthError as exc:
                raise FatalAdapterError(f"imap {self.imap_host}: {exc}") from None
            mailbox = await client.select("INBOX")
            state = self.state
            if state.uidvalidity != mailbox.uidvalidity:
                if state.uidvalidity:
                    log.warning(
                        "email %s: the INBOX was recreated (UIDVALIDITY %d -> %d); "
                        "starting from its current end",
                        self.account,
                        state.uidvalidity,
                        mailbox.uidvalidity,
                    )
                state.uidvalidity = mailbox.uidvalidity
                state.last_uid = mailbox.uidnext - 1
                await self._save()
            beat()  # positioned: mail from now on is answered
            idle = "IDLE" in client.capabilities
            while True:
                fetched = await client.fetch_from(state.last_uid + 1)
                beat()
                if fetched:
                    for item in fetched:
                        message = self.convert(item.uid, item.body)
                        if message is not None:
                            await inbox(message)
                            beat()
                    state.last_uid = fetched[-1].uid
                    await self._save()
                    self._files.clear()
                    continue  # more may have come meanwhile
                if idle:
                    await client.idle(self.idle_seconds, beat)
                else:
                    await asyncio.sleep(self.config.poll_timeout)
                    await client.noop()
                    beat()
        except ImapError as exc:
            raise SendError(f"imap {self.imap_host}:{self.imap_port}: {exc}") from None
        except asyncio.CancelledError:
            await client.close()  # stopped mid-command: no LOGOUT to wait for
            raise
        finally:
            self._client = None
            await client.logout()

    async def close(self) -> None:
        client = self._client
        if client is not None:
            await client.close()
        await self._outbox.close()

    async def _save(self) -> None:
        # The text is made here, on the loop, where sends change the state too.
        await asyncio.to_thread(write_private_file, self.state_path, self.state.dumps())

    def convert(self, uid: int, raw: bytes) -> InboundMessage | None:
        """One fetched message as an InboundMessage (None for our own and automatic mail)."""
        domain = self.address.rpartition("@")[2]
        mail = parse(raw, fallback_id=f"uid.{self.state.uidvalidity}.{uid}@{domain}")
        if not mail.sender or mail.sender == self.address or mail.auto:
            log.info("email %s: not answering %s (own or automatic mail)", self.account, uid)
            return None
        state = self.state
        thread = state.thread_of(mail.message_id, mail.in_reply_to, mail.references)
        new_thread = thread not in state.threads
        references = mail.references or ([mail.in_reply_to] if mail.in_reply_to else [])
        state.remember(mail.message_id, thread, references, mail.subject)
        attachments = []
        for index, part in enumerate(mail.parts):
            file_id = f"{mail.message_id}#{index}"
            self._files[file_id] = part.data
            attachments.append(
                Attachment(part.kind, file_id, part.name, part.media_type, len(part.data))
            )
        return InboundMessage(
            channel=self.account,
            chat=mail.sender,
            message_id=mail.message_id,
            sender=mail.sender,
            sender_aliases=[f"@{mail.sender.rpartition('@')[2]}"],
            sender_name=mail.sender_name,
            text=_with_subject(mail) if new_thread else mail.text,
            thread=thread,
            attachments=attachments,
            at=mail.at or time.time(),
        )

    async def download(self, attachment: Attachment) -> bytes:
        data = self._files.get(attachment.file_id)
        if data is None:
            raise SendError(f"{attachment.name} is no longer at hand (its batch is done)")
        return data

    # -- sending ------------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        # One mail per reply: email has no length limit worth cutting at. The Markdown
        # goes whole; send_text writes it as the plain part and renders the HTML part.
        return [markdown]

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        return await self._send(to, chunk, reply_to=reply_to, seed=f"text\0{chunk}")

    async def send_file(self, to: Address, path: Path, *, caption: str = "", name: str = "") -> str:
        data = await asyncio.to_thread(path.read_bytes)
        name = name or path.name
        if len(data) > FILE_LIMIT:
            raise Unsupported(f"{name} is over the 25 MB an email can carry")
        return await self._send(
            to, caption, reply_to=None, seed=f"file\0{name}\0{caption}", files=((name, data),)
        )

    async def _send(
        self,
        to: Address,
        markdown: str,
        *,
        reply_to: str | None,
        seed: str,
        files: tuple[tuple[str, bytes], ...] = (),
    ) -> str:
        if "@" not in to.chat:
            raise Undeliverable(f"{to.chat!r} is not an email address")
        sending = SENDING.get()
        # The same delivery (and part) gives the same Message-ID on every retry; a send
        # outside a delivery job gets a fresh one.
        unique = f"{sending.job}\0{seed}" if sending is not None else uuid.uuid4().hex
        message_id = derived_message_id(unique, self.address)
        state = self.state
        thread = state.threads.get(to.thread) if to.thread else None
        parent, references = state.reply_headers(to.thread, reply_to) if to.thread else ("", [])
        subject = reply_subject(thread.subject) if thread is not None else _first_line(markdown)
        message = build_message(
            Outgoing(
                sender=self.address,
                to=to.chat,
                subject=subject,
                markdown=markdown,
                message_id=message_id,
                in_reply_to=parent,
                references=tuple(references),
                files=files,
            ),
            time.time(),
        )
        await self._smtp(message)
        if to.thread:
            # Saved with the next position: a reply to this mail finds its thread by its
            # References' root even if this is lost in a crash.
            state.remember(message_id, to.thread, references, thread.subject if thread else subject)
        return message_id

    async def _smtp(self, message: Message) -> None:
        import aiosmtplib

        try:
            await self._outbox.send(message)
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise Undeliverable(f"smtp {self.smtp_host}: login refused: {exc.message}") from None
        except aiosmtplib.SMTPRecipientsRefused as exc:
            refused = "; ".join(f"{r.recipient}: {r.message}" for r in exc.recipients)
            raise Undeliverable(f"smtp {self.smtp_host}: refused {refused}") from None
        except aiosmtplib.SMTPResponseException as exc:
            text = f"smtp {self.smtp_host}: {exc.code} {exc.message}"
            if 500 <= exc.code < 600:
                raise Undeliverable(text) from None
            raise SendError(text) from None
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise SendError(f"smtp {self.smtp_host}:{self.smtp_port}: {exc}") from None


def _with_subject(mail: Inbound) -> str:
    """A new thread's text with its subject first (it often says what the mail is about),
    unless the body already says it or is a command."""
    subject = mail.subject
    text = mail.text
    if not subject or text.startswith("/") or text.lower().startswith(subject.lower()):
        return text or subject
    return f"{subject}\n\n{text}" if text else subject


def _first_line(markdown: str) -> str:
    """A subject for a mail that starts a thread: the text's first line, shortened."""
    for line in markdown.splitlines():
        words = line.strip().lstrip("#>- ").replace("**", "").replace("`", "").strip()
        if words:
            return words if len(words) <= 70 else words[:67].rstrip() + "..."
    return "A message from your assistant"


def _host_port(value: str, what: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise FatalAdapterError(f"{what} {value!r} is not host:port")
    return host.strip("[]"), int(port)


def build(config: ChannelConfig, context: AdapterContext) -> EmailAdapter:
    """The adapter of one mailbox (habakkuk.channels.platforms)."""
    password = context.secret(config, "password_env")
    return EmailAdapter(config, password, context.state_path(config, ".json"))


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Log in to the IMAP and SMTP servers: "ADDRESS (N messages...)" or SetupCheckFailed."""
    import aiosmtplib

    password = secrets.get(config.password_env or "", "")
    username = config.username or config.address or ""
    tls = config.tls_mode
    host, port = _host_port(config.imap or "", "imap")
    client = ImapClient(host, port, tls, timeout=15)
    try:
        await client.connect()
        await client.login(username, password)
        mailbox = await client.select("INBOX")
    except ImapError as exc:
        raise SetupCheckFailed(f"IMAP {host}:{port}: {exc}") from None
    finally:
        await client.logout()
    smtp_host, smtp_port = _host_port(config.smtp or "", "smtp")
    smtp = aiosmtplib.SMTP(
        hostname=smtp_host,
        port=smtp_port,
        use_tls=tls == "implicit",
        start_tls=tls == "starttls",
        timeout=15,
    )
    try:
        await smtp.connect()
        await smtp.login(username, password)
    except (aiosmtplib.SMTPException, OSError) as exc:
        raise SetupCheckFailed(f"SMTP {smtp_host}:{smtp_port}: {exc}") from None
    finally:
        if smtp.is_connected:
            try:
                await smtp.quit()
            except (aiosmtplib.SMTPException, OSError):
                smtp.close()
    idle = "with IDLE" if "IDLE" in client.capabilities else "polling"
    return f"{config.address} (IMAP {host} {idle}, next UID {mailbox.uidnext}; SMTP {smtp_host})"


SETUP = PlatformSetup(
    type="email",
    title="Email",
    instructions=(
        "1. Create a mailbox for the assistant (a new address is best: it answers every\n"
        "   allowed sender who writes to it, and reads nothing already in the INBOX).\n"
        "2. Find the provider's IMAP and SMTP servers (host:port), e.g. imap.example.org:993\n"
        "   and smtp.example.org:465 for implicit TLS, or :143 and :587 with tls: starttls.\n"
        "3. Make an app password if the provider uses two-factor login, and paste it below.\n"
        "4. allow_from: your own address (or @your-domain.org for everyone there)."
    ),
    fields=(
        SetupField("address", "The assistant's address (bot@example.org)"),
        SetupField("imap", "IMAP server as host:port", default="imap.example.org:993"),
        SetupField("smtp", "SMTP server as host:port", default="smtp.example.org:465"),
        SetupField("username", "Login name (often the address)"),
        SetupField("password_env", "Password", secret=True, variable="EMAIL_PASSWORD"),
        SetupField(
            "allow_from",
            "Your email address (others pair with a code)",
            help="an @domain entry lets everyone at that domain in",
        ),
    ),
    check=check_setup,
)
