"""Matrix's step in `habakkuk setup`: what to create on the homeserver, and a check that
the access token works (whoami) and belongs to the bot's id before it is saved."""

from __future__ import annotations

from collections.abc import Mapping

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .matrix_api import MatrixClient
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


def api_root(config: ChannelConfig) -> str:
    """Where the client-server API is: base_url when set, else the homeserver."""
    return (config.base_url or config.homeserver or "").rstrip("/")


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Ask the homeserver who the token belongs to (whoami): the user id, or
    SetupCheckFailed when it is refused or belongs to someone else."""
    base = api_root(config)
    client = MatrixClient(base, secrets.get(config.token_env or "", ""))
    try:
        me = await client.request("GET", "/account/whoami", timeout=15)
    except FatalAdapterError as exc:
        raise SetupCheckFailed(f"{base} refused the access token: {exc}") from None
    except SendError as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {exc}") from None
    finally:
        await client.close()
    user = str(me.get("user_id", ""))
    if config.user_id and user != config.user_id:
        raise SetupCheckFailed(f"the access token belongs to {user}, not {config.user_id}")
    return user


SETUP = PlatformSetup(
    type="matrix",
    title="Matrix",
    instructions=(
        "1. Create an account for the bot on your homeserver (e.g. sign up in Element).\n"
        "2. Get its access token: log in once with\n"
        "   curl -XPOST https://HOMESERVER/_matrix/client/v3/login -d "
        '\'{"type":"m.login.password","identifier":{"type":"m.id.user","user":"BOT"},'
        '"password":"..."}\'\n'
        "   and paste the access_token below (Element: Settings > Help & About > Access "
        "Token also shows one; log out of that session afterwards, not the token's).\n"
        "3. Invite the bot to a room from your own account: it joins when you are in "
        "allow_from. Encrypted rooms are not supported: use a room without encryption."
    ),
    fields=(
        SetupField("homeserver", "Homeserver URL", default="https://matrix.org"),
        SetupField("user_id", "The bot's Matrix id (@bot:example.org)"),
        SetupField("token_env", "Access token", secret=True, variable="MATRIX_ACCESS_TOKEN"),
        SetupField("allow_from", "Your own Matrix id (@you:example.org; others pair with a code)"),
    ),
    check=check_setup,
)
