"""WeCom's step in `habakkuk setup`: what to set in the admin console, and a check of the
corp id and the app's secret (an access token) before saving."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .platforms import PlatformSetup, SetupCheckFailed, SetupField
from .wecom_wire import WECOM_URL, WeComApi, aes_key


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """The EncodingAESKey's shape, then an access token with the corp id and secret."""
    base = (config.base_url or WECOM_URL).rstrip("/")
    try:
        aes_key(secrets.get(config.aes_key_env or "", ""))
    except ValueError as exc:
        raise SetupCheckFailed(f"the EncodingAESKey: {exc}") from None
    secret = secrets.get(config.app_secret_env or "", "")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            await WeComApi(base, config.corp_id or "", secret, http).tokens.get()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"WeCom refused the corp id or secret: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot check the app at {base}: {exc}") from None
    return f"app {config.agent_id} of corp {config.corp_id}"


WECOM_SETUP = PlatformSetup(
    type="wecom",
    title="WeCom (WeChat Work)",
    instructions=(
        "1. At https://work.weixin.qq.com/wework_admin: My Company shows the corp id; "
        "App Management > Create App gives the AgentId and the Secret.\n"
        "2. The app > Receive Messages > Set API: URL https://<your host>/channels/<this "
        "account's name>, a Token and an EncodingAESKey (generate both, copy them).\n"
        "3. Habakkuk must be reachable there (habakkuk serve) before you save: WeCom "
        "verifies the URL at once."
    ),
    fields=(
        SetupField("corp_id", "Corp ID (ww...)"),
        SetupField("agent_id", "AgentId (digits)"),
        SetupField("app_secret_env", "App Secret", secret=True, variable="WECOM_APP_SECRET"),
        SetupField("token_env", "Callback Token", secret=True, variable="WECOM_TOKEN"),
        SetupField("aes_key_env", "EncodingAESKey", secret=True, variable="WECOM_AES_KEY"),
        SetupField("allow_from", "Your userid (others pair with a code)"),
    ),
    check=check_setup,
)
