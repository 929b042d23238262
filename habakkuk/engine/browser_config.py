"""`browser:`: how the browser toolset gets its Chrome (spec 000 "Browser"), and its checks.

The top-level section holds the defaults; an agent's own `browser:` overrides the keys it
writes (the loader records which, so a default written out still overrides). Mode launch
starts `binary` over a pipe; mode connect works in tabs of a browser at `cdp_url`.
URL patterns are shell-style (`*`, `?`) matched against the whole URL; allow_private holds
host patterns (`intranet.example`, `*.lan`, `127.0.0.1`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .errors import ConfigError

BrowserMode = Literal["launch", "connect"]
# Debian's package, then the names Chrome and Chromium install under elsewhere.
BINARY_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
_HOST_PATTERN = re.compile(r"[A-Za-z0-9*?._:\[\]-]+")


@dataclass
class BrowserConfig:
    """`browser` (top level, or an agent's own): the browser the toolset drives."""

    mode: BrowserMode = "launch"
    # The Chrome or Chromium to start (mode launch); "": the first of BINARY_NAMES on PATH.
    binary: str = ""
    headless: bool = True
    # Mode connect: ws://… of the browser, or http://host:port (read through /json/version).
    cdp_url: str = ""
    idle_timeout: float = 600.0  # seconds unused before the browser (or our tabs) closes
    allowed_urls: list[str] = field(default_factory=list)  # when set: documents only these
    blocked_urls: list[str] = field(default_factory=list)  # every request
    allow_private: list[str] = field(default_factory=list)  # host patterns let inward


def resolve_browser(browser: BrowserConfig, path: Path, where: str = "browser") -> None:
    """Check every value of a browser section (ConfigError naming the line and key)."""

    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(browser, key)}: {where}.{key}: {message}")

    if browser.idle_timeout <= 0:
        raise error("idle_timeout", "must be > 0 seconds")
    url = browser.cdp_url.strip()
    if url and not re.match(r"(wss?|https?)://[^/\s]+", url):
        raise error("cdp_url", f"{url!r} is not a ws:// or http:// address")
    browser.cdp_url = url
    if "cdp_url" in getattr(browser, "_lines", {}) and not url:
        raise error("cdp_url", "is empty")
    for key in ("allowed_urls", "blocked_urls"):
        for pattern in getattr(browser, key):
            if not pattern.strip():
                raise error(key, "holds an empty pattern")
    for host in browser.allow_private:
        if not _HOST_PATTERN.fullmatch(host):
            raise error("allow_private", f"{host!r} is not a host pattern (e.g. *.lan)")


def check_connect(browser: BrowserConfig, path: Path, where: str) -> None:
    """Mode connect needs somewhere to connect to."""
    if browser.mode == "connect" and not browser.cdp_url:
        line = line_of(browser, "mode")
        raise ConfigError(f"{path}:{line}: {where}.cdp_url: mode connect needs a cdp_url")


def merged(base: BrowserConfig, own: BrowserConfig | None) -> BrowserConfig:
    """`base` with the keys an agent's own section wrote put over it."""
    if own is None:
        return base
    written = set(getattr(own, "_lines", {})) if hasattr(own, "_lines") else None
    changes = {
        f.name: getattr(own, f.name)
        for f in dataclasses.fields(BrowserConfig)
        if written is None or f.name in written
    }
    return dataclasses.replace(base, **changes)


def url_matches(patterns: list[str], url: str) -> bool:
    """Whether `url` matches one of the shell-style `patterns` (case-insensitive)."""
    lowered = url.lower()
    return any(fnmatch.fnmatchcase(lowered, p.lower()) for p in patterns)


def host_allowed_private(patterns: list[str], host: str) -> bool:
    """Whether a pattern of allow_private names `host` (case-insensitive, [] stripped)."""
    bare = host.lower().strip("[]").rstrip(".")
    return any(fnmatch.fnmatchcase(bare, p.lower().strip("[]")) for p in patterns)
