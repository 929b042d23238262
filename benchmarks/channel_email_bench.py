"""The email channel's speed against real mail servers (Dovecot, aiosmtpd; as the tests).

Prints:
- inbound: messages per second from the INBOX to a queued turn (N mails of one thread
  waiting in the INBOX, the adapter positioned before them, a real Runtime's gateway
  queueing turns, no turn worker running them);
- outbound: replies per second the adapter sends (Markdown to plain and HTML, MIME, SMTP
  on its kept connection) to an MTA in another process;
- reconnect: from the server dropping the connection (doveadm kick) to the adapter
  noticing, and from a fresh run to its position taken (no supervisor backoff counted).

Needs Debian's dovecot-imapd. Run from the repository: `python benchmarks/channel_email_bench.py`.
"""

# The measurements poll the database and the adapter's beats: there is no event for them.
# ruff: noqa: ASYNC110, ASYNC220

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import fresh_home, mock_config
from tests.channels.fake_email import (
    PASSWORD,
    PERSON,
    Dovecot,
    MailDriver,
    SmtpServer,
    _free_port,
)

INBOUND = 300
OUTBOUND = 300


def _message(n: int, bot: str) -> bytes:
    message = EmailMessage()
    message["From"] = PERSON
    message["To"] = bot
    message["Subject"] = f"note {n}"
    message["Message-ID"] = f"<bench-{n}@example.org>"
    if n:  # one conversation, as a person writing on in a thread
        message["In-Reply-To"] = "<bench-0@example.org>"
        message["References"] = "<bench-0@example.org>"
    message.set_content(f"message number {n}")
    return message.as_bytes()


def _fill(dovecot: Dovecot, bot: str, count: int) -> int:
    """Put `count` mails in the INBOX; its UIDVALIDITY."""
    connection = imaplib.IMAP4("127.0.0.1", dovecot.imap_port)
    connection.login(bot, PASSWORD)
    for n in range(count):
        connection.append("INBOX", "", None, _message(n, bot))
    connection.select("INBOX")
    _, data = connection.response("UIDVALIDITY")
    connection.logout()
    return int(data[0] or 0)


def _turns(db: Path) -> int:
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE kind = 'turn'").fetchone()[0])
    return 0


async def inbound(dovecot: Dovecot, root: Path) -> None:
    from habakkuk.channels.email_state import EmailState
    from habakkuk.engine.config import parse_config
    from habakkuk.runtime import Runtime

    bot = dovecot.add_user()
    smtp = SmtpServer(bot)
    await smtp.start()
    driver = MailDriver(dovecot, smtp, bot)
    validity = await asyncio.to_thread(_fill, dovecot, bot, INBOUND)
    yaml = driver.channel_yaml("mail").replace(f'["{PERSON}"]', '"*"')
    channel = "channels:\n  mail:\n" + "".join(f"    {line}\n" for line in yaml.splitlines())
    config = mock_config(model="mock/demo", mode="full", extra=channel)
    home = fresh_home(root / "in", config)
    # Positioned before the waiting mails, as if they came while the adapter was away.
    EmailState(uidvalidity=validity, last_uid=0).save(home.channels_dir / "email-mail.json")
    runtime = await Runtime.open(home, parse_config(config, home.config_path, home))
    import os

    os.environ["MAIL_PASSWORD"] = PASSWORD
    started = time.perf_counter()
    # The channels alone (no turn workers): the turns stay queued, and what is timed is
    # the IMAP fetch, the parse, the gateway and the durable enqueue.
    runtime.channel_service().start()
    db = home.db_path("control")
    while _turns(db) < INBOUND:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    await runtime.close()
    await smtp.stop()
    print(f"inbound: {INBOUND} mails to queued turns in {elapsed:.2f}s = {INBOUND / elapsed:.0f}/s")


async def outbound(dovecot: Dovecot, root: Path) -> None:
    from habakkuk.channels.adapter import Address
    from habakkuk.channels.email import EmailAdapter
    from habakkuk.engine.channel_config import ChannelConfig

    bot = dovecot.add_user()
    # The receiving MTA in a process of its own, as a real one is (aiosmtpd's Sink: it
    # takes every mail and keeps none), so its work is not counted as the adapter's.
    port = _free_port()
    sink = subprocess.Popen(
        [sys.executable, "-m", "aiosmtpd", "-n", "-c", "aiosmtpd.handlers.Sink",
         "-l", f"127.0.0.1:{port}"],
    )  # fmt: skip
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            await asyncio.sleep(0.05)
    config = ChannelConfig(
        type="email",
        imap=f"127.0.0.1:{dovecot.imap_port}",
        smtp=f"127.0.0.1:{port}",
        username=bot,
        password_env="MAIL_PASSWORD",
        address=bot,
    )
    config.name = "mail"
    config.tls_mode = "plain"
    adapter = EmailAdapter(config, PASSWORD, root / "out.json")
    to = Address("mail", PERSON)
    started = time.perf_counter()
    for n in range(OUTBOUND):
        await adapter.send_text(to, f"reply **{n}** with a [link](https://example.org)")
    elapsed = time.perf_counter() - started
    await adapter.close()
    sink.terminate()
    sink.wait()
    print(f"outbound: {OUTBOUND} replies in {elapsed:.2f}s = {OUTBOUND / elapsed:.0f}/s")
    await reconnect(dovecot, adapter, bot)


async def reconnect(dovecot: Dovecot, adapter: object, bot: str) -> None:
    from habakkuk.channels.adapter import InboundMessage
    from habakkuk.channels.email import EmailAdapter

    assert isinstance(adapter, EmailAdapter)
    beats: list[float] = []

    async def inbox(message: InboundMessage) -> None:
        return None

    for _ in range(2):  # the first run positions; the second is the reconnect measured
        beats.clear()
        task = asyncio.create_task(adapter.run(inbox, lambda: beats.append(time.perf_counter())))
        started = time.perf_counter()
        while not beats:
            await asyncio.sleep(0.005)
        positioned = beats[0] - started
        kicked = time.perf_counter()
        await asyncio.to_thread(dovecot.kick, bot)
        with contextlib.suppress(Exception):
            await task
        noticed = time.perf_counter() - kicked
    print(
        f"reconnect: drop noticed in {noticed * 1000:.0f} ms; "
        f"connected and positioned again in {positioned * 1000:.0f} ms"
    )


async def main() -> None:
    import logging

    logging.getLogger("mail.log").setLevel(logging.ERROR)  # aiosmtpd's own deprecation note
    dovecot = Dovecot()
    dovecot.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            await inbound(dovecot, Path(folder))
            await outbound(dovecot, Path(folder))
    finally:
        dovecot.stop()


if __name__ == "__main__":
    asyncio.run(main())
