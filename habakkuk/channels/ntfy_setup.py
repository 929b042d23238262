"""ntfy's step in `habakkuk setup`: the server, the two topics, an optional access token,
and a check that the server answers and lets us read the topic before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .platforms import PlatformSetup, SetupCheckFailed, SetupField

DEFAULT_BASE_URL = "https://ntfy.sh"


def headers_for(token: str) -> dict[str, str]:
    """The headers every request carries (the access token, when there is one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Poll the topic we read once: "ntfy.sh: replies to X, reading Y", or
    SetupCheckFailed saying what is wrong."""
    base = (config.base_url or DEFAULT_BASE_URL).rstrip("/")
    token = secrets.get(config.token_env or "", "") if config.token_env else ""
    url = f"{base}/{quote(config.listen or '')}/json"
    try:
        async with (
            aiohttp.ClientSession(headers=headers_for(token)) as session,
            session.get(
                url,
                params={"poll": "1", "since": "latest"},
                timeout=aiohttp.ClientTimeout(total=15),
            ) as response,
        ):
            status = response.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SetupCheckFailed(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
    if status in (401, 403):
        raise SetupCheckFailed(
            f"{base} refused to let us read {config.listen} (HTTP {status}): check the token"
        )
    if status != 200:
        raise SetupCheckFailed(f"{base} is not an ntfy server ({url}: HTTP {status})")
    host = base.split("://", 1)[-1]
    return f"{host}: replies to {config.topic}, reading {config.listen}"


SETUP = PlatformSetup(
    type="ntfy",
    title="ntfy",
    instructions=(
        "1. Pick two topic names nobody can guess (or use your own ntfy server with\n"
        "   access control and an access token): one the assistant publishes replies to,\n"
        "   one it reads your messages from. Anyone who can publish to the second one\n"
        "   talks to the assistant.\n"
        "2. Subscribe to the replies topic in the ntfy app; send to the other one\n"
        "   (the app's publish button, or curl -d 'hi' ntfy.sh/<topic>)."
    ),
    fields=(
        SetupField("base_url", "The ntfy server", default=DEFAULT_BASE_URL),
        SetupField("topic", "The topic replies go to"),
        SetupField("listen", "The topic your messages come from"),
        SetupField(
            "token_env",
            "An access token (empty for a public server)",
            secret=True,
            variable="NTFY_TOKEN",
        ),
    ),
    check=check_setup,
    fixed={"allow_from": ["*"]},
)
