"""Twitch's step in `habakkuk setup`: the bot's login, its oauth token, the channels, and a
check that logs in to Twitch chat before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .irc_conn import IrcConnection, IrcLogin
from .platforms import PlatformSetup, SetupCheckFailed, SetupField

SERVER = "irc.chat.twitch.tv"
TLS_PORT, PLAIN_PORT = 6697, 6667
CAPS = frozenset({"twitch.tv/tags", "twitch.tv/commands"})
# Twitch's limit for a bot that is not a moderator: 20 lines in 30 seconds.
INTERVAL = 1.5


def twitch_login(config: ChannelConfig, token: str) -> IrcLogin:
    """The connection settings of a Twitch account (`server` only for tests)."""
    tls = config.tls is not False
    host, port = SERVER, TLS_PORT if tls else PLAIN_PORT
    if config.server:
        head, colon, tail = config.server.rpartition(":")
        host, port = (head, int(tail)) if colon and tail.isdigit() else (config.server, port)
    nick = (config.nick or "").lower()
    password = token if token.startswith("oauth:") else f"oauth:{token}"
    return IrcLogin(
        host=host,
        port=port,
        tls=tls,
        nick=nick,
        user=nick,
        sasl=False,
        password=password,
        caps=CAPS,
        request_only=True,
        interval=INTERVAL,
    )


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Log in to Twitch chat: "mybot on Twitch chat", or SetupCheckFailed saying why."""
    token = secrets.get(config.token_env or "", "")
    login = twitch_login(config, token)
    try:
        conn = await IrcConnection.open(login)
        try:
            await conn.register()
        finally:
            await conn.close()
    except (SendError, FatalAdapterError) as exc:
        raise SetupCheckFailed(f"Twitch chat at {login.host}:{login.port}: {exc}") from None
    return f"{conn.nick} on Twitch chat"


SETUP = PlatformSetup(
    type="twitch",
    title="Twitch",
    instructions=(
        "1. Make (or pick) a Twitch account for the bot.\n"
        "2. Register an application at dev.twitch.tv/console and get a user access token\n"
        "   for the bot's account with the chat:read and chat:edit scopes.\n"
        "3. Name the channels to join (#yourchannel). In chat the bot answers when\n"
        "   addressed (@bot ...); commands are typed !new, !stop..."
    ),
    fields=(
        SetupField("nick", "The bot's Twitch login name"),
        SetupField(
            "token_env",
            "Its user access token (chat:read chat:edit)",
            secret=True,
            variable="TWITCH_TOKEN",
        ),
        SetupField("join", "Channels to join (#yourchannel)"),
        SetupField("allow_from", "Your Twitch login name (others pair with a code)"),
    ),
    check=check_setup,
)
