"""The chat platforms: which module speaks each, what it needs, how `habakkuk setup` adds one.

Each platform is one module of this package holding its adapter, a `build` function the
channel service calls for every run of an account, and its `SETUP` step. The module is
imported only when an account of its type runs or is set up, so a home with one Telegram
bot never imports Slack's SDK, and `habakkuk --help` imports none of them.

A platform module provides (checked by `platform_module`):

    def build(config: ChannelConfig, context: AdapterContext) -> Adapter
    SETUP: PlatformSetup
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.home import ensure_private_dir

from .adapter import Adapter, FatalAdapterError
from .webhook import WebhookDoor

if TYPE_CHECKING:
    from .store import ChannelStore

# The module of each platform, by the `type:` of its accounts. The web chat is built by the
# HTTP server (ChannelService.attach_web), so it has no entry.
PLATFORM_MODULES: Mapping[str, str] = {
    "telegram": "habakkuk.channels.telegram",
    "slack": "habakkuk.channels.slack",
    "signal": "habakkuk.channels.signal",
    "matrix": "habakkuk.channels.matrix",
    "discord": "habakkuk.channels.discord",
    "whatsapp": "habakkuk.channels.whatsapp",
    "email": "habakkuk.channels.email",
    "irc": "habakkuk.channels.irc",
    "twitch": "habakkuk.channels.twitch",
    "ntfy": "habakkuk.channels.ntfy",
    "sms": "habakkuk.channels.sms",
    "feishu": "habakkuk.channels.feishu",
    "dingtalk": "habakkuk.channels.dingtalk",
    "wecom": "habakkuk.channels.wecom",
    "whatsappcloud": "habakkuk.channels.whatsappcloud",
    "messenger": "habakkuk.channels.messenger",
    "instagram": "habakkuk.channels.instagram",
    "whatsappagent": "habakkuk.channels.whatsappagent",
    "line": "habakkuk.channels.line",
    "bluebubbles": "habakkuk.channels.bluebubbles",
    "teams": "habakkuk.channels.teams",
    "googlechat": "habakkuk.channels.googlechat",
    "zulip": "habakkuk.channels.zulip",
    "nextcloud": "habakkuk.channels.nextcloud",
    "rocketchat": "habakkuk.channels.rocketchat",
    "mattermost": "habakkuk.channels.mattermost",
}


class Secrets(Protocol):
    """Where an adapter reads the values its `*_env` settings name (the home's Environment)."""

    def get(self, name: str) -> str | None: ...


@dataclass(frozen=True)
class AdapterContext:
    """What an adapter may use besides its own config: secrets, the channel store (offsets,
    seen messages), its own folder under the home for state files (0700) and the door
    through which the HTTP server hands webhook requests in."""

    secrets: Secrets
    store: ChannelStore
    state_dir: Path
    # whether the HTTP server serves the webhook platforms' requests (channels/webhook.py)
    door: WebhookDoor = field(default_factory=WebhookDoor)

    def secret(self, config: ChannelConfig, setting: str) -> str:
        """The value of the variable `config.<setting>` names; FatalAdapterError when unset
        (restarting soon will not make it appear)."""
        variable = getattr(config, setting) or ""
        value = self.secrets.get(variable) if variable else None
        if not value:
            raise FatalAdapterError(
                f"channels.{config.name}.{setting}: the variable {variable or '(none)'} is not set"
            )
        return value

    def state_path(self, config: ChannelConfig, suffix: str = ".json") -> Path:
        """The account's own state file or folder, `<type>-<account><suffix>`, in the
        channels folder (created 0700 now)."""
        ensure_private_dir(self.state_dir)
        return self.state_dir / f"{config.type}-{config.name}{suffix}"


class SetupCheckFailed(Exception):
    """The platform refused what the person entered (a bad token, a wrong server): the one
    line says what and where, and nothing is saved."""


@dataclass(frozen=True)
class SetupField:
    """One thing `habakkuk setup` asks for a platform.

    `key` is the ChannelConfig setting it fills. A secret is never written to config.yaml:
    it is stored under `variable` (the env file or the keyring) and the setting names that
    variable, e.g. `bot_token_env: SLACK_BOT_TOKEN`.
    """

    key: str
    prompt: str
    secret: bool = False
    variable: str = ""
    default: str = ""
    help: str = ""


# The check gets the draft account (its settings filled from the answers) and the secrets
# the person typed, by variable; it connects to the platform and returns one line naming
# who we are there ("@habakkuk_bot in 2 workspaces"), or raises SetupCheckFailed.
SetupCheck = Callable[[ChannelConfig, Mapping[str, str]], Awaitable[str]]
# A platform whose account is a linked device (WhatsApp) links during setup: it gets the
# account, the home's channels folder (where its device keys go) and `show`, which gets
# each text to display (the pairing QR code as text, progress); returns who we are.
SetupLink = Callable[[ChannelConfig, Path, Callable[[str], None]], Awaitable[str]]


@dataclass(frozen=True)
class PlatformSetup:
    """A platform's step in `habakkuk setup` and the setup screen."""

    type: str
    title: str
    # what to create on the platform's side, step by step, and which token goes where
    instructions: str
    fields: tuple[SetupField, ...]
    check: SetupCheck
    link: SetupLink | None = None
    # settings written as they are for every new account (e.g. groups: mention)
    fixed: Mapping[str, object] = field(default_factory=dict)


class PlatformModule(Protocol):
    """What a platform module provides."""

    SETUP: PlatformSetup

    def build(self, config: ChannelConfig, context: AdapterContext) -> Adapter: ...


def platform_module(kind: str) -> PlatformModule:
    """The module speaking platform `kind`, imported now; FatalAdapterError when its
    optional dependency is not installed (the one line says which extra to install)."""
    name = PLATFORM_MODULES.get(kind)
    if name is None:
        raise FatalAdapterError(f"no chat platform is called {kind!r}")
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise FatalAdapterError(
            f"the {kind} channel needs {exc.name or 'a missing package'}: "
            f"pip install 'habakkuk[{kind}]'"
        ) from None
    return module  # its shape is checked by tests/channels/test_platforms.py


def build_adapter(config: ChannelConfig, context: AdapterContext) -> Adapter:
    """A fresh adapter for one account (the supervisor makes one per run)."""
    return platform_module(config.type).build(config, context)
