"""LINE's step in `habakkuk setup`: what to set in the LINE Developers console, and a
check of the channel access token before it is saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .line_wire import API_URL, MessagingApi
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """GET the bot's info with the access token; returns "<name> (@basic id)"."""
    base = (config.base_url or API_URL).rstrip("/")
    token = secrets.get(config.token_env or "", "")
    if len(secrets.get(config.secret_env or "", "")) < 16:
        raise SetupCheckFailed("the channel secret is 32 characters (Basic settings tab)")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            found = await MessagingApi(base, token, http).info()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"LINE refused the channel access token: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot check the token at {base}: {exc}") from None
    return f"{found.name or found.user_id} ({found.basic_id or 'no basic id'})"


LINE_SETUP = PlatformSetup(
    type="line",
    title="LINE",
    instructions=(
        "1. At https://developers.line.biz/console create a Messaging API channel for "
        "your LINE Official Account.\n"
        "2. Basic settings: copy the Channel secret. Messaging API: issue a long-lived "
        "Channel access token.\n"
        "3. Messaging API > Webhook URL: https://<your host>/channels/<this account's "
        "name>, turn 'Use webhook' on (and auto-reply messages off).\n"
        "4. Habakkuk must be reachable there over HTTPS (habakkuk serve with "
        "http.token_env; behind a proxy set http.public_url: LINE fetches images from it)."
    ),
    fields=(
        SetupField("token_env", "Channel access token", secret=True, variable="LINE_TOKEN"),
        SetupField("secret_env", "Channel secret", secret=True, variable="LINE_SECRET"),
        SetupField("allow_from", "Your LINE user id (U...; others pair with a code)"),
    ),
    check=check_setup,
)
