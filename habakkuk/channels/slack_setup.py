"""Slack's step in `habakkuk setup`: what to create at api.slack.com, and a check of
both tokens before they are saved."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .platforms import PlatformSetup, SetupCheckFailed, SetupField
from .slack_api import DEFAULT_BASE_URL, WebApi


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Check both tokens: the bot's (auth.test) and the app's (apps.connections.open).

    Returns "@bot in Workspace"; SetupCheckFailed with one line when either is refused."""
    base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
    bot = secrets.get(config.bot_token_env or "", "")
    app = secrets.get(config.app_token_env or "", "")
    if not bot.startswith("xoxb-"):
        raise SetupCheckFailed("the bot token starts with xoxb- (OAuth & Permissions)")
    if not app.startswith("xapp-"):
        raise SetupCheckFailed("the app-level token starts with xapp- (Basic Information)")
    async with aiohttp.ClientSession() as http:
        try:
            me = await WebApi(base, bot, http).identity()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(f"Slack refused the bot token: {exc}") from None
        except SendError as exc:  # unreachable, or an answer that is not Slack's
            raise SetupCheckFailed(f"cannot check the bot token at {base}: {exc}") from None
        try:
            await WebApi(base, app, http).call("apps.connections.open", form=True)
        except SendError as exc:
            raise SetupCheckFailed(f"cannot check the app-level token at {base}: {exc}") from None
        except FatalAdapterError as exc:
            raise SetupCheckFailed(
                f"Slack refused the app-level token: {exc} "
                "(it needs connections:write, and Socket Mode turned on)"
            ) from None
    return f"@{me.user or me.user_id} in {me.team or me.team_id}"


SLACK_SETUP = PlatformSetup(
    type="slack",
    title="Slack",
    instructions=(
        "1. At https://api.slack.com/apps choose Create New App > From scratch; pick the "
        "workspace.\n"
        "2. Socket Mode: turn it on and create an app-level token with connections:write "
        "(xapp-...): paste it below.\n"
        "3. OAuth & Permissions > Bot Token Scopes: app_mentions:read, chat:write, "
        "channels:history, groups:history, im:history, mpim:history, files:read, "
        "files:write, reactions:write.\n"
        "4. Event Subscriptions: turn on; bot events app_mention, message.im, "
        "message.channels, message.groups, message.mpim. Interactivity: turn on.\n"
        "5. App Home: allow users to send messages from the Messages tab.\n"
        "6. Install to Workspace, then copy the Bot User OAuth Token (xoxb-...) below.\n"
        "7. Invite the bot to a channel with /invite @yourbot; DMs need nothing."
    ),
    fields=(
        SetupField(
            "app_token_env", "App-level token (xapp-...)", secret=True, variable="SLACK_APP_TOKEN"
        ),
        SetupField(
            "bot_token_env", "Bot token (xoxb-...)", secret=True, variable="SLACK_BOT_TOKEN"
        ),
        SetupField(
            "allow_from",
            "Your Slack member id (U...; others pair with a code)",
            help="your profile > ⋮ > Copy member ID",
        ),
    ),
    check=check_setup,
)
