"""IRC: one connection per account, TLS with SASL PLAIN by default (irc_conn.py).

- In: PRIVMSGs to our nick (a private chat, the sender's nick its chat) and to the
  channels of `join:` (a group chat, the channel its chat). In a channel a message is
  addressed to us when it starts with our nick (`habakkuk: ...`, the prefix taken off),
  names our nick as a word, or is a command. IRC clients run `/new` themselves, so a
  leading `!` before a word is taken as `/` (`!new`, `!stop`). NOTICEs are never answered
  (RFC 2812 3.3.2), CTCPs other than ACTION are ignored.
- Out: one PRIVMSG per line (irc_format.py makes a chunk of each), cut again at the
  exact budget our `nick!user@host` prefix and the target leave under 512 bytes, paced
  (irc_conn.Pacer) so the server does not drop us for flooding.
- Keepalive: the server's PINGs are answered; after KEEPALIVE seconds without a line we
  PING it, and its PONG beats, so a dead link is noticed within the silent limit.
- Who: the sender is the nick. A nick proves nothing on a network where anyone may take
  it: there `allow_from` should name accounts, `account:NAME`, which match the
  account-tag the server adds for a logged-in sender (IRCv3 account-tag).

What survives a restart: IRC keeps nothing for an absent client, so a message sent while
we are away is gone (a bouncer replays it: see below). A message's id is its IRCv3
msgid tag when the server gives one, which a bouncer's replay keeps, so a replayed
message is dropped as seen; else one of our own, unique to this connection. Sends carry
no idempotency key (IRC has none): each line is a chunk, recorded when written, so a
crash resends at most the one line in flight (deliveries.py writes its start first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from datetime import datetime

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.timeouts import wait_within

from .adapter import (
    Adapter,
    Address,
    Beat,
    Button,
    Capability,
    InboundMessage,
    Inbox,
    SendError,
)
from .irc_conn import IrcConnection, IrcLogin
from .irc_format import irc_lines, plain
from .irc_setup import SETUP as SETUP  # the registry reads a platform's step here
from .irc_setup import login_of
from .irc_wire import Line, ctcp, split_text, text_budget
from .platforms import AdapterContext

log = logging.getLogger(__name__)

KEEPALIVE = 30.0
# A server that accepted the connection but has not welcomed us by then never will.
REGISTER_TIMEOUT = 60.0
CHANNEL_PREFIXES = "#&+!"
_COMMAND = re.compile(r"^!(?=[a-z][a-z_]*\b)")


def is_channel(chat: str) -> bool:
    """True for a channel (`#name`), False for a nick."""
    return chat[:1] in CHANNEL_PREFIXES


def server_time(tags: dict[str, str]) -> float:
    """The IRCv3 server-time tag as epoch seconds; now when absent or unreadable."""
    stamp = tags.get("time", "")
    if stamp:
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return time.time()


class IrcAdapter(Adapter):
    """One IRC nick on one server."""

    type = "irc"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, config: ChannelConfig, login: IrcLogin):
        super().__init__(config.name)
        self.config = config
        self.login = login
        self.conn: IrcConnection | None = None
        self._epoch = ""
        self._seq = 0

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            await conn.close()

    # -- receiving -----------------------------------------------------------------------

    async def run(self, inbox: Inbox, beat: Beat) -> None:
        conn = await IrcConnection.open(self.login)
        try:
            try:
                await wait_within(conn.register(), REGISTER_TIMEOUT)
            except TimeoutError:
                raise SendError(f"no welcome from the server in {REGISTER_TIMEOUT:g}s") from None
            self.conn = conn
            self._epoch = f"{time.time_ns():x}"
            self._seq = 0
            beat()  # up once welcomed: a person's message to our nick now reaches us
            await conn.send("WHOIS", conn.nick)  # our host as others see it (311)
            if self.config.join:
                await conn.send("JOIN", ",".join(self.config.join))
            await self._read(conn, inbox, beat)
        finally:
            if self.conn is conn:
                self.conn = None
            await conn.close()

    async def _read(self, conn: IrcConnection, inbox: Inbox, beat: Beat) -> None:
        """Act on lines until the server ends the connection."""
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE):
                    line = await conn.read()
            except TimeoutError:
                await conn.send("PING", "habakkuk")
                continue
            if line is None:
                log.info("irc %s: the server closed the connection", self.account)
                return
            beat()
            message = await self._on_line(conn, line)
            if message is not None:
                await inbox(message)

    async def _on_line(self, conn: IrcConnection, line: Line) -> InboundMessage | None:
        command = line.command
        if command == "PING":
            await conn.send("PONG", line.param(0))
        elif command == "ERROR":
            raise SendError(f"the server closed the link: {line.param(0)}")
        elif command == "PRIVMSG":
            return self.convert(conn, line)
        elif command == "NICK" and line.nick == conn.nick:
            conn.nick = line.param(0)
        elif command == "JOIN" and line.nick == conn.nick:
            conn.learn_prefix(line.prefix)
        elif command == "311" and line.param(1) == conn.nick:
            conn.learn_prefix(f"{conn.nick}!{line.param(2)}@{line.param(3)}")
        elif command == "396":
            conn.host = line.param(1) or conn.host
        elif command in ("471", "473", "474", "475", "403", "405"):
            log.warning("irc %s: cannot join %s: %s", self.account, line.param(1), line.params[-1])
        return None

    def _message_id(self, line: Line) -> str:
        msgid = line.tags.get("msgid", "")
        if msgid:
            return msgid.replace(":", "_")
        self._seq += 1
        return f"{self._epoch}.{self._seq}"

    def convert(self, conn: IrcConnection, line: Line) -> InboundMessage | None:
        """A PRIVMSG as an InboundMessage (None for ours, a CTCP, an empty text)."""
        target, text, nick = line.param(0), line.param(1), line.nick
        if not nick or "!" not in line.prefix or nick.lower() == conn.nick.lower():
            return None  # a server's notice, or our own line echoed
        special = ctcp(text)
        if special is not None:
            if special[0] != "ACTION":
                return None
            text = f"* {nick} {special[1]}"
        text = plain(text).strip()
        if not text:
            return None
        group = is_channel(target)
        addressed = not group
        if group:
            text, addressed = self._addressed(conn.nick, text)
        text = _COMMAND.sub("/", text)
        user, host = line.userhost
        aliases = [f"{nick}!{user}@{host}"]
        account = line.tags.get("account", "")
        if account:
            aliases.append(f"account:{account}")
        return InboundMessage(
            channel=self.account,
            chat=target if group else nick,
            message_id=self._message_id(line),
            sender=nick,
            sender_aliases=aliases,
            sender_name=nick,
            text=text,
            is_group=group,
            addressed=addressed or text.startswith("/"),
            at=server_time(line.tags),
        )

    @staticmethod
    def _addressed(nick: str, text: str) -> tuple[str, bool]:
        """The text without a leading `nick:`, and whether it names our nick."""
        lead = re.match(rf"^@?{re.escape(nick)}[:,]?\s+", text, re.IGNORECASE)
        if lead:
            return text[lead.end() :], True
        named = re.search(
            rf"(?<![\w\-\[\]\\`^{{|}}]){re.escape(nick)}(?![\w\-\[\]\\`^{{|}}])",
            text,
            re.IGNORECASE,
        )
        return text, named is not None

    # -- sending -----------------------------------------------------------------------

    def render(self, markdown: str) -> list[str]:
        return irc_lines(markdown)

    async def send_text(
        self,
        to: Address,
        chunk: str,
        *,
        reply_to: str | None = None,
        buttons: list[list[Button]] | None = None,
        silent: bool = False,
    ) -> str:
        conn = self.conn
        if conn is None:
            raise SendError("not connected to the IRC server")
        budget = text_budget(conn.nick, conn.user, conn.host, "PRIVMSG", to.chat)
        for piece in split_text(chunk, budget) or ["…"]:
            await conn.send("PRIVMSG", to.chat, piece)
        return uuid.uuid4().hex[:16]  # IRC names no message: ours, for the record


def build(config: ChannelConfig, context: AdapterContext) -> IrcAdapter:
    """The adapter of one IRC account (habakkuk.channels.platforms)."""
    password = context.secret(config, "password_env") if config.password_env else ""
    return IrcAdapter(config, login_of(config, password))
