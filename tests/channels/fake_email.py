"""Real mail servers for the email channel's tests: Dovecot for IMAP, aiosmtpd for SMTP.

`Dovecot` runs Debian's dovecot-imapd with a config of its own in a temp folder (loopback
only, a passwd-file of users, Maildirs, plain login allowed, a self-signed certificate for
the IMAPS and STARTTLS tests), one instance per test session; every test gets a fresh user,
so a fresh INBOX. `SmtpServer` is aiosmtpd on the test's own loop, the MTA our replies go
to; it checks the login and records each message. `MailDriver` plays the person: "sending
the bot an email" is an IMAP APPEND into the bot's INBOX over the wire (with the stdlib
imaplib, not our client), which the adapter then hears of through IDLE.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import imaplib
import itertools
import json
import os
import pwd
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import make_msgid
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

PASSWORD = "mail-secret"
PERSON = "alice@example.org"
USERS = 1000  # mailboxes made for one test session
DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (cert, key), made with openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


class Dovecot:
    """A Dovecot IMAP server of our own on 127.0.0.1 (start / stop)."""

    def __init__(self, extra_config: str = "") -> None:
        self.extra_config = extra_config  # more settings (e.g. imap_capability without IDLE)
        self.root = Path(tempfile.mkdtemp(prefix="hk-dovecot-"))
        self.imap_port = 0
        self.imaps_port = 0
        self.cert = self.root / "cert.pem"
        self._process: subprocess.Popen[bytes] | None = None
        self._users = itertools.count(1)

    def start(self) -> None:
        root = self.root
        root.chmod(0o755)  # the mail processes run as the mail user
        make_certificate(root)
        (root / "key.pem").chmod(0o644)
        mail = root / "mail"
        mail.mkdir()
        # Every user is there before the server starts: Dovecot notices a changed
        # passwd-file by its mtime, and two users added within its resolution would race.
        (root / "passwd").write_text(
            "".join(f"{self._address(n)}:{{PLAIN}}{PASSWORD}::::::\n" for n in range(1, USERS + 1))
        )
        if os.geteuid() == 0:  # Dovecot drops to its own users
            internal, login, mail_user = "dovecot", "dovenull", "dovecot"
            os.chown(mail, pwd.getpwnam(mail_user).pw_uid, -1)
        else:  # run by a user: every process is that user
            internal = login = mail_user = pwd.getpwuid(os.getuid()).pw_name
        self.imap_port, self.imaps_port = _free_port(), _free_port()
        # auth_failure_delay 0: a refused login answers at once. Dovecot's anvil still
        # delays the next login from 127.0.0.1 after a refusal (its auth penalty, about
        # 4 s, not configurable): the two tests of a wrong password pay it once each.
        (root / "dovecot.conf").write_text(
            f"""
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
instance_name = hk-test-{os.getpid()}
listen = 127.0.0.1
protocols = imap
ssl = yes
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal}
default_login_user = {login}
mail_location = maildir:{mail}/%u
first_valid_uid = 1
imap_idle_notify_interval = 2 secs
auth_failure_delay = 0
passdb {{
  driver = passwd-file
  args = {root}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_user} gid={mail_user} home={mail}/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    port = {self.imap_port}
  }}
  inet_listener imaps {{
    port = {self.imaps_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
{self.extra_config}
"""
        )
        self._process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                err = self._process.stderr.read() if self._process.stderr else b""
                raise RuntimeError(f"dovecot did not start: {err.decode(errors='replace')}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.imap_port), timeout=1),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("dovecot did not listen within 20 s")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stderr is not None:
                self._process.stderr.close()
            self._process = None
        shutil.rmtree(self.root, ignore_errors=True)

    def add_user(self) -> str:
        """A mailbox user of its own (its address) for a test; its password is PASSWORD."""
        number = next(self._users)
        if number > USERS:
            raise RuntimeError(f"more than {USERS} mailboxes asked of one Dovecot")
        return self._address(number)

    @staticmethod
    def _address(number: int) -> str:
        return f"bot{number}-{os.getpid()}@example.org"

    def append(self, user: str, raw: bytes) -> None:
        """Deliver `raw` into `user`'s INBOX over IMAP (APPEND), as an MTA's LDA would."""
        connection = imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=10)
        try:
            connection.login(user, PASSWORD)
            status, answer = connection.append("INBOX", "", None, raw)
            if status != "OK":
                raise RuntimeError(f"APPEND refused: {answer!r}")
        finally:
            connection.logout()

    def capabilities(self, user: str) -> tuple[str, ...]:
        """What the server offers `user` once logged in."""
        connection = imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=10)
        try:
            connection.login(user, PASSWORD)
            connection.capabilities = ()
            status, answer = connection.capability()
            return tuple(str(answer[0].decode()).split()) if status == "OK" and answer[0] else ()
        finally:
            connection.logout()

    def kick(self, user: str) -> None:
        """Drop every IMAP connection of `user` (doveadm kick), as a restarting server does."""
        subprocess.run(
            ["doveadm", "-c", str(self.root / "dovecot.conf"), "kick", user],
            check=True,
            capture_output=True,
        )

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))


class _Recorder:
    """aiosmtpd's handler: checks the login, records each message it accepts."""

    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_DATA(self, smtp: SMTP, session: Session, envelope: Envelope) -> str:
        data = envelope.original_content or b""
        if self.server.refuse_with:
            return self.server.refuse_with
        # Parsed when a test reads it: the server records at the speed a real MTA takes mail.
        header = re.search(rb"^Message-ID:\s*<([^>]*)>", data, re.MULTILINE | re.IGNORECASE)
        self.server.attempts.append(header.group(1).decode() if header else "")
        async with self.server.changed:
            self.server.changed.notify_all()
        if self.server.hold_next > 0:  # the sender hangs before our "250": kill it now
            self.server.hold_next -= 1
            await self.server.released.wait()
            return "451 held and not accepted"
        self.server.received.append(
            Received(str(envelope.mail_from), [str(r) for r in envelope.rcpt_tos], data)
        )
        async with self.server.changed:
            self.server.changed.notify_all()
        return "250 OK"


class Received:
    """One message the SMTP server accepted."""

    def __init__(self, sender: str, recipients: list[str], raw: bytes):
        self.sender = sender
        self.recipients = recipients
        self.raw = raw

    @functools.cached_property
    def message(self) -> EmailMessage:
        parsed = BytesParser(policy=policy.default).parsebytes(self.raw)
        assert isinstance(parsed, EmailMessage)
        return parsed

    @property
    def message_id(self) -> str:
        return str(self.message["Message-ID"]).strip().strip("<>")

    def part(self, media_type: str) -> str:
        for part in self.message.walk():
            if part.get_content_type() == media_type and part.get_filename() is None:
                content = part.get_content()
                return content if isinstance(content, str) else ""
        return ""

    @property
    def text(self) -> str:
        return self.part("text/plain").replace("\r\n", "\n").strip()

    def files(self) -> list[tuple[str, bytes]]:
        found = []
        for part in self.message.walk():
            name = part.get_filename()
            if name:
                payload = part.get_payload(decode=True)
                found.append((name, payload if isinstance(payload, bytes) else b""))
        return found


class SmtpServer:
    """aiosmtpd on 127.0.0.1: plain, implicit TLS or STARTTLS, login required."""

    def __init__(
        self, user: str, *, tls: str = "plain", cert: Path | None = None, idle: float = 300
    ) -> None:
        self.user = user
        self.idle = idle  # seconds before the server drops a silent connection
        self.tls = tls
        self.cert = cert
        self.port = 0
        self.received: list[Received] = []
        self.refuse_with = ""  # an SMTP reply to every DATA ("554 ...") when set
        self.connections = 0  # how many connections the server was opened
        self.attempts: list[str] = []  # the Message-ID of every DATA, accepted or not
        self.hold_next = 0  # hold this many DATA commands unanswered until `released`
        self.released = asyncio.Event()
        self.changed = asyncio.Condition()
        self._server: asyncio.Server | None = None

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == self.user
            and data.password.decode() == PASSWORD
        )
        return AuthResult(success=ok, handled=False, auth_data=data)

    async def start(self) -> None:
        context: ssl.SSLContext | None = None
        if self.cert is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.cert, self.cert.with_name("key.pem"))
        handler = _Recorder(self)

        def protocol() -> SMTP:
            self.connections += 1
            return SMTP(
                handler,
                hostname="localhost",
                authenticator=self._authenticate,
                # aiosmtpd counts only STARTTLS as TLS; an implicit TLS socket is one too
                auth_require_tls=self.tls == "starttls",
                require_starttls=self.tls == "starttls",
                tls_context=context if self.tls == "starttls" else None,
                timeout=self.idle,
            )

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            protocol,
            "127.0.0.1",
            self.port,
            ssl=context if self.tls == "implicit" else None,
            reuse_address=True,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        """Wait (bounded) until `predicate()` holds for what the server received."""

        async def _wait() -> None:
            async with self.changed:
                await self.changed.wait_for(predicate)

        try:
            await asyncio.wait_for(_wait(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"condition not met within {timeout}s; received: {[r.text for r in self.received]}"
            ) from None


class MailDriver:
    """The person (PERSON) writing to the bot's mailbox, and reading what it sent back.

    Implements tests/channels/platform_driver.PlatformDriver. Every `say` after the first
    replies inside the same thread, as a mail client's Reply does."""

    kind = "email"
    has_buttons = False

    def __init__(self, dovecot: Dovecot, smtp: SmtpServer, bot: str) -> None:
        self.dovecot = dovecot
        self.smtp = smtp
        self.bot = bot
        self.subject = ""
        self.thread: list[str] = []  # the Message-IDs of the conversation so far
        self.account = ""  # the channel's name, once channel_yaml was asked for

    async def ready(self) -> None:
        """Wait (bounded) until the adapter took its place in the INBOX: its first start
        answers nothing that came before (read from its state file under the home)."""
        home = os.environ.get("HABAKKUK_HOME")
        if not self.account or not home:
            return
        path = Path(home) / "channels" / f"email-{self.account}.json"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads(path.read_text())["uidvalidity"]:
                    return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the email adapter did not take its position ({path})")

    def channel_yaml(self, name: str) -> str:
        self.account = name
        return (
            "type: email\n"
            f"imap: 127.0.0.1:{self.dovecot.imap_port}\n"
            f"smtp: 127.0.0.1:{self.smtp.port}\n"
            f"username: {self.bot}\n"
            "password_env: MAIL_PASSWORD\n"
            f"address: {self.bot}\n"
            "tls: false\n"
            f'allow_from: ["{PERSON}"]\n'
            "poll_timeout: 1\n"
            "silent_limit: 20s\n"
        )

    def env(self) -> dict[str, str]:
        return {"MAIL_PASSWORD": PASSWORD}

    async def mail(
        self,
        text: str,
        *,
        subject: str = "Hello",
        sender: str = PERSON,
        in_reply_to: str = "",
        references: list[str] | None = None,
        html: str = "",
        files: list[tuple[str, bytes, str]] | None = None,
        headers: dict[str, str] | None = None,
        message_id: str = "",
    ) -> str:
        """Send the bot one email (APPEND into its INBOX); returns its Message-ID."""
        message = EmailMessage()
        message["From"] = sender
        message["To"] = self.bot
        message["Subject"] = subject
        message["Message-ID"] = message_id or make_msgid(domain="example.org")
        if in_reply_to:
            message["In-Reply-To"] = f"<{in_reply_to}>"
        if references:
            message["References"] = " ".join(f"<{r}>" for r in references)
        for key, value in (headers or {}).items():
            message[key] = value
        message.set_content(text)
        if html:
            message.add_alternative(html, subtype="html")
        for name, data, media in files or []:
            main, _, sub = media.partition("/")
            message.add_attachment(data, maintype=main, subtype=sub, filename=name)
        await asyncio.to_thread(self.dovecot.append, self.bot, message.as_bytes())
        return str(message["Message-ID"]).strip("<>")

    async def say(self, text: str) -> None:
        await self._in_thread(text)

    async def send_file(self, name: str, data: bytes, media_type: str, caption: str = "") -> None:
        await self._in_thread(caption, files=[(name, data, media_type)])

    async def _in_thread(
        self, text: str, files: list[tuple[str, bytes, str]] | None = None
    ) -> None:
        await self.ready()
        if not self.thread:
            self.subject = text.splitlines()[0] if text.strip() else "A file"
        newest = self.sent()[-1].message_id if self.sent() else ""
        parent = newest or (self.thread[-1] if self.thread else "")
        chain = [*self.thread, newest] if newest and newest not in self.thread else self.thread
        subject = self.subject if not self.thread else f"Re: {self.subject}"
        mid = await self.mail(
            text, subject=subject, in_reply_to=parent, references=list(chain), files=files
        )
        self.thread = [*chain, mid]

    async def press(self, label: str) -> None:
        raise AssertionError("email has no buttons: approvals are typed")

    def sent(self, to: str = PERSON) -> list[Received]:
        return [r for r in self.smtp.received if to in r.recipients]

    def texts(self) -> list[str]:
        return [r.text for r in self.sent()]

    def files(self) -> list[tuple[str, bytes]]:
        return [f for r in self.sent() for f in r.files()]
