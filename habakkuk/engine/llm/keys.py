"""API keys: rotation with per-key cooldowns, and the OS keyring as a last resort.

A provider may list several key variables (`key_env: [A, B]`). The router
asks for a key before every attempt and reports how the call went; a key that
hit a rate limit cools down for the retry-after (or a default), one that
failed authentication or billing for much longer, and the next key in the
list takes over. When every key is cooling down, the one that recovers first
is used (the router's backoff does the waiting).

Keys that `habakkuk setup` stored in the OS keyring (service "habakkuk",
username = the variable name) are read only when neither the environment nor
HOME/.env has the variable. The keyring library is slow to import and may
talk to a desktop service, so callers load it off the event loop.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .provider import ProviderError

log = logging.getLogger(__name__)

KEYRING_SERVICE = "habakkuk"
RATE_LIMIT_COOLDOWN = 30.0  # seconds, when the server gave no retry-after
AUTH_COOLDOWN = 3600.0  # a rejected key will not start working by itself
MAX_COOLDOWN = 3600.0
# Errors that are about the key rather than the model or the service.
KEY_ERRORS = frozenset({"rate_limit", "auth", "billing"})


@dataclass
class _ProviderKeys:
    cursor: int = 0
    until: dict[str, float] = field(default_factory=dict)  # key -> end of its cooldown


class KeyRotation:
    """Chooses a key per provider and keeps each key's cooldown (in memory)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._providers: dict[str, _ProviderKeys] = {}

    def pick(self, provider: str, keys: list[str]) -> str | None:
        """The key to use now: the current one unless it cools down, then the next."""
        if not keys:
            return None
        state = self._providers.setdefault(provider, _ProviderKeys())
        now = self.clock()
        count = len(keys)
        for step in range(count):
            key = keys[(state.cursor + step) % count]
            if state.until.get(key, 0.0) <= now:
                state.cursor = (state.cursor + step) % count
                return key
        # Everything cools down: the first to recover.
        return min(keys, key=lambda k: state.until.get(k, 0.0))

    def report(self, provider: str, key: str | None, error: ProviderError | None) -> None:
        """Record a call's outcome with `key`: key errors start a cooldown."""
        if key is None:
            return
        state = self._providers.setdefault(provider, _ProviderKeys())
        if error is None:
            state.until.pop(key, None)
            return
        if error.error_class not in KEY_ERRORS:
            return
        if error.error_class == "rate_limit":
            seconds = error.retry_after if error.retry_after is not None else RATE_LIMIT_COOLDOWN
        else:
            seconds = AUTH_COOLDOWN
        seconds = min(max(seconds, 1.0), MAX_COOLDOWN)
        state.until[key] = max(state.until.get(key, 0.0), self.clock() + seconds)
        log.info("%s: a key cools down for %.0f s after %s", provider, seconds, error.error_class)

    def cooldown(self, provider: str, key: str) -> float:
        """Seconds until `key` of `provider` may be used again (0 when it may now)."""
        state = self._providers.get(provider)
        if state is None:
            return 0.0
        return max(0.0, state.until.get(key, 0.0) - self.clock())


# -- the OS keyring ------------------------------------------------------------------------


def keyring_backend() -> Any | None:
    """The usable keyring backend, or None (no library, only the fail/null backends, or
    HABAKKUK_NO_KEYRING set, which tests and CI use to keep the desktop keyring out)."""
    if os.environ.get("HABAKKUK_NO_KEYRING"):
        return None
    try:
        import keyring
        from keyring.backends import chainer, fail, null
    except Exception:  # the library is optional at run time and may fail to load
        return None
    try:
        backend = keyring.get_keyring()
    except Exception as exc:
        log.debug("no keyring: %s", exc)
        return None
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return None
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return None
    return backend


def keyring_get(variable: str, backend: Any | None = None) -> str | None:
    """The key stored for `variable`, or None when there is none or no usable keyring."""
    backend = backend if backend is not None else keyring_backend()
    if backend is None:
        return None
    try:
        value = backend.get_password(KEYRING_SERVICE, variable)
    except Exception as exc:  # a locked or broken keyring means "not there"
        log.debug("keyring lookup of %s failed: %s", variable, exc)
        return None
    return str(value) if value else None


def keyring_set(variable: str, value: str, backend: Any | None = None) -> bool:
    """Store a key; False when no usable keyring could take it."""
    backend = backend if backend is not None else keyring_backend()
    if backend is None:
        return False
    try:
        backend.set_password(KEYRING_SERVICE, variable, value)
    except Exception as exc:
        log.debug("keyring store of %s failed: %s", variable, exc)
        return False
    return True
