"""The WhatsApp Business Cloud API's step in `habakkuk setup`: what to set in Meta's app
dashboard, and a check that the access token reaches the phone number before saving."""

from __future__ import annotations

from collections.abc import Mapping

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import SendError
from .metagraph import GraphClient, GraphFatal
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """GET the phone number with the token; returns "<verified name> (<number>)"."""
    graph = GraphClient(secrets.get(config.token_env or "", ""), config.base_url or "", 30.0)
    number = config.phone_number_id or ""
    if not number.isdigit():
        raise SetupCheckFailed("the phone number ID is digits (WhatsApp > API Setup)")
    try:
        found = await graph.get(number, {"fields": "display_phone_number,verified_name"})
    except GraphFatal as exc:
        raise SetupCheckFailed(f"Meta refused the access token: {exc}") from None
    except SendError as exc:
        raise SetupCheckFailed(f"cannot read phone number {number}: {exc}") from None
    finally:
        await graph.close()
    name = found.get("verified_name") or number
    return f"{name} ({found.get('display_phone_number', number)})"


WHATSAPPCLOUD_SETUP = PlatformSetup(
    type="whatsappcloud",
    title="WhatsApp Business (Cloud API)",
    instructions=(
        "1. At https://developers.facebook.com/apps create a Business app and add WhatsApp.\n"
        "2. WhatsApp > API Setup: copy the phone number ID; create a System User access "
        "token with whatsapp_business_messaging (a permanent one, not the 24-hour test token).\n"
        "3. App settings > Basic: copy the App Secret (it signs every webhook).\n"
        "4. WhatsApp > Configuration > Webhook: callback URL https://<your host>/channels/"
        "<this account's name>, a verify token of your choosing (the same as here), then "
        "subscribe to the messages field.\n"
        "5. Habakkuk must be reachable there (habakkuk serve with http.token_env; behind a "
        "proxy set http.public_url). Outside the 24-hour window only an approved template "
        "can reach a customer: name one whose body has one variable."
    ),
    fields=(
        SetupField("phone_number_id", "Phone number ID"),
        SetupField("token_env", "Access token", secret=True, variable="WHATSAPP_ACCESS_TOKEN"),
        SetupField("app_secret_env", "App secret", secret=True, variable="WHATSAPP_APP_SECRET"),
        SetupField(
            "verify_token_env",
            "Webhook verify token",
            secret=True,
            variable="WHATSAPP_VERIFY_TOKEN",
        ),
        SetupField("template", "Approved template for outside the 24-hour window (optional)"),
        SetupField("allow_from", "Your own number (digits with the country code, no +)"),
    ),
    check=check_setup,
)
