"""Google Chat's step in `habakkuk setup`: what to configure in Google Cloud (the Chat API's
HTTP endpoint app and a service account key), and a check that the key gets a token
before anything is saved."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import aiohttp

from habakkuk.engine.channel_config import ChannelConfig

from .adapter import FatalAdapterError, SendError
from .platforms import PlatformSetup, SetupCheckFailed, SetupField


def key_path(config: ChannelConfig, home: Path) -> Path:
    """The service account key file: `~` expanded, a relative path under the home."""
    path = Path(config.key_file or "").expanduser()
    return path if path.is_absolute() else home / path


async def check_setup(config: ChannelConfig, secrets: Mapping[str, str]) -> str:
    """Read the key file and get a token with it; returns the service account's email."""
    from .googlechat_wire import AppToken, ServiceAccountKey

    try:
        key = ServiceAccountKey.load(Path(config.key_file or "").expanduser())
    except ValueError as exc:
        raise SetupCheckFailed(str(exc)) from None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        try:
            await AppToken(key, lambda: http).get()
        except FatalAdapterError as exc:
            raise SetupCheckFailed(str(exc)) from None
        except SendError as exc:
            raise SetupCheckFailed(f"cannot get a token at {key.token_uri}: {exc}") from None
    return f"{key.client_email} (audience {config.audience})"


GOOGLECHAT_SETUP = PlatformSetup(
    type="googlechat",
    title="Google Chat",
    instructions=(
        "1. In Google Cloud enable the Google Chat API; create a service account and a "
        "JSON key for it (keep the file private: chmod 600).\n"
        "2. Chat API > Configuration: an HTTP endpoint app, URL "
        "https://<your host>/channels/<this account's name>.\n"
        "3. Authentication audience: 'Project number' (enter that number here) or "
        "'HTTP endpoint URL' (enter the URL here).\n"
        "4. Habakkuk must be reachable there over HTTPS (habakkuk serve with "
        "http.token_env, behind a proxy with TLS)."
    ),
    fields=(
        SetupField("audience", "Project number (or the endpoint URL, if chosen as audience)"),
        SetupField("key_file", "Path of the service account's JSON key file"),
        SetupField("allow_from", "Your Google account's email (others pair with a code)"),
    ),
    check=check_setup,
)
