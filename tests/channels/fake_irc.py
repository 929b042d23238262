"""A small IRCv3 server for what ngircd lacks: CAP negotiation with SASL PLAIN (IRCv3
"SASL 3.1": AUTHENTICATE in 400-byte pieces, 900/903 or 904), message tags (msgid,
server-time, account) on what it relays, and a test's hand on the link (drop it, replay
a message as a bouncer does). One person, `alice`, talks through `say`; every line the
bot sends is kept, and what the server would relay of each PRIVMSG is rebuilt with the
bot's full prefix, as a real server writes it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import ssl
from dataclasses import dataclass
from pathlib import Path

from habakkuk.channels.irc_wire import Line, parse_line
from tests.helpers import eventually

BOT_HOST = "user/habakkuk/x-very-long-cloaked-host.example.org"
ALICE = "alice"
ALICE_PREFIX = "alice!alice@alice.example.org"
ALICE_TWITCH_ID = "1234567"


@dataclass
class Client:
    """One connection of the bot."""

    writer: asyncio.StreamWriter
    nick: str = ""
    user: str = ""
    registered: bool = False
    caps_ending: bool = False
    password: str = ""


class FakeIrc:
    """The fake server (start / stop); `accounts` are the SASL logins it accepts."""

    def __init__(
        self,
        *,
        accounts: dict[str, str] | None = None,
        caps: tuple[str, ...] = ("sasl", "message-tags", "server-time", "account-tag"),
        taken: tuple[str, ...] = (),
        certificate: tuple[Path, Path] | None = None,
        twitch_token: str = "",
    ) -> None:
        self.accounts = accounts or {}
        self.caps = caps
        self.taken = set(taken)
        self.certificate = certificate
        # Twitch's IRC: PASS oauth:<token>, no CAP LS/END, its own tags on messages
        self.twitch_token = twitch_token
        self.port = 0
        self.clients: list[Client] = []
        self.received: list[Line] = []  # every line the bot sent, in order
        self.relayed: list[bytes] = []  # each PRIVMSG of the bot as relayed, CRLF included
        self.logins: list[str] = []
        self.connections = 0
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        context = None
        if self.certificate is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.certificate)
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.drop()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def __aenter__(self) -> FakeIrc:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the test's hand ---------------------------------------------------------------

    def drop(self) -> None:
        """Close every connection at once (a netsplit, a restart of the server)."""
        for client in self.clients:
            client.writer.close()
        self.clients.clear()

    async def registered(self, count: int = 1) -> Client:
        """Wait until `count` connections have registered; the newest."""
        await eventually(
            lambda: sum(c.registered for c in self.clients) >= 1 and self.connections >= count,
            what=f"the bot's connection {count} to register",
        )
        return [c for c in self.clients if c.registered][-1]

    def say(self, text: str, *, target: str = "", msgid: str = "", account: str = "") -> str:
        """Alice says `text` to the bot (or in channel `target`); the msgid it carries."""
        msgid = msgid or f"m{next(self._ids)}"
        tags = f"@msgid={msgid};time=2026-12-07T10:00:00.000Z"
        prefix = ALICE_PREFIX
        if account:
            tags += f";account={account}"
        if self.twitch_token:
            tags = (
                f"@badge-info=;badges=broadcaster/1;display-name=Alice;id={msgid};"
                f"tmi-sent-ts=1796637600000;user-id={ALICE_TWITCH_ID}"
            )
            prefix = "alice!alice@alice.tmi.twitch.tv"
        for client in self.clients:
            if client.registered:
                where = target or client.nick
                self._write(client, f"{tags} :{prefix} PRIVMSG {where} :{text}")
        return msgid

    def texts(self, target: str = ALICE) -> list[str]:
        """What the bot said to `target`, line by line."""
        return [
            line.param(1)
            for line in self.received
            if line.command == "PRIVMSG" and line.param(0) == target
        ]

    # -- the protocol --------------------------------------------------------------------

    def _write(self, client: Client, line: str) -> None:
        if not client.writer.is_closing():
            client.writer.write(line.encode() + b"\r\n")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = Client(writer, caps_ending=bool(self.twitch_token))
        self.clients.append(client)
        self.connections += 1
        sasl_buffer = ""
        try:
            while raw := await reader.readline():
                line = parse_line(raw.decode().rstrip("\r\n"))
                self.received.append(line)
                sasl_buffer = self._handle(client, line, sasl_buffer)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            if client in self.clients:
                self.clients.remove(client)
            writer.close()

    def _handle(self, client: Client, line: Line, sasl: str) -> str:
        server = ":irc.fake"
        name = client.nick or "*"
        match line.command:
            case "CAP" if line.param(0) == "LS":
                self._write(client, f"{server} CAP * LS :{' '.join(self.caps)}")
            case "CAP" if line.param(0) == "REQ":
                self._write(client, f"{server} CAP {name} ACK :{line.param(1)}")
            case "CAP" if line.param(0) == "END":
                client.caps_ending = True
                self._welcome(client)
            case "AUTHENTICATE" if line.param(0) == "PLAIN":
                self._write(client, "AUTHENTICATE +")
            case "AUTHENTICATE":
                piece = line.param(0)
                sasl += "" if piece == "+" else piece
                if len(piece) == 400:
                    return sasl  # more to come
                _, account, password = base64.b64decode(sasl).decode().split("\0")
                if self.accounts.get(account) == password:
                    self.logins.append(account)
                    self._write(client, f"{server} 900 {name} {name}!u@h {account} :logged in")
                    self._write(client, f"{server} 903 {name} :SASL authentication successful")
                else:
                    self._write(client, f"{server} 904 {name} :SASL authentication failed")
                return ""
            case "PASS":
                client.password = line.param(0)
            case "NICK" if self.twitch_token:
                if client.password != f"oauth:{self.twitch_token}":
                    self._write(client, ":tmi.twitch.tv NOTICE * :Login authentication failed")
                    client.writer.close()
                    return sasl
                client.nick = line.param(0)
                client.user = client.nick
                self._welcome(client)
            case "NICK":
                wanted = line.param(0)
                if wanted in self.taken:
                    self._write(client, f"{server} 433 {name} {wanted} :Nickname is already in use")
                else:
                    client.nick = wanted
                    self._welcome(client)
            case "USER":
                client.user = line.param(0)
                self._welcome(client)
            case "PING":
                self._write(client, f"{server} PONG irc.fake :{line.param(0)}")
            case "WHOIS":
                self._write(
                    client,
                    f"{server} 311 {name} {client.nick} {client.user} {BOT_HOST} * :Habakkuk",
                )
            case "PRIVMSG":
                prefix = f":{client.nick}!{client.user}@{BOT_HOST}"
                relayed = f"{prefix} PRIVMSG {line.param(0)} :{line.param(1)}\r\n"
                self.relayed.append(relayed.encode())
            case _:
                pass
        return sasl

    def _welcome(self, client: Client) -> None:
        if client.registered or not (client.nick and client.user and client.caps_ending):
            return
        client.registered = True
        self._write(client, f":irc.fake 001 {client.nick} :Welcome to the fake network")
