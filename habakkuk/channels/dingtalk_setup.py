"""DingTalk's step in `habakkuk setup`: what to set in the developer console, and a check
of the Client ID (AppKey) and secret (an access token) before saving."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .dingtalk_wire import API_URL, DingTalkApi
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Fetch an access token with the Client ID and secret; returns the app."""
    base = (config.base_url or API_URL).rstrip("/")
    secret = secrets.get(config.app_secret_env or "", "")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            await DingTalkApi(base, config.app_id or "", secret, http).tokens.get()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"DingTalk refused the Client ID or secret: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot check the app at {base}: {exc}") from None
    return f"app {config.app_id} (robot {config.robot_code or config.app_id})"


DINGTALK_SETUP = PlatformSetup(
    type="dingtalk",
    title="DingTalk",
    instructions=(
        "1. At https://open-dev.dingtalk.com create an internal app and copy its Client ID "
        "(AppKey) and Client Secret (AppSecret).\n"
        "2. Add the Robot capability; message receiving mode HTTP, the message receiving "
        "URL https://<your host>/channels/<this account's name>; publish the robot.\n"
        "3. Permission: qyapi_robot_sendmsg (the robot sends one-to-one and group messages).\n"
        "4. Habakkuk must be reachable there (habakkuk serve)."
    ),
    fields=(
        SetupField("app_id", "Client ID (AppKey)"),
        SetupField("app_secret_env", "Client Secret", secret=True, variable="DINGTALK_APP_SECRET"),
        SetupField("allow_from", "Your staff id (others pair with a code)"),
    ),
    check=check_setup,
)
