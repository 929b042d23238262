"""What the two logins share: a device code to show, the session a call uses, the clock."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]
KINDS = ("chatgpt", "copilot")


@dataclass(frozen=True)
class DeviceCode:
    """What the person types where: the code, the page, and how to wait for them."""

    user_code: str
    url: str
    poll_id: str  # the service's handle on this sign-in (device_auth_id, device_code)
    interval: float
    deadline: float  # epoch seconds


@dataclass(frozen=True)
class Session:
    """How a model call uses a login: the bearer token, where to send it, what headers."""

    token: str
    base_url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Described:
    """What `habakkuk auth status` says of a login (never a token)."""

    who: str  # the account's name or e-mail ("" when unknown)
    expires_at: float  # the usable token's expiry (0: none yet)
    detail: str = ""  # plan, endpoint...


class Service(Protocol):
    """One subscription's sign-in and token wires (chatgpt.py, copilot.py)."""

    kind: str

    async def start(self) -> DeviceCode:
        """Ask for a device code."""
        ...

    async def finish(self, code: DeviceCode, sleep: Sleep) -> dict[str, Any]:
        """Wait until the person approved `code`; the login record to store."""
        ...

    async def refresh(self, record: dict[str, Any]) -> dict[str, Any]:
        """A record with a fresh usable token (LoginRefused, LoginUnreachable)."""
        ...

    def expires_at(self, record: dict[str, Any]) -> float:
        """When the record's usable token expires (0: it has none)."""
        ...

    def session(self, record: dict[str, Any]) -> Session:
        """The call's token, URL and headers from a fresh record."""
        ...

    def describe(self, record: dict[str, Any]) -> Described:
        """The record for `auth status`."""
        ...


def now() -> float:
    """Epoch seconds (the expiries in auth.json are epoch seconds)."""
    return time.time()


def number(value: Any, default: float) -> float:
    """A number the service may send as a number or a string ("5")."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return default
