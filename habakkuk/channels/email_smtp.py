"""The SMTP connection an email account's replies go out on, kept between sends.

A connection per reply costs a TCP (and TLS) handshake, EHLO and AUTH before each mail;
kept, a reply is MAIL, RCPT and DATA. A server drops an idle connection after a while
(RFC 5321 allows 5 minutes): the send that finds it gone connects again once. Sends are
one at a time (one SMTP transaction per connection at once).
"""

from __future__ import annotations

import asyncio
from email.message import Message
from typing import TYPE_CHECKING

from habakkuk.engine.channel_config import TlsMode
from habakkuk.engine.timeouts import wait_within

if TYPE_CHECKING:
    import aiosmtplib

TIMEOUT = 60.0


class SmtpLink:
    """One logged-in SMTP connection, made on the first send and remade when lost."""

    def __init__(self, host: str, port: int, tls: TlsMode, username: str, password: str):
        self.host = host
        self.port = port
        self.tls = tls
        self.username = username
        self.password = password
        self._client: aiosmtplib.SMTP | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        """Whether a connection is kept now."""
        return self._client is not None and self._client.is_connected

    async def send(self, message: Message) -> None:
        """Send `message` to its To address (aiosmtplib's errors propagate)."""
        import aiosmtplib

        async with self._lock:
            reused = self._client is not None and self._client.is_connected
            client = await self._connected()
            try:
                await client.send_message(message)
                return
            except aiosmtplib.SMTPServerDisconnected:
                await self._drop()
                if not reused:
                    raise
            except BaseException:
                await self._drop()  # a connection in an unknown state is not reused
                raise
            # The kept connection had been closed by the server while idle: once more.
            client = await self._connected()
            try:
                await client.send_message(message)
            except BaseException:
                await self._drop()
                raise

    async def _connected(self) -> aiosmtplib.SMTP:
        import aiosmtplib

        if self._client is not None and self._client.is_connected:
            return self._client
        client = aiosmtplib.SMTP(
            hostname=self.host,
            port=self.port,
            use_tls=self.tls == "implicit",
            start_tls=self.tls == "starttls",
            timeout=TIMEOUT,
        )
        await client.connect()
        # A relay that offers no AUTH (a local MTA on 127.0.0.1:25) takes mail without a
        # login; one that does gets ours.
        if client.supports_extension("auth"):
            try:
                await client.login(self.username, self.password)
            except BaseException:
                client.close()
                raise
        self._client = client
        return client

    async def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    async def close(self) -> None:
        """QUIT and close (idempotent)."""
        import aiosmtplib

        client, self._client = self._client, None
        if client is not None and client.is_connected:
            try:
                await wait_within(client.quit(), 5)
            except (aiosmtplib.SMTPException, OSError, TimeoutError):
                client.close()
