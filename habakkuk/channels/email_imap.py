"""A small IMAP4rev1 client over asyncio streams: what the email adapter needs, no more.

Why our own and not a library: aioimaplib (async, with IDLE) has no STARTTLS, and the
account's `tls: starttls` needs it; it also leaves tasks of its own running after a
cancelled command. The stdlib imaplib has no IDLE before Python 3.14 and blocks a thread
that a cancelled adapter cannot interrupt. What we speak is a handful of commands (RFC
3501: CAPABILITY, STARTTLS, LOGIN, SELECT, UID FETCH, NOOP, LOGOUT; RFC 2177: IDLE), and
the one hard part of the grammar, literals (`{n}` then n bytes), is read here exactly.

A response is read as one `Response`: its text with each literal's bytes kept apart, so a
FETCH of a message body never goes through a text decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from habakkuk.engine.channel_config import TlsMode
from habakkuk.engine.timeouts import wait_within

_LITERAL = re.compile(rb"\{(\d+)\+?\}$")
_TAGGED = re.compile(rb"^(\S+) (OK|NO|BAD)\b ?(.*)$", re.IGNORECASE | re.DOTALL)
_CODE = re.compile(rb"\[([A-Z-]+) ?([^\]]*)\]", re.IGNORECASE)
FETCH_TIMEOUT = 300.0  # a response carrying a message of 25 MB on a slow line
LINE_LIMIT = 1 << 20  # a response line longer than this is a broken server, not mail


class ImapError(Exception):
    """A transport failure or a refused command (the one line says which)."""


class ImapAuthError(ImapError):
    """The server refused the login: a wrong username or password."""


@dataclass
class Response:
    """One server response: its text parts, with each literal's bytes between them."""

    parts: list[bytes] = field(default_factory=list)
    literals: list[bytes] = field(default_factory=list)

    @property
    def text(self) -> bytes:
        """The response without its literals (a literal is written `{n}`)."""
        return b"".join(self.parts)


@dataclass(frozen=True)
class Mailbox:
    """What SELECT says of the mailbox: its UIDVALIDITY and the next UID it will give."""

    uidvalidity: int
    uidnext: int


@dataclass(frozen=True)
class Fetched:
    """One message of a UID FETCH: its UID and its raw RFC 5322 bytes."""

    uid: int
    body: bytes


class ImapClient:
    """One IMAP connection. `connect`, `login`, `select`, then fetch or IDLE."""

    def __init__(self, host: str, port: int, tls: TlsMode, *, timeout: float = 30.0):
        self.host = host
        self.port = port
        self.tls = tls
        self.timeout = timeout
        self.capabilities: frozenset[str] = frozenset()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._tag = 0
        self._idling = False

    # -- connection -------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the connection (TLS as configured), read the greeting and capabilities."""
        context = ssl.create_default_context() if self.tls != "plain" else None
        try:
            self._reader, self._writer = await wait_within(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=context if self.tls == "implicit" else None,
                    limit=LINE_LIMIT,
                ),
                self.timeout,
            )
            greeting = await self._read_response()
            if not greeting.text.upper().startswith((b"* OK", b"* PREAUTH")):
                raise ImapError(f"greeting: {_line(greeting.text)}")
            await self._capability()
            if self.tls == "starttls":
                if "STARTTLS" not in self.capabilities:
                    raise ImapError(f"{self.host}:{self.port} does not offer STARTTLS")
                await self.command("STARTTLS")
                assert context is not None and self._writer is not None
                await wait_within(self._writer.start_tls(context), self.timeout)
                await self._capability()  # capabilities may change after TLS (RFC 3501)
        except (OSError, ssl.SSLError, TimeoutError, asyncio.IncompleteReadError) as exc:
            await self.close()
            raise ImapError(
                f"cannot reach {self.host}:{self.port}: {type(exc).__name__}: {exc}".rstrip(": ")
            ) from None

    async def close(self) -> None:
        """Drop the connection without a word to the server (idempotent)."""
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                await wait_within(writer.wait_closed(), 5)

    async def logout(self) -> None:
        """Say LOGOUT and close (errors ignored: the connection is done either way). In the
        middle of an IDLE (a cancelled adapter) the connection is just closed."""
        try:
            if self._writer is not None and not self._idling:
                self.timeout = min(self.timeout, 5.0)
                await self.command("LOGOUT")
        except (ImapError, TimeoutError):
            pass
        finally:
            await self.close()

    # -- commands ---------------------------------------------------------------------

    async def login(self, username: str, password: str) -> None:
        """LOGIN; ImapAuthError when the server says NO."""
        if "LOGINDISABLED" in self.capabilities:
            raise ImapAuthError(f"{self.host} refuses LOGIN on this connection (try tls)")
        try:
            await self.command("LOGIN", _astring(username), _astring(password))
        except ImapError as exc:
            raise ImapAuthError(f"login as {username} refused: {exc}") from None
        await self._capability()  # servers add the post-login ones (IDLE, UIDPLUS...)

    async def select(self, mailbox: str = "INBOX") -> Mailbox:
        """SELECT the mailbox: its UIDVALIDITY and UIDNEXT."""
        untagged = await self.command("SELECT", _astring(mailbox))
        codes = {name: value for r in untagged for name, value in _codes(r.text)}
        try:
            validity = int(codes[b"UIDVALIDITY"])
            uidnext = int(codes.get(b"UIDNEXT", b"0") or b"0")
        except (KeyError, ValueError):
            raise ImapError(f"SELECT {mailbox}: no UIDVALIDITY in the answer") from None
        if not uidnext:  # RFC 3501 requires it; a server without it: ask STATUS
            status = await self.command("STATUS", _astring(mailbox), "(UIDNEXT)")
            found = re.search(rb"UIDNEXT (\d+)", b"".join(r.text for r in status))
            uidnext = int(found.group(1)) if found else 1
        return Mailbox(validity, uidnext)

    async def fetch_from(self, first_uid: int, limit: int = 100) -> list[Fetched]:
        """Up to `limit` messages whose UID is `first_uid` or higher, in UID order (bodies
        PEEKed, so nothing is marked seen by reading). The UIDs are asked first: `n:*`
        also matches the highest UID when it is below n (RFC 3501 6.4.8), whose body
        must not be fetched again on every wake."""
        listed = await self.command("UID FETCH", f"{first_uid}:*", "(UID)")
        uids = sorted(
            {
                int(match.group(1))
                for response in listed
                if (match := re.search(rb"\bUID (\d+)", response.text)) is not None
            }
        )
        wanted = [uid for uid in uids if uid >= first_uid][:limit]
        if not wanted:
            return []
        untagged = await self.command(
            "UID FETCH",
            f"{wanted[0]}:{wanted[-1]}",
            "(UID BODY.PEEK[])",
            timeout=max(self.timeout, FETCH_TIMEOUT),
        )
        found: list[Fetched] = []
        for response in untagged:
            uid = re.search(rb"\bUID (\d+)", response.text)
            if uid is None or b"FETCH" not in response.text.upper() or not response.literals:
                continue
            if first_uid <= int(uid.group(1)) <= wanted[-1]:
                found.append(Fetched(int(uid.group(1)), response.literals[-1]))
        return sorted(found, key=lambda f: f.uid)

    async def noop(self) -> list[Response]:
        """NOOP: the server's untagged news (EXISTS, EXPUNGE), and proof it is there."""
        return await self.command("NOOP")

    async def idle(self, wait: float, heard: Callable[[], None]) -> bool:
        """IDLE for up to `wait` seconds (RFC 2177), calling `heard` on every line the
        server sends meanwhile (EXISTS, its keepalives). True when new mail was announced;
        returns then or when the time is up, the IDLE ended with DONE either way."""
        tag = self._next_tag()
        self._idling = True
        await self._send(f"{tag} IDLE\r\n".encode())
        first = await self._read_response()
        if not first.text.startswith(b"+"):
            raise ImapError(f"IDLE refused: {_line(first.text)}")
        heard()
        news = False
        loop = asyncio.get_running_loop()
        until = loop.time() + wait
        while not news:
            left = until - loop.time()
            if left <= 0:
                break
            try:
                response = await wait_within(self._read_response(), left)
            except TimeoutError:
                break
            heard()
            news = re.match(rb"\* \d+ (EXISTS|RECENT)", response.text.upper()) is not None
        await self._send(b"DONE\r\n")
        await self._until_tagged(tag, "IDLE")
        self._idling = False
        heard()
        return news

    async def command(self, name: str, *args: str, timeout: float | None = None) -> list[Response]:
        """Send one command; its untagged responses, or ImapError on NO/BAD or when the
        server does not answer within `timeout` (default: the client's) per response."""
        tag = self._next_tag()
        line = " ".join([tag, name, *args])
        await self._send(line.encode() + b"\r\n")
        return await self._until_tagged(tag, name, timeout)

    # -- the wire ---------------------------------------------------------------------

    def _next_tag(self) -> str:
        self._tag += 1
        return f"H{self._tag:04d}"

    async def _send(self, data: bytes) -> None:
        if self._writer is None:
            raise ImapError("not connected")
        try:
            self._writer.write(data)
            await wait_within(self._writer.drain(), self.timeout)
        except (OSError, TimeoutError) as exc:
            raise ImapError(f"send: {type(exc).__name__}: {exc}".rstrip(": ")) from None

    async def _until_tagged(
        self, tag: str, name: str, timeout: float | None = None
    ) -> list[Response]:
        untagged: list[Response] = []
        seconds = timeout or self.timeout
        while True:
            try:
                response = await wait_within(self._read_response(), seconds)
            except TimeoutError:
                raise ImapError(f"{name}: no answer within {seconds:.0f} s") from None
            done = _TAGGED.match(response.text)
            if done is not None and done.group(1) == tag.encode():
                if done.group(2).upper() != b"OK":
                    raise ImapError(f"{name}: {_line(done.group(2) + b' ' + done.group(3))}")
                return untagged
            untagged.append(response)

    async def _read_response(self) -> Response:
        """One response, with its literals read exactly by their byte counts."""
        if self._reader is None:
            raise ImapError("not connected")
        response = Response()
        try:
            while True:
                line = await self._reader.readuntil(b"\r\n")
                response.parts.append(line[:-2])
                literal = _LITERAL.search(line[:-2])
                if literal is None:
                    return response
                size = int(literal.group(1))
                response.literals.append(await self._reader.readexactly(size))
        except asyncio.IncompleteReadError:
            raise ImapError(f"{self.host}:{self.port} closed the connection") from None
        except asyncio.LimitOverrunError:
            raise ImapError(f"{self.host}:{self.port} sent an overlong line") from None
        except (OSError, ssl.SSLError) as exc:
            raise ImapError(f"receive: {type(exc).__name__}: {exc}".rstrip(": ")) from None

    async def _capability(self) -> None:
        untagged = await self.command("CAPABILITY")
        words: set[str] = set()
        for response in untagged:
            text = response.text.decode("ascii", "replace")
            if text.upper().startswith("* CAPABILITY"):
                words.update(w.upper() for w in text.split()[2:])
        self.capabilities = frozenset(words)


def _codes(text: bytes) -> Iterator[tuple[bytes, bytes]]:
    for match in _CODE.finditer(text):
        yield match.group(1).upper(), match.group(2)


def _astring(value: str) -> str:
    """A quoted string (RFC 3501 `quoted`); CR, LF and NUL cannot be in one."""
    if any(c in value for c in "\r\n\0"):
        raise ImapError("a line break cannot be sent in an IMAP string")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _line(text: bytes) -> str:
    return text.decode("utf-8", "replace").strip()[:300]
