"""`realtime:`: Live mode in the dashboard (spec 000 "Media": Live mode), and its checks.

The browser talks to the provider over WebRTC; Habakkuk only mints a short-lived client
secret with the key `key_env` names, so these settings are what that secret's session
is made of. Each mistake is a ConfigError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

RealtimeProvider = Literal["openai"]
# OpenAI accepts a client secret's lifetime between 10 seconds and two hours.
TTL_MIN_SECONDS = 10.0
TTL_MAX_SECONDS = 7200.0
MAX_INSTRUCTIONS = 20_000


@dataclass
class RealtimeConfig:
    """`realtime`: the provider the dashboard's Live button talks to, the voice model and
    its voice, the transcription model of the user's speech, the voice model's
    instructions and how long a minted client secret lives (`ttl`)."""

    provider: RealtimeProvider = "openai"
    model: str = "gpt-realtime-2.1"
    voice: str = "marin"
    key_env: str = "OPENAI_API_KEY"
    base_url: str = "https://api.openai.com/v1"
    transcription: str = "gpt-transcribe"
    instructions: str = ""
    ttl: str | float = "10m"
    ttl_seconds: float = field(default=600.0, init=False)

    @property
    def origin(self) -> str:
        """The provider's origin (scheme, host and port), for the dashboard's connect-src."""
        match = re.match(r"https?://[^/\s?#]+", self.base_url)
        return match.group(0) if match else ""


def resolve_realtime(realtime: RealtimeConfig, path: Path) -> None:
    """Check every value and fill in what is derived (ConfigError naming the line)."""

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(realtime, key)}: realtime.{key}: {message}")

    if realtime.provider != "openai":
        raise error("provider", f"{realtime.provider!r} is not a provider (openai)")
    for key in ("model", "voice", "transcription"):
        value = str(getattr(realtime, key)).strip()
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}", value):
            raise error(key, f"{value!r} is not a {key} name")
        setattr(realtime, key, value)
    realtime.key_env = realtime.key_env.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", realtime.key_env):
        raise error("key_env", f"{realtime.key_env!r} is not an environment variable name")
    realtime.base_url = realtime.base_url.strip().rstrip("/")
    if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", realtime.base_url):
        raise error("base_url", f"{realtime.base_url!r} is not an http(s) URL")
    if len(realtime.instructions) > MAX_INSTRUCTIONS:
        raise error("instructions", f"is over {MAX_INSTRUCTIONS:,} characters")
    try:
        seconds = parse_duration(realtime.ttl)
    except ValueError as exc:
        raise error("ttl", str(exc)) from None
    if not TTL_MIN_SECONDS <= seconds <= TTL_MAX_SECONDS:
        raise error("ttl", "must be between 10s and 2h")
    realtime.ttl_seconds = seconds
