"""Teams' step in `habakkuk setup`: what to create in Azure (an Azure Bot with the Teams
channel), and a check that the App ID and its password get a Bot Framework token before
they are saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .platforms import PlatformSetup, SetupCheckFailed, SetupField
from .teams_wire import BotToken, Endpoints


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Log in with the App ID and password; returns a line naming the bot."""
    endpoints = Endpoints.of(config.tenant, config.base_url)
    password = secrets.get(config.password_env or "", "")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        token = BotToken(endpoints.token_url, config.app_id or "", password, lambda: http)
        try:
            await token.get()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"Microsoft refused the App ID or password: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot log in at {endpoints.token_url}: {exc}") from None
    return f"bot {config.app_id} logs in ({config.tenant or 'multi-tenant'})"


TEAMS_SETUP = PlatformSetup(
    type="teams",
    title="Microsoft Teams",
    instructions=(
        "1. In the Azure portal create an Azure Bot (Microsoft App ID; multi-tenant, or "
        "single-tenant with your tenant id).\n"
        "2. Its Configuration: copy the Microsoft App ID; Manage Password > New client "
        "secret, copy the value.\n"
        "3. Messaging endpoint: https://<your host>/channels/<this account's name>.\n"
        "4. Channels: add Microsoft Teams; install the bot in Teams (Developer Portal or "
        "an app package with this App ID).\n"
        "5. Habakkuk must be reachable there over HTTPS (habakkuk serve with "
        "http.token_env, behind a proxy with TLS)."
    ),
    fields=(
        SetupField("app_id", "Microsoft App ID (a GUID)"),
        SetupField(
            "password_env",
            "App password (client secret)",
            secret=True,
            variable="TEAMS_APP_PASSWORD",
        ),
        SetupField("tenant", "Tenant id of a single-tenant bot (empty: multi-tenant)"),
        SetupField("allow_from", "Your Entra object id (others pair with a code)"),
    ),
    check=check_setup,
)
