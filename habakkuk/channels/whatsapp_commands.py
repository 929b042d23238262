"""`habakkuk whatsapp link`: which account to link, and linking it through its SETUP."""

from __future__ import annotations

import sys
from collections.abc import Callable

from habakkuk.engine.channel_config import ChannelConfig
from habakkuk.engine.config import load_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.exit_codes import EXIT_FAILED, EXIT_OK, error_line
from habakkuk.engine.home import Home

from .adapter import FatalAdapterError
from .platforms import platform_module


def whatsapp_account(home: Home, name: str | None) -> ChannelConfig:
    """The whatsapp channel named `name`, or the only one; ConfigError naming the choices."""
    channels = load_config(home).channels
    accounts = {n: c for n, c in channels.items() if c.type == "whatsapp"}
    if name is not None:
        if name not in accounts:
            known = ", ".join(sorted(accounts)) or "none"
            raise ConfigError(f"whatsapp link: no whatsapp channel {name!r} (whatsapp: {known})")
        return accounts[name]
    if len(accounts) != 1:
        if not accounts:
            raise ConfigError(
                "whatsapp link: no channel of type whatsapp in config.yaml "
                "(add one under channels:, or run habakkuk setup)"
            )
        raise ConfigError(f"whatsapp link: choose --account ({', '.join(sorted(accounts))})")
    return next(iter(accounts.values()))


async def link_account(home: Home, name: str | None, show: Callable[[str], None]) -> int:
    """Link the account's device: show the QR code, wait until scanned, say who we are."""
    config = whatsapp_account(home, name)
    try:
        setup = platform_module("whatsapp").SETUP
        assert setup.link is not None  # the whatsapp platform links
        who = await setup.link(config, home.channels_dir, show)
    except FatalAdapterError as exc:
        print(error_line("whatsapp link", exc), file=sys.stderr)
        return EXIT_FAILED
    show(f"linked: {config.name} is WhatsApp {who}")
    return EXIT_OK
