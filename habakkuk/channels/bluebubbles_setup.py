"""BlueBubbles' step in `habakkuk setup`: what to set on the BlueBubbles server, and a
check of its address and password before they are saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .bluebubbles_wire import BlueBubblesApi
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """GET the server's info with the password; returns its version and account."""
    base = (config.base_url or "").rstrip("/")
    if len(secrets.get(config.secret_env or "", "")) < 16:
        raise SetupCheckFailed("the webhook secret needs 16 characters or more")
    password = secrets.get(config.password_env or "", "")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            found = await BlueBubblesApi(base, password, http).info()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"the server refused the password: {exc}") from None
        except SendError as exc:
            raise SetupCheckFailed(
                f"cannot reach the BlueBubbles server at {base}: {exc}"
            ) from None
    return f"BlueBubbles {found.version or '?'} ({found.account or 'iMessage'})"


BLUEBUBBLES_SETUP = PlatformSetup(
    type="bluebubbles",
    title="iMessage (BlueBubbles)",
    instructions=(
        "1. On a Mac signed in to iMessage, install the BlueBubbles server "
        "(https://bluebubbles.app) and set its password.\n"
        "2. Pick a long random webhook secret, e.g. the output of "
        "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`.\n"
        "3. BlueBubbles > API & Webhooks > Add webhook: https://<your host>/channels/"
        "<this account's name>/<the secret>, for New Messages.\n"
        "4. Habakkuk must be reachable there (habakkuk serve with http.token_env), and "
        "the BlueBubbles server from Habakkuk (its URL below)."
    ),
    fields=(
        SetupField("base_url", "The BlueBubbles server's URL (http://mac.local:1234)"),
        SetupField(
            "password_env", "The server password", secret=True, variable="BLUEBUBBLES_PASSWORD"
        ),
        SetupField("secret_env", "The webhook secret", secret=True, variable="BLUEBUBBLES_SECRET"),
        SetupField("nick", "The name that calls the bot in group chats", default="habakkuk"),
        SetupField("allow_from", "Your phone number or Apple ID email (others pair with a code)"),
    ),
    check=check_setup,
)
