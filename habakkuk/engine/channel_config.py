"""`channels.NAME`: one chat account's settings, and the checks that make them usable.

Every platform shares one dataclass: the settings common to all (allow_from, agent,
routes, groups, durations) and each platform's own connection settings. Which of those
a platform needs, and which it accepts at all, is the table `PLATFORM_SETTINGS`: a
Telegram entry naming `imap` is an error naming the line, not a setting silently
ignored, and a Slack entry without its app token says which variable is missing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

ChannelType = Literal[
    "telegram",
    "web",
    "slack",
    "discord",
    "matrix",
    "signal",
    "email",
    "whatsapp",
    "irc",
    "twitch",
    "ntfy",
    "sms",
    "feishu",
    "dingtalk",
    "wecom",
    "whatsappcloud",
    "messenger",
    "instagram",
    "whatsappagent",
    "line",
    "bluebubbles",
    "teams",
    "googlechat",
    "zulip",
    "nextcloud",
    "rocketchat",
    "mattermost",
]
TlsMode = Literal["implicit", "starttls", "plain"]


@dataclass
class RouteConfig:
    """One route of a channel: a chat or a sender mapped to an agent."""

    agent: str
    chat: str | None = None
    user: str | None = None


@dataclass
class ChannelConfig:
    """One channel account (`channels.NAME`): a Telegram bot, a Slack app, a mailbox..."""

    type: ChannelType
    # the variable holding the bot token (telegram, discord) or access token (matrix)
    token_env: str | None = None
    # the platform's API root as its own SDK writes it (tests and self-hosted servers)
    base_url: str | None = None
    # slack: the app-level token (xapp-, Socket Mode) and the bot token (xoxb-, Web API)
    app_token_env: str | None = None
    bot_token_env: str | None = None
    # matrix: the homeserver's URL and the bot's own id (@bot:example.org)
    homeserver: str | None = None
    user_id: str | None = None
    # signal: the phone number the signal-cli daemon serves (+4915...)
    account: str | None = None
    # email: servers as host:port, the login, the password's variable and our address
    imap: str | None = None
    smtp: str | None = None
    username: str | None = None
    password_env: str | None = None
    address: str | None = None
    # sms: the Twilio account (AC...) and the number or messaging service we send from
    account_sid: str | None = None
    from_: str | None = field(default=None, metadata={"key": "from"})
    # teams: the bot's Microsoft App ID (also the app-token platforms' app id, below; its
    # password's variable is password_env) and the
    # Entra tenant of a single-tenant bot (default botframework.com, multi-tenant)
    app_id: str | None = None
    tenant: str | None = None
    # googlechat: who the tokens Google signs are for (the project number, or the endpoint
    # URL when the Chat app is set to that), and the service account's JSON key file
    audience: str | None = None
    key_file: str | None = None
    # email: implicit TLS (IMAPS 993, SMTPS 465), STARTTLS, or false for neither
    # irc: TLS (the default) or false for a private server's plain port
    tls: Literal["implicit", "starttls"] | bool = "implicit"
    # irc: the server as host[:port], the bot's nick, the channels it joins, and whether
    # it logs in with SASL PLAIN (username, else the nick; the password's variable)
    server: str | None = None
    nick: str | None = None  # bluebubbles: the name that addresses the bot in a group chat
    join: list[str] = field(default_factory=list)
    sasl: bool = True
    # ntfy: the topic replies are published to, and the topic read for messages
    topic: str | None = None
    listen: str | None = None
    # feishu, dingtalk, wecom (app-token platforms): the app's id (app_id above: Feishu App
    # ID, DingTalk Client ID/AppKey) and the variable holding its secret; wecom: the corp id
    # (the callbacks' receiver id) and the app's AgentId
    app_secret_env: str | None = None
    corp_id: str | None = None
    agent_id: str | None = None
    # feishu: the event subscription's Encrypt Key and Verification Token (variables);
    # wecom: the callback's Token (token_env) and EncodingAESKey (aes_key_env)
    encrypt_key_env: str | None = None
    verification_token_env: str | None = None
    aes_key_env: str | None = None
    # dingtalk: the robot's code for the OpenAPI sends (default: app_id)
    robot_code: str | None = None
    # whatsappcloud: the business phone number's id, the app secret (app_secret_env above:
    # X-Hub-Signature-256)
    # and the webhook verify token (hub.verify_token), and the approved template (with its
    # language) sent outside the 24-hour customer-service window
    phone_number_id: str | None = None
    verify_token_env: str | None = None
    template: str | None = None
    template_language: str | None = None
    # line: the channel secret's variable (X-Line-Signature); bluebubbles: the variable
    # holding the secret in the webhook's URL (/channels/<account>/<secret>)
    secret_env: str | None = None
    # user ids or @usernames allowed to talk; "*" lets anyone in
    allow_from: str | list[str] = field(default_factory=list)
    agent: str | None = None
    routes: list[RouteConfig] = field(default_factory=list)
    session_idle: float | str = "4h"
    # group messages: only when addressed to the bot (mention), every message (all), or none
    groups: Literal["mention", "all", "off"] = "mention"
    reactions: bool = False
    progress: bool = True
    # replies read aloud as a voice note (tts:): never, when the user's message carried
    # audio (mirror), or always; voice_text false sends the voice note without the text
    voice_replies: Literal["off", "mirror", "always"] = "off"
    voice_text: bool = True
    # Habakkuk's own words in this channel (engine/i18n); "" takes config.yaml's language:.
    language: str = ""
    poll_timeout: int = 30
    # an adapter silent for longer than this (no message, no keepalive) is reconnected
    silent_limit: float | str = "2m"
    name: str = field(default="", init=False)
    session_idle_seconds: float = field(default=14400.0, init=False)
    silent_limit_seconds: float = field(default=120.0, init=False)
    tls_mode: TlsMode = field(default="implicit", init=False)

    @property
    def allow_all(self) -> bool:
        """True when `allow_from` is "*" (anyone may talk)."""
        items = [self.allow_from] if isinstance(self.allow_from, str) else self.allow_from
        return "*" in items

    @property
    def allowed(self) -> list[str]:
        """The allow_from entries as a list."""
        return [self.allow_from] if isinstance(self.allow_from, str) else list(self.allow_from)


@dataclass(frozen=True)
class PlatformSettings:
    """Which of a platform's own settings it requires and which it accepts."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()

    @property
    def accepted(self) -> frozenset[str]:
        return frozenset(self.required + self.optional)


# The connection settings each platform takes; the shared ones (allow_from, agent, routes,
# groups, durations) are every platform's. `*_env` settings name a variable, never a value.
PLATFORM_SETTINGS: Mapping[str, PlatformSettings] = {
    "telegram": PlatformSettings(("token_env",), ("base_url",)),
    "web": PlatformSettings(),
    "slack": PlatformSettings(("app_token_env", "bot_token_env"), ("base_url",)),
    "discord": PlatformSettings(("token_env",), ("base_url",)),
    "matrix": PlatformSettings(("homeserver", "user_id", "token_env"), ("base_url",)),
    "signal": PlatformSettings(("base_url", "account")),
    "email": PlatformSettings(("imap", "smtp", "username", "password_env", "address"), ("tls",)),
    "whatsapp": PlatformSettings(),
    "irc": PlatformSettings(
        ("server", "nick"), ("tls", "join", "sasl", "username", "password_env")
    ),
    "twitch": PlatformSettings(("nick", "token_env", "join"), ("server", "tls")),
    "ntfy": PlatformSettings(("topic", "listen"), ("base_url", "token_env")),
    "sms": PlatformSettings(("account_sid", "token_env", "from_"), ("base_url",)),
    "feishu": PlatformSettings(
        ("app_id", "app_secret_env", "encrypt_key_env", "verification_token_env"),
        ("base_url",),
    ),
    "dingtalk": PlatformSettings(("app_id", "app_secret_env"), ("robot_code", "base_url")),
    "wecom": PlatformSettings(
        ("corp_id", "agent_id", "app_secret_env", "token_env", "aes_key_env"), ("base_url",)
    ),
    "whatsappcloud": PlatformSettings(
        ("phone_number_id", "token_env", "app_secret_env", "verify_token_env"),
        ("template", "template_language", "base_url"),
    ),
    "messenger": PlatformSettings(
        ("token_env", "app_secret_env", "verify_token_env"), ("base_url",)
    ),
    "instagram": PlatformSettings(
        ("token_env", "app_secret_env", "verify_token_env"), ("base_url",)
    ),
    "whatsappagent": PlatformSettings(("token_env",), ("base_url",)),
    "line": PlatformSettings(("token_env", "secret_env"), ("base_url",)),
    "bluebubbles": PlatformSettings(("base_url", "password_env", "secret_env"), ("nick",)),
    "teams": PlatformSettings(("app_id", "password_env"), ("tenant", "base_url")),
    "googlechat": PlatformSettings(("audience", "key_file"), ("base_url",)),
    # zulip: the server, the bot's email (username) and its API key's variable
    "zulip": PlatformSettings(("base_url", "username", "token_env")),
    # nextcloud (Talk): the server and the variable holding the bot's shared secret
    "nextcloud": PlatformSettings(("base_url", "token_env")),
    # rocketchat: the server, the bot user's id and its personal access token's variable
    "rocketchat": PlatformSettings(("base_url", "user_id", "token_env")),
    # mattermost: the server and the variable holding the bot account's access token
    "mattermost": PlatformSettings(("base_url", "token_env")),
}
_CONNECTION_SETTINGS = frozenset(
    name for settings in PLATFORM_SETTINGS.values() for name in settings.accepted
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL = re.compile(r"https?://[^/\s]+")
_HOST_PORT = re.compile(r"[A-Za-z0-9.\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}")
_DEFAULTS = ChannelConfig(type="web")


def resolve_channels(
    channels: Mapping[str, ChannelConfig], agents: Collection[str], path: Path
) -> None:
    """Check each channel account: its platform's settings, agents, routes, durations.

    Raises ConfigError naming the file, the line and the key of the first problem.
    """
    for name, channel in channels.items():
        channel.name = name
        where = f"{path}:{line_of(channel)}: channels.{name}"
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ConfigError(f"{where}: a channel name uses letters, digits, - and _ only")
        _check_platform_settings(channel, path)
        if channel.type == "web":
            # The web chat's messages come through the HTTP server (its token lets them in).
            channel.allow_from = "*"
        _check_agents(channel, agents, path)
        for key in ("session_idle", "silent_limit"):
            try:
                seconds = parse_duration(getattr(channel, key))
            except ValueError as exc:
                raise ConfigError(
                    f"{path}:{line_of(channel, key)}: channels.{name}.{key}: {exc}"
                ) from None
            setattr(channel, f"{key}_seconds", seconds)
        if not 1 <= channel.poll_timeout <= 50:
            raise ConfigError(
                f"{path}:{line_of(channel, 'poll_timeout')}: channels.{name}.poll_timeout: "
                "must be between 1 and 50 seconds"
            )
        if channel.silent_limit_seconds <= channel.poll_timeout:
            raise ConfigError(
                f"{path}:{line_of(channel, 'silent_limit')}: channels.{name}.silent_limit: "
                f"must be longer than poll_timeout ({channel.poll_timeout}s)"
            )


def _check_platform_settings(channel: ChannelConfig, path: Path) -> None:
    settings = PLATFORM_SETTINGS[channel.type]

    def fail(key: str, message: str) -> ConfigError:
        key = "from" if key == "from_" else key  # the file's spelling of a Python keyword
        return ConfigError(
            f"{path}:{line_of(channel, key)}: channels.{channel.name}.{key}: {message}"
        )

    for key in sorted(_CONNECTION_SETTINGS - settings.accepted):
        if getattr(channel, key) != getattr(_DEFAULTS, key):
            raise fail(key, f"is not a setting of a {channel.type} channel")
    for key in settings.required:
        if getattr(channel, key) in (None, ""):
            what = "the name of the variable holding it" if key.endswith("_env") else "a value"
            raise fail(key, f"{_article(channel.type)} {channel.type} channel needs this ({what})")
    for key in settings.accepted:
        value = getattr(channel, key)
        if value is None or key == "tls":
            continue
        if key.endswith("_env") and not _ENV_NAME.fullmatch(value):
            raise fail(key, f"{value!r} is not a variable name")
        if key in ("base_url", "homeserver") and not _URL.match(value):
            raise fail(key, f"{value!r} is not an http(s) URL")
        if key in ("imap", "smtp") and not _HOST_PORT.fullmatch(value):
            raise fail(key, f"{value!r} is not host:port")
    if channel.type == "matrix" and not re.fullmatch(r"@[^:\s]+:\S+", channel.user_id or ""):
        raise fail("user_id", f"{channel.user_id!r} is not a Matrix id (@name:server)")
    if channel.type == "signal" and not re.fullmatch(r"\+\d{6,15}", channel.account or ""):
        raise fail("account", f"{channel.account!r} is not a phone number (+ and digits)")
    if channel.type == "sms" and not re.fullmatch(r"AC[0-9a-fA-F]{32}", channel.account_sid or ""):
        raise fail("account_sid", f"{channel.account_sid!r} is not a Twilio account SID (AC...)")
    if channel.type == "sms" and not re.fullmatch(
        r"\+\d{6,15}|MG[0-9a-fA-F]{32}", channel.from_ or ""
    ):
        raise fail("from", f"{channel.from_!r} is not a phone number (+ and digits)")
    if channel.type in ("feishu", "dingtalk", "wecom"):
        _check_app(channel, fail)
    if channel.type == "bluebubbles" and not re.fullmatch(r"\w[\w.-]{0,39}", channel.nick or "x"):
        raise fail("nick", f"{channel.nick!r} is not one word (the name that calls the bot)")
    if channel.type == "teams" and not _GUID.fullmatch(channel.app_id or ""):
        raise fail("app_id", f"{channel.app_id!r} is not a Microsoft App ID (a GUID)")
    if (
        channel.type == "teams"
        and channel.tenant is not None
        and not _TENANT.fullmatch(channel.tenant)
    ):
        raise fail("tenant", f"{channel.tenant!r} is not a tenant id or domain")
    if channel.type == "googlechat" and not _AUDIENCE.fullmatch(channel.audience or ""):
        raise fail("audience", f"{channel.audience!r} is not a project number or https URL")
    if channel.type == "email" and "@" not in (channel.address or ""):
        raise fail("address", f"{channel.address!r} is not an email address")
    if channel.type in ("irc", "twitch"):
        _check_irc(channel, fail)
    if channel.type == "whatsappcloud":
        _check_whatsappcloud(channel, fail)
    if channel.type == "ntfy":
        for key in ("topic", "listen"):
            if not _NTFY_TOPIC.fullmatch(getattr(channel, key) or ""):
                raise fail(key, f"{getattr(channel, key)!r} is not an ntfy topic (A-Z a-z 0-9 _ -)")
        if channel.topic == channel.listen:
            raise fail("listen", "read another topic than the one replies go to")
    if channel.type == "zulip" and not re.fullmatch(r"[^@\s]+@[^@\s]+", channel.username or ""):
        raise fail("username", f"{channel.username!r} is not the bot's email (…-bot@server)")
    if channel.tls is True:
        channel.tls_mode = "implicit"
    elif channel.tls is False:
        channel.tls_mode = "plain"
    else:
        channel.tls_mode = channel.tls


def _check_whatsappcloud(channel: ChannelConfig, fail: Callable[[str, str], ConfigError]) -> None:
    """A WhatsApp Cloud number's id, and its template's name and language."""
    if not re.fullmatch(r"\d{5,20}", channel.phone_number_id or ""):
        raise fail("phone_number_id", f"{channel.phone_number_id!r} is not a phone number ID")
    if channel.template is not None and not re.fullmatch(r"[a-z0-9_]{1,512}", channel.template):
        raise fail("template", f"{channel.template!r} is not a template name (a-z 0-9 _)")
    language = channel.template_language
    if language is not None and not re.fullmatch(r"[a-z]{2,3}(_[A-Z]{2})?", language):
        raise fail("template_language", f"{language!r} is not a language code (en, en_US)")


_GUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_TENANT = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}|[A-Za-z0-9.\-]+")
_AUDIENCE = re.compile(r"\d{1,20}|https://\S+")
_NTFY_TOPIC = re.compile(r"[A-Za-z0-9_-]{1,64}")
_IRC_SERVER = re.compile(r"[A-Za-z0-9.\-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?")
_IRC_NICK = re.compile(r"[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}\-]{0,29}")
_IRC_CHANNEL = re.compile(r"[#&+!][^\s,:\x07]{1,49}")


def _check_irc(channel: ChannelConfig, fail: Callable[[str, str], ConfigError]) -> None:
    """An IRC (or Twitch) account's server, nick, channels, and its SASL password when
    it logs in."""
    if channel.server is not None and not _IRC_SERVER.fullmatch(channel.server):
        raise fail("server", f"{channel.server!r} is not host or host:port")
    if not _IRC_NICK.fullmatch(channel.nick or ""):
        raise fail("nick", f"{channel.nick!r} is not an IRC nick")
    for name in channel.join:
        if not _IRC_CHANNEL.fullmatch(name):
            raise fail("join", f"{name!r} is not an IRC channel (#name)")
    if channel.tls == "starttls":
        raise fail("tls", "IRC has no STARTTLS: true (TLS) or false")
    if channel.type == "irc" and channel.sasl and not channel.password_env:
        raise fail(
            "password_env",
            "SASL (the default) needs the name of the variable holding the password "
            "(or sasl: false for a server without accounts)",
        )


_APP_ID = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


def _check_app(channel: ChannelConfig, fail: Callable[[str, str], ConfigError]) -> None:
    """An app-token platform's ids: Feishu's App ID is cli_..., WeCom's AgentId digits."""
    for key in ("app_id", "corp_id", "robot_code"):
        value = getattr(channel, key)
        if value is not None and not _APP_ID.fullmatch(value):
            raise fail(key, f"{value!r} is not an app id (letters, digits, . _ -)")
    if channel.type == "feishu" and not (channel.app_id or "").startswith("cli_"):
        raise fail("app_id", f"{channel.app_id!r} is not a Feishu/Lark App ID (cli_...)")
    if channel.type == "wecom" and not (channel.agent_id or "").isdigit():
        raise fail("agent_id", f"{channel.agent_id!r} is not a WeCom AgentId (digits)")


def _check_agents(channel: ChannelConfig, agents: Collection[str], path: Path) -> None:
    name = channel.name
    named = [("agent", channel.agent)] + [
        (f"routes[{i}].agent", r.agent) for i, r in enumerate(channel.routes)
    ]
    for key, agent in named:
        if agent is not None and agent not in agents:
            known = ", ".join(sorted(agents)) or "none"
            raise ConfigError(
                f"{path}:{line_of(channel, key.split('[')[0])}: channels.{name}.{key}: "
                f"agent {agent!r} is not defined (agents: {known})"
            )
    for i, route in enumerate(channel.routes):
        if route.chat is None and route.user is None:
            raise ConfigError(
                f"{path}:{line_of(route)}: channels.{name}.routes[{i}]: give chat or user"
            )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


# Channel types whose every message is outside content: mail reaches the agent from anyone
# who knows the address, so a session such a channel starts is tainted from its first turn
# (spec 000 "Memory": a session bound to an email channel starts tainted).
TAINTED_TYPES: frozenset[str] = frozenset({"email"})


def origin_taint(origin: str, channels: Mapping[str, ChannelConfig]) -> str:
    """Why a session of `origin` ("channel:NAME") starts tainted ("email channel NAME"),
    or "" when it does not."""
    kind, _, name = origin.partition(":")
    channel = channels.get(name) if kind == "channel" else None
    if channel is None or channel.type not in TAINTED_TYPES:
        return ""
    return f"{channel.type} channel {name}"
