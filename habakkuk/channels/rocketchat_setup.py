"""Rocket.Chat's step in `habakkuk setup`: the server, the bot user's id and personal access
token, and a check that the server knows them (`GET /api/v1/me`) before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .platforms import PlatformSetup, SetupCheckFailed, SetupField


def headers_for(user_id: str, token: str) -> dict[str, str]:
    """The REST API's credentials: the user's id and its personal access token."""
    return {"X-User-Id": user_id, "X-Auth-Token": token}


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask the server who the token is: "@habakkuk on chat.example.org", or
    SetupCheckFailed saying what is wrong."""
    base = (config.base_url or "").rstrip("/")
    token = secrets.get(config.token_env or "", "")
    try:
        async with (
            aiohttp.ClientSession(headers=headers_for(config.user_id or "", token)) as session,
            session.get(f"{base}/api/v1/me", timeout=aiohttp.ClientTimeout(total=15)) as response,
        ):
            status = response.status
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
    if status == 401:
        raise SetupCheckFailed(f"{base} refused the token (HTTP 401): check the user id and token")
    if status != 200 or not isinstance(body, dict) or not body.get("username"):
        raise SetupCheckFailed(f"{base} is not a Rocket.Chat server (/api/v1/me: HTTP {status})")
    return f"@{body['username']} on {base.split('://', 1)[-1]}"


SETUP = PlatformSetup(
    type="rocketchat",
    title="Rocket.Chat",
    instructions=(
        "1. As an admin: Administration > Users > New, a user with the 'bot' role.\n"
        "2. Log in as it: My Account > Personal Access Tokens > Add (without 2FA);\n"
        "   copy the token and the user id shown with it.\n"
        "3. Add the bot to the channels it should read; there it answers when\n"
        "   @-mentioned, in a direct message always."
    ),
    fields=(
        SetupField("base_url", "Your Rocket.Chat server (https://chat.example.org)"),
        SetupField("user_id", "The bot user's id"),
        SetupField(
            "token_env", "Its personal access token", secret=True, variable="ROCKETCHAT_TOKEN"
        ),
        SetupField("allow_from", "Your Rocket.Chat username (others pair with a code)"),
    ),
    check=check_setup,
)
