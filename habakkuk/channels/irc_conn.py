"""One IRC connection: TLS or plain, IRCv3 capabilities, SASL PLAIN, registration with
nick collisions handled, and paced writes.

Registration (IRCv3 "Capability Negotiation" and "SASL 3.1"): `CAP LS 302`, an optional
`PASS`, then `NICK` and `USER`; the capabilities we use that the server offers are
requested (message-tags and server-time give a message's id and time, account-tag the
sender's account; sasl when we log in), `AUTHENTICATE PLAIN` sends the base64 of
`account\\0account\\0password` in 400-byte pieces, and `CAP END` after 903. A server
without CAP answers 421 and registration goes on. A nick in use (433) before we are
welcomed is retried with `_` appended (then a digit replacing the last character), so a
ghost of our own last connection does not keep us out. What no retry can fix (a wrong
SASL password, a banned or invalid nick, a wrong server password) is FatalAdapterError.

Writes of what the server counts against flooding (PRIVMSG, NOTICE, JOIN) go through
`Pacer`: a burst of BURST lines, then one per INTERVAL seconds, which keeps a bot under
the "Excess Flood" limits of the common servers. PONG and the rest go at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from habakkuk.engine.timeouts import wait_within

from .adapter import FatalAdapterError, SendError
from .irc_wire import Line, format_line, parse_line

# A line longer than this is no IRC server talking (tags may add 8191 bytes to 512).
MAX_READ = 8191 + 512
BURST = 5
INTERVAL = 1.0
WANTED_CAPS = frozenset({"message-tags", "server-time", "account-tag"})
_SASL_FAILED = {"902", "904", "905", "906", "908"}
# Twitch refuses a bad oauth token with a NOTICE before closing the link.
_LOGIN_REFUSED = re.compile(r"login authentication failed|improperly formatted auth", re.I)
_PACED = {"PRIVMSG", "NOTICE", "JOIN", "PART", "TAGMSG"}


@dataclass(frozen=True)
class IrcLogin:
    """Where and who: the server, TLS or not, the nick, and the credentials (SASL PLAIN
    with `account`/`password`; or a server password sent as PASS when `sasl` is off)."""

    host: str
    port: int
    tls: bool
    nick: str
    user: str
    realname: str = "Habakkuk"
    sasl: bool = True
    account: str = ""
    password: str = ""
    # extra capabilities to request (Twitch's twitch.tv/tags ...)
    caps: frozenset[str] = frozenset()
    # Twitch: no `CAP LS` (it lists nothing); `caps` are requested outright, and no
    # `CAP END` is owed; the password (the oauth token) goes as PASS
    request_only: bool = False
    # seconds between paced lines after the burst (Twitch allows 20 in 30 s)
    interval: float = INTERVAL


class Pacer:
    """A token bucket for lines: `BURST` at once, then one per `interval` seconds."""

    def __init__(
        self,
        burst: int = BURST,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.interval = interval
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> float:
        """Take a line's token; the seconds to wait before that line may go (0: now)."""
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) / self.interval)
        self._at = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens * self.interval


def next_nick(nick: str, wanted: str, limit: int = 30) -> str:
    """The nick to try after `nick` was taken: `_` appended up to `limit`, then the last
    character counting up 0-9."""
    if len(nick) < min(limit, len(wanted) + 2):
        return nick + "_"
    last = nick[-1]
    digit = int(last) + 1 if last.isdigit() else 0
    if digit > 9:
        raise FatalAdapterError(f"every nick like {wanted!r} is in use on this server")
    return nick[:-1] + str(digit)


class IrcConnection:
    """A registered connection to an IRC server (made by `connect`)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, login: IrcLogin
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.login = login
        self.nick = login.nick
        self.user = login.user
        self.host = ""  # learnt from 001, 396, our own JOIN or WHOIS
        self.caps: set[str] = set()
        self.network = ""
        self.pacer = Pacer(interval=login.interval)
        self._write = asyncio.Lock()
        self._pace = asyncio.Lock()

    @classmethod
    async def open(cls, login: IrcLogin, timeout: float = 30.0) -> IrcConnection:
        """The TCP (and TLS) connection, not yet registered; SendError when it cannot be
        made (the supervisor retries)."""
        context = ssl.create_default_context() if login.tls else None
        try:
            reader, writer = await wait_within(
                asyncio.open_connection(login.host, login.port, ssl=context, limit=MAX_READ),
                timeout,
            )
        except ssl.SSLCertVerificationError as exc:
            raise SendError(f"{login.host}:{login.port}: TLS: {exc.verify_message}") from None
        except (OSError, TimeoutError) as exc:
            what = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise SendError(f"cannot reach {login.host}:{login.port}: {what}") from None
        return cls(reader, writer, login)

    async def close(self) -> None:
        """Close the socket (a QUIT first when it is still open)."""
        if self.writer.is_closing():
            return
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            self.writer.write(format_line("QUIT", "bye"))
        self.writer.close()
        with contextlib.suppress(OSError, ssl.SSLError, TimeoutError, asyncio.TimeoutError):
            await wait_within(self.writer.wait_closed(), 5)

    # -- lines ---------------------------------------------------------------------------

    async def read(self) -> Line | None:
        """The next line from the server; None when the connection ended."""
        while True:
            try:
                raw = await self.reader.readuntil(b"\n")
            except (asyncio.IncompleteReadError, ConnectionResetError):
                return None  # the server ended it (a reset is how many end it)
            except asyncio.LimitOverrunError:
                raise SendError("the server sent a line over the IRC limit") from None
            except (OSError, ssl.SSLError) as exc:
                raise SendError(f"the connection broke: {exc}") from None
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not text.strip():
                continue
            try:
                return parse_line(text)
            except ValueError:
                continue  # not a line a server sends; nothing to act on

    async def send(self, command: str, *params: str, tags: dict[str, str] | None = None) -> None:
        """Write one line, paced when the server counts it against flooding."""
        data = format_line(command, *params, tags=tags)
        if command in _PACED:
            async with self._pace:  # in order: the first waits, the rest queue behind it
                delay = self.pacer.take()
                if delay:
                    await asyncio.sleep(delay)
                await self._send(data)
        else:
            await self._send(data)

    async def _send(self, data: bytes) -> None:
        async with self._write:
            if self.writer.is_closing():
                raise SendError("not connected to the IRC server")
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (OSError, ssl.SSLError, RuntimeError) as exc:
                raise SendError(f"the connection broke: {exc}") from None

    # -- registration ----------------------------------------------------------------------

    async def register(self, beat: Callable[[], None] = lambda: None) -> None:
        """Register (capabilities, SASL, nick), until the server's welcome (001)."""
        login = self.login
        if login.request_only:
            if login.caps:
                await self.send("CAP", "REQ", " ".join(sorted(login.caps)))
        else:
            await self.send("CAP", "LS", "302")
        if login.password and not login.sasl:
            await self.send("PASS", login.password)
        await self.send("NICK", self.nick)
        await self.send("USER", login.user, "0", "*", login.realname)
        offered: set[str] = set()
        while True:
            line = await self.read()
            if line is None:
                raise SendError("the server closed the connection during registration")
            beat()
            if await self._registration_step(line, offered):
                return

    async def _registration_step(self, line: Line, offered: set[str]) -> bool:
        """Act on one line of registration; True once we are welcomed."""
        login = self.login
        command = line.command
        if command == "PING":
            await self.send("PONG", line.param(0))
        elif command == "CAP":
            await self._cap(line, offered)
        elif command == "AUTHENTICATE" and line.param(0) == "+":
            await self._authenticate()
        elif command in ("903", "907"):
            await self.send("CAP", "END")
        elif command in _SASL_FAILED:
            raise FatalAdapterError(
                f"SASL login as {login.account or login.nick} refused: "
                f"{line.params[-1] if line.params else command} (check the account and password)"
            )
        elif command == "421" and line.param(1) == "CAP":
            if login.sasl:
                raise FatalAdapterError(
                    f"{login.host} has no SASL (no CAP): set sasl: false for a server without it"
                )
        elif command == "433":
            self.nick = next_nick(self.nick, login.nick)
            await self.send("NICK", self.nick)
        elif command in ("432", "465", "463"):
            raise FatalAdapterError(f"{login.host} refused us: {' '.join(line.params[1:])}")
        elif command == "464":
            raise FatalAdapterError(f"{login.host}: the server password is wrong")
        elif command == "ERROR":
            raise SendError(f"{login.host} closed the link: {line.param(0)}")
        elif command == "NOTICE" and _LOGIN_REFUSED.search(line.params[-1] if line.params else ""):
            raise FatalAdapterError(f"{login.host} refused the login: {line.params[-1]}")
        elif command == "001":
            self.nick = line.param(0) or self.nick
            self._learn_from_welcome(line.params[-1] if line.params else "")
            return True
        return False

    async def _cap(self, line: Line, offered: set[str]) -> None:
        login = self.login
        sub = line.param(1).upper()
        if sub == "LS":
            more = line.param(2) == "*"
            listed = line.params[-1]
            offered.update(item.split("=", 1)[0] for item in listed.split())
            if more:
                return
            wanted = set((WANTED_CAPS | login.caps) & offered)
            if login.sasl:
                if "sasl" not in offered:
                    raise FatalAdapterError(
                        f"{login.host} offers no SASL: set sasl: false for a server without it"
                    )
                wanted.add("sasl")
            if wanted:
                await self.send("CAP", "REQ", " ".join(sorted(wanted)))
            else:
                await self.send("CAP", "END")
        elif sub == "ACK":
            self.caps.update(line.params[-1].split())
            if "sasl" in self.caps and login.sasl:
                await self.send("AUTHENTICATE", "PLAIN")
            elif not login.request_only:
                await self.send("CAP", "END")
        elif sub == "NAK":
            if login.sasl:
                raise FatalAdapterError(f"{login.host} refused the SASL capability")
            if not login.request_only:
                await self.send("CAP", "END")

    async def _authenticate(self) -> None:
        login = self.login
        account = login.account or login.nick
        payload = f"{account}\0{account}\0{login.password}".encode()
        encoded = base64.b64encode(payload).decode("ascii")
        pieces = [encoded[i : i + 400] for i in range(0, len(encoded), 400)]
        if len(encoded) % 400 == 0:
            pieces.append("+")  # a last piece of exactly 400 is followed by an empty one
        for piece in pieces:
            await self.send("AUTHENTICATE", piece)

    def _learn_from_welcome(self, text: str) -> None:
        last = text.split()[-1] if text.split() else ""
        if "!" in last and "@" in last:
            self.learn_prefix(last)

    def learn_prefix(self, prefix: str) -> None:
        """Our own `nick!user@host` as the server shows it (what its relays carry)."""
        nick, _, rest = prefix.partition("!")
        user, _, host = rest.partition("@")
        if nick and user and host:
            self.nick, self.user, self.host = nick, user, host
