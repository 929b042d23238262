"""`tts:`: the speech engine speak(), voice replies and read-aloud use (spec 000 "Media":
Speech, Voice replies), and its checks.

The provider names the defaults of the rest: OpenAI's /audio/speech, ElevenLabs'
text-to-speech, the browser's free read-aloud websocket (edge, no key) or espeak-ng on
this machine (offline, no key, no URL). Each mistake is a ConfigError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .errors import ConfigError

TtsProvider = Literal["openai", "elevenlabs", "edge", "espeak"]
MAX_CHARS_LIMIT = 100_000
EDGE_URL = "wss://speech.platform.bing.com/consumer/speech/synthesize/readaloud/edge/v1"

# Per provider: (model, voice, key variable, base URL) when the section names none.
TTS_DEFAULTS: dict[str, tuple[str, str, str, str]] = {
    "openai": ("gpt-4o-mini-tts", "alloy", "OPENAI_API_KEY", "https://api.openai.com/v1"),
    "elevenlabs": (
        "eleven_multilingual_v2",
        "21m00Tcm4TlvDq8ikWAM",  # "Rachel", a voice every account has
        "ELEVENLABS_API_KEY",
        "https://api.elevenlabs.io",
    ),
    "edge": ("", "en-US-EmmaMultilingualNeural", "", EDGE_URL),
    "espeak": ("", "en", "", ""),
}
_KEYLESS = ("edge", "espeak")


@dataclass
class TtsConfig:
    """`tts`: the provider speech is made with; model, voice, key and URL default per
    provider, and `max_chars` caps what one reply read aloud may be."""

    provider: TtsProvider
    voice: str = ""
    model: str = ""
    key_env: str = ""
    base_url: str = ""
    max_chars: int = 2000


def resolve_tts(tts: TtsConfig, path: Path) -> None:
    """Fill in the provider's defaults and check every value (ConfigError naming the line)."""

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(tts, key)}: tts.{key}: {message}")

    model, voice, key_env, base_url = TTS_DEFAULTS[tts.provider]
    if tts.provider in _KEYLESS and tts.key_env.strip():
        raise error("key_env", f"the {tts.provider} provider takes no key")
    if tts.provider == "espeak" and tts.base_url.strip():
        raise error("base_url", "espeak runs on this machine and has no URL")
    if tts.provider in _KEYLESS and tts.model.strip():
        raise error("model", f"the {tts.provider} provider has no models (choose a voice)")
    tts.model = tts.model.strip() or model
    tts.voice = tts.voice.strip() or voice
    tts.key_env = tts.key_env.strip() or key_env
    tts.base_url = (tts.base_url.strip() or base_url).rstrip("/")
    if tts.key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", tts.key_env):
        raise error("key_env", f"{tts.key_env!r} is not an environment variable name")
    scheme = r"wss?://[^/\s]+" if tts.provider == "edge" else r"https?://[^/\s]+"
    if tts.base_url and not re.match(scheme, tts.base_url):
        kind = "a ws(s)" if tts.provider == "edge" else "an http(s)"
        raise error("base_url", f"{tts.base_url!r} is not {kind} URL")
    if not re.fullmatch(r"[A-Za-z0-9_.+()][A-Za-z0-9_.,+ ()-]{0,119}", tts.voice):
        raise error("voice", f"{tts.voice!r} is not a voice name")
    if not 1 <= tts.max_chars <= MAX_CHARS_LIMIT:
        raise error("max_chars", f"must be between 1 and {MAX_CHARS_LIMIT:,}")
