"""Messenger's and Instagram's steps in `habakkuk setup`: what to set in Meta's app
dashboard, and a check that the access token works before saving."""

from __future__ import annotations

from collections.abc import Mapping

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import SendError
from .metagraph import GraphClient, GraphFatal
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """GET /me with the token; returns "<name> (<id>)"."""
    graph = GraphClient(secrets.get(config.token_env or "", ""), config.base_url or "", 30.0)
    try:
        found = await graph.get("me", {"fields": "id,name"})
    except GraphFatal as exc:
        raise SetupCheckFailed(f"Meta refused the access token: {exc}") from None
    except SendError as exc:
        raise SetupCheckFailed(f"cannot reach the Graph API at {graph.root}: {exc}") from None
    finally:
        await graph.close()
    return f"{found.get('name') or found.get('username') or 'the account'} ({found.get('id', '?')})"


def _fields(prefix: str, what: str) -> tuple[SetupField, ...]:
    return (
        SetupField("token_env", f"{what} access token", secret=True, variable=f"{prefix}_TOKEN"),
        SetupField("app_secret_env", "App secret", secret=True, variable=f"{prefix}_APP_SECRET"),
        SetupField(
            "verify_token_env",
            "Webhook verify token",
            secret=True,
            variable=f"{prefix}_VERIFY_TOKEN",
        ),
        SetupField("allow_from", "Your own id for this Page (others pair with a code)"),
    )


_WEBHOOK = (
    "Webhooks: callback URL https://<your host>/channels/<this account's name> and a "
    "verify token of your choosing (the same as here). Habakkuk must be reachable there "
    "(habakkuk serve with http.token_env; behind a proxy set http.public_url)."
)

MESSENGER_SETUP = PlatformSetup(
    type="messenger",
    title="Facebook Messenger (a Page)",
    instructions=(
        "1. At https://developers.facebook.com/apps create a Business app and add Messenger.\n"
        "2. Messenger > Settings: connect your Page and generate its Page access token "
        "(pages_messaging).\n"
        "3. App settings > Basic: copy the App Secret (it signs every webhook).\n"
        f"4. {_WEBHOOK} Subscribe the Page to messages and messaging_postbacks.\n"
        "5. Your own id: message the Page once; the pairing code's message names it."
    ),
    fields=_fields("MESSENGER", "Page"),
    check=check_setup,
)

INSTAGRAM_SETUP = PlatformSetup(
    type="instagram",
    title="Instagram (a professional account)",
    instructions=(
        "1. At https://developers.facebook.com/apps create a Business app and add Instagram "
        "(the Messenger API for Instagram); link the professional account to a Page.\n"
        "2. Generate the Page access token with instagram_manage_messages (or, with "
        "Instagram Login, the account's token and base_url https://graph.instagram.com).\n"
        "3. App settings > Basic: copy the App Secret (it signs every webhook).\n"
        f"4. {_WEBHOOK} Subscribe to the messages and messaging_postbacks fields.\n"
        "5. In the Instagram app: Settings > Messages > Connected tools: allow access."
    ),
    fields=_fields("INSTAGRAM", "Instagram"),
    check=check_setup,
)
