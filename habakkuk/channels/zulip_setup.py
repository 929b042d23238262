"""Zulip's step in `habakkuk setup`: the server, the bot's email and API key, and a check
that the server knows the bot (`GET /api/v1/users/me`) before anything is saved."""

from __future__ import annotations

import base64
from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .platforms import PlatformSetup, SetupCheckFailed, SetupField


def auth_for(email: str, api_key: str) -> dict[str, str]:
    """The header of Zulip's HTTP basic auth: the bot's email and its API key."""
    pair = base64.b64encode(f"{email}:{api_key}".encode()).decode("ascii")
    return {"Authorization": f"Basic {pair}"}


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask the server who the bot is: "Habakkuk (bot@chat.example.org) on chat.example.org",
    or SetupCheckFailed saying what is wrong."""
    base = (config.base_url or "").rstrip("/")
    key = secrets.get(config.token_env or "", "")
    try:
        async with (
            aiohttp.ClientSession(headers=auth_for(config.username or "", key)) as session,
            session.get(
                f"{base}/api/v1/users/me", timeout=aiohttp.ClientTimeout(total=15)
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
        raise SetupCheckFailed(
            f"{base} refused the bot {config.username} (HTTP 401): check the email and API key"
        )
    if status != 200 or not isinstance(body, dict) or body.get("result") != "success":
        raise SetupCheckFailed(f"{base} is not a Zulip server (/api/v1/users/me: HTTP {status})")
    host = base.split("://", 1)[-1]
    return f"{body.get('full_name', '?')} ({body.get('email', config.username)}) on {host}"


SETUP = PlatformSetup(
    type="zulip",
    title="Zulip",
    instructions=(
        "1. In Zulip: Settings > Personal settings > Bots > Add a new bot, type\n"
        "   'Generic bot'; note its email and copy its API key.\n"
        "2. Subscribe the bot to the streams it should read; in a stream it answers\n"
        "   when @-mentioned (@**its name**), in a direct message always.\n"
        "3. allow_from takes the people's Zulip emails (or user ids)."
    ),
    fields=(
        SetupField("base_url", "Your Zulip server (https://chat.example.org)"),
        SetupField("username", "The bot's email (…-bot@chat.example.org)"),
        SetupField("token_env", "The bot's API key", secret=True, variable="ZULIP_API_KEY"),
        SetupField("allow_from", "Your Zulip email (others pair with a code)"),
    ),
    check=check_setup,
)
