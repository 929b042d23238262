"""`transcription:`: where voice notes and spoken utterances become text, and its checks.

Two providers: `openai`, any OpenAI-compatible /audio/transcriptions endpoint (the
default), and `local`, faster-whisper on this machine's CPU with a model folder the user
downloaded (the `local-stt` extra), so the voice loop runs with no network. Each mistake
is a ConfigError naming the line.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .errors import ConfigError

TranscriptionProvider = Literal["openai", "local"]
OPENAI_MODEL = "whisper-1"
LOCAL_EXTRA = "pip install 'habakkuk[local-stt]'"
LOCAL_PACKAGE = "faster_whisper"
MAX_THREADS = 64


@dataclass
class TranscriptionConfig:
    """`transcription`: the provider; for `openai` the endpoint, its key variable and model
    name, for `local` the model folder (`model`) and the CPU threads it may use."""

    provider: TranscriptionProvider = "openai"
    base_url: str = "https://api.openai.com/v1"
    key_env: str | None = "OPENAI_API_KEY"
    model: str = ""
    language: str | None = None  # an ISO 639-1 code; None: the model detects it
    threads: int | None = None  # local only; None: every core, up to 4


def local_package_installed() -> bool:
    """True when the local provider's package can be imported (it is not imported here)."""
    return importlib.util.find_spec(LOCAL_PACKAGE) is not None


def resolve_transcription(section: TranscriptionConfig, path: Path, root: Path) -> None:
    """Fill in the defaults and check every value (ConfigError naming the line). A local
    model's relative path resolves against the home `root`."""

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(section, key)}: transcription.{key}: {message}")

    if section.language is not None and not re.fullmatch(r"[a-z]{2,3}", section.language):
        raise error("language", f"{section.language!r} is not a language code (en, de, ...)")
    if section.provider == "openai":
        if section.threads is not None:
            raise error("threads", "only the local provider runs on this machine's threads")
        section.model = section.model.strip() or OPENAI_MODEL
        if not re.match(r"https?://[^/\s]+", section.base_url):
            raise error("base_url", f"{section.base_url!r} is not an http(s) URL")
        return
    if section.threads is not None and not 1 <= section.threads <= MAX_THREADS:
        raise error("threads", f"must be between 1 and {MAX_THREADS}")
    if not section.model.strip():
        raise error(
            "model",
            "the local provider needs the folder of a faster-whisper model "
            "(e.g. a download of Systran/faster-whisper-base)",
        )
    folder = Path(section.model.strip()).expanduser()
    folder = folder if folder.is_absolute() else root / folder
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise error("model", f"{folder} {what}")
    section.model = str(folder)
    if not local_package_installed():
        raise error("provider", f"local needs faster-whisper: {LOCAL_EXTRA}")
