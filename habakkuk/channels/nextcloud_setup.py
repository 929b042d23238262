"""Nextcloud Talk's step in `habakkuk setup`: the server, the bot's shared secret, and a
check that the server is a Nextcloud (`/status.php`) before anything is saved. The bot
itself is installed on the server with `occ talk:bot:install` (the instructions say how)."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .platforms import PlatformSetup, SetupCheckFailed, SetupField

MIN_SECRET = 40  # Talk refuses a bot secret shorter than this


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask the server's status: "Nextcloud 29.0.1 at cloud.example.org", or
    SetupCheckFailed saying what is wrong."""
    base = (config.base_url or "").rstrip("/")
    secret = secrets.get(config.token_env or "", "")
    if len(secret) < MIN_SECRET:
        raise SetupCheckFailed(f"the bot secret is {len(secret)} characters; Talk needs 40 to 128")
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{base}/status.php", timeout=aiohttp.ClientTimeout(total=15)) as response,
        ):
            status = response.status
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
    if status != 200 or not isinstance(body, dict) or not body.get("installed"):
        raise SetupCheckFailed(f"{base} is not a Nextcloud server (/status.php: HTTP {status})")
    host = base.split("://", 1)[-1]
    return f"Nextcloud {body.get('versionstring', '?')} at {host}"


SETUP = PlatformSetup(
    type="nextcloud",
    title="Nextcloud Talk",
    instructions=(
        "1. Make a secret of 40 to 128 characters (openssl rand -hex 32).\n"
        "2. On the Nextcloud server, as its admin:\n"
        "   occ talk:bot:install -f webhook,response Habakkuk <secret> \\\n"
        "       https://<habakkuk's public URL>/channels/<account>\n"
        "   then add the bot to a conversation (occ talk:bot:setup <bot-id> <token>, or\n"
        "   the conversation's settings > Bots).\n"
        "3. Habakkuk's HTTP server must be reachable from the Nextcloud server\n"
        "   (http: listen, or http.public_url behind a proxy)."
    ),
    fields=(
        SetupField("base_url", "Your Nextcloud server (https://cloud.example.org)"),
        SetupField("token_env", "The bot's secret", secret=True, variable="NEXTCLOUD_TALK_SECRET"),
        SetupField("allow_from", "Your Nextcloud user id (others pair with a code)"),
    ),
    check=check_setup,
)
