"""Feishu/Lark's step in `habakkuk setup`: what to set in the developer console, and a
check of the App ID and secret (a tenant_access_token and the bot's info) before saving."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .feishu_wire import FEISHU_URL, FeishuApi
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Fetch a token and the bot's info with the App ID and secret; returns the bot."""
    base = (config.base_url or FEISHU_URL).rstrip("/")
    secret = secrets.get(config.app_secret_env or "", "")
    if not (config.app_id or "").startswith("cli_"):
        raise SetupCheckFailed("the App ID starts with cli_ (Credentials & Basic Info)")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            bot = await FeishuApi(base, config.app_id or "", secret, http).bot()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"Feishu refused the App ID or secret: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot check the app at {base}: {exc}") from None
    if not bot.open_id:
        raise SetupCheckFailed("the app has no bot: enable the Bot feature (Add features)")
    return f"{bot.name or 'the bot'} ({bot.open_id}) of app {config.app_id}"


FEISHU_SETUP = PlatformSetup(
    type="feishu",
    title="Feishu / Lark",
    instructions=(
        "1. At https://open.feishu.cn/app (Lark: https://open.larksuite.com/app) create a "
        "custom app, add the Bot feature, and copy the App ID (cli_...) and App Secret.\n"
        "2. Permissions: im:message, im:message:send_as_bot, im:resource.\n"
        "3. Events & callbacks > Encryption strategy: set an Encrypt Key and copy it and the "
        "Verification Token.\n"
        "4. Event subscription: request URL https://<your host>/channels/<this account's "
        "name>; add im.message.receive_v1 and the card.action.trigger callback.\n"
        "5. Habakkuk must be reachable there (habakkuk serve); Lark users set the base URL "
        "https://open.larksuite.com."
    ),
    fields=(
        SetupField("app_id", "App ID (cli_...)"),
        SetupField("app_secret_env", "App Secret", secret=True, variable="FEISHU_APP_SECRET"),
        SetupField("encrypt_key_env", "Encrypt Key", secret=True, variable="FEISHU_ENCRYPT_KEY"),
        SetupField(
            "verification_token_env",
            "Verification Token",
            secret=True,
            variable="FEISHU_VERIFICATION_TOKEN",
        ),
        SetupField("allow_from", "Your open_id (ou_...; others pair with a code)"),
    ),
    check=check_setup,
    fixed={"groups": "mention"},
)
