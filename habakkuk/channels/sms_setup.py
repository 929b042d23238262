"""SMS's step in `habakkuk setup`: what to set at console.twilio.com, and a check of the
account SID and auth token before they are saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .platforms import PlatformSetup, SetupCheckFailed, SetupField
from .sms_wire import DEFAULT_BASE_URL, MessagesApi


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """GET the account with the SID and token; returns "<name> (<sid>)"."""
    base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
    token = secrets.get(config.token_env or "", "")
    sid = config.account_sid or ""
    if not sid.startswith("AC"):
        raise SetupCheckFailed("the account SID starts with AC (Twilio console > Account info)")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            found = await MessagesApi(base, sid, token, http).account()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"Twilio refused the account SID or token: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot check the account at {base}: {exc}") from None
    return f"{found.name or found.sid} ({found.status or 'active'}), sending from {config.from_}"


SMS_SETUP = PlatformSetup(
    type="sms",
    title="SMS (Twilio)",
    instructions=(
        "1. At https://console.twilio.com copy the Account SID (AC...) and the Auth Token.\n"
        "2. Buy or pick a number that can send SMS (and MMS for files).\n"
        "3. Phone Numbers > your number > Messaging: 'A message comes in' > Webhook, "
        "HTTP POST, https://<your host>/channels/<this account's name>.\n"
        "4. Habakkuk must be reachable there (habakkuk serve with http.token_env); behind "
        "a proxy set http.public_url to the public address, so signatures check out."
    ),
    fields=(
        SetupField("account_sid", "Account SID (AC...)"),
        SetupField("token_env", "Auth token", secret=True, variable="TWILIO_AUTH_TOKEN"),
        SetupField("from_", "Your Twilio number (+15551234567)"),
        SetupField("allow_from", "Your own phone number (+...; others pair with a code)"),
    ),
    check=check_setup,
)
