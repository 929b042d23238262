"""Mattermost's step in `habakkuk setup`: the server and the bot account's access token, and
a check that the server knows the token (`GET /api/v4/users/me`) before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .platforms import PlatformSetup, SetupCheckFailed, SetupField


def headers_for(token: str) -> dict[str, str]:
    """The REST API's credentials: the bot's access token as a bearer token."""
    return {"Authorization": f"Bearer {token}"}


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask the server who the token is: "@habakkuk on chat.example.org", or
    SetupCheckFailed saying what is wrong."""
    base = (config.base_url or "").rstrip("/")
    token = secrets.get(config.token_env or "", "")
    try:
        async with (
            aiohttp.ClientSession(headers=headers_for(token)) as session,
            session.get(
                f"{base}/api/v4/users/me", timeout=aiohttp.ClientTimeout(total=15)
            ) as response,
        ):
            status = response.status
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
    if status == 401:
        raise SetupCheckFailed(f"{base} refused the token (HTTP 401): check the bot's token")
    if status != 200 or not isinstance(body, dict) or not body.get("username"):
        raise SetupCheckFailed(
            f"{base} is not a Mattermost server (/api/v4/users/me: HTTP {status})"
        )
    return f"@{body['username']} on {base.split('://', 1)[-1]}"


SETUP = PlatformSetup(
    type="mattermost",
    title="Mattermost",
    instructions=(
        "1. As an admin: Integrations > Bot Accounts > Add Bot Account\n"
        "   (enable bot accounts in the System Console if the menu is missing).\n"
        "2. Copy the access token shown once it is created.\n"
        "3. Add the bot to the channels it should read; there it answers when\n"
        "   @-mentioned, in a direct message always.\n"
        "Approvals come with buttons while `habakkuk serve` runs at an address the\n"
        'server can call (http.public_url); else "yes" or "no" is typed.'
    ),
    fields=(
        SetupField("base_url", "Your Mattermost server (https://chat.example.org)"),
        SetupField("token_env", "The bot's access token", secret=True, variable="MATTERMOST_TOKEN"),
        SetupField("allow_from", "Your Mattermost username (others pair with a code)"),
    ),
    check=check_setup,
)
