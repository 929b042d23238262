"""IRC's step in `habakkuk setup`: the server, the nick, the channels, and a check that
registers on the server (TLS and SASL as configured) before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .irc_conn import IrcConnection, IrcLogin
from .platforms import PlatformSetup, SetupCheckFailed, SetupField

TLS_PORT, PLAIN_PORT = 6697, 6667


def login_of(config: ChannelConfig, password: str) -> IrcLogin:
    """The connection settings of an IRC account (`server` as host[:port]; the port
    defaults to 6697 with TLS, 6667 without)."""
    tls = config.tls is not False
    server = config.server or ""
    host, port = server, TLS_PORT if tls else PLAIN_PORT
    head, colon, tail = server.rpartition(":")
    if colon and tail.isdigit() and (not head.count(":") or head.endswith("]")):
        host, port = head, int(tail)
    nick = config.nick or "habakkuk"
    return IrcLogin(
        host=host.strip("[]"),
        port=port,
        tls=tls,
        nick=nick,
        user=nick.lower()[:10],
        sasl=config.sasl,
        account=config.username or nick,
        password=password,
    )


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Register on the server as the account would: "habakkuk on Libera.Chat (...)", or
    SetupCheckFailed naming what is wrong."""
    password = secrets.get(config.password_env or "", "") if config.password_env else ""
    login = login_of(config, password)
    where = f"{login.host}:{login.port}"
    try:
        conn = await IrcConnection.open(login)
        try:
            await conn.register()
        finally:
            await conn.close()
    except (SendError, FatalAdapterError) as exc:
        raise SetupCheckFailed(f"IRC at {where}: {exc}") from None
    how = ", ".join(
        ["TLS" if login.tls else "no TLS"] + ([f"SASL as {login.account}"] if login.sasl else [])
    )
    return f"{conn.nick} on {where} ({how})"


SETUP = PlatformSetup(
    type="irc",
    title="IRC",
    instructions=(
        "1. Pick the server and a nick for the bot (on Libera.Chat: irc.libera.chat:6697).\n"
        "2. On a public network, register the nick as an account (/msg NickServ REGISTER)\n"
        "   so the bot logs in with SASL; a private server without accounts takes\n"
        "   sasl: false (and tls: false on its plain port) in config.yaml.\n"
        "3. Name the channels to join; in a channel the bot answers when addressed\n"
        "   (nick: ...). In private chats, commands are typed !new, !stop..."
    ),
    fields=(
        SetupField("server", "The server (host:port)", default=f"irc.libera.chat:{TLS_PORT}"),
        SetupField("tls", "TLS? (yes; no for a private server's plain port)", default="yes"),
        SetupField("nick", "The bot's nick"),
        SetupField("sasl", "Log in to the nick's account with SASL? (yes/no)", default="yes"),
        SetupField(
            "password_env",
            "The nick's account password (SASL; empty without)",
            secret=True,
            variable="IRC_PASSWORD",
        ),
        SetupField("join", "Channels to join (#a #b; empty for private chats only)"),
        SetupField(
            "allow_from",
            "Your nick, or account:NAME on a network with accounts (others pair with a code)",
        ),
    ),
    check=check_setup,
)
