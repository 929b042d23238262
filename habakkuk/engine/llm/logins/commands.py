"""What `habakkuk auth` does: sign in with a device code, show the logins, sign out.

The words go through `say` (the CLI prints them); the login is written under
auth.json.lock like every refresh, so a running server picks it up at its next call.
Nothing here ever shows a token.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from pathlib import Path

from habakkuk.engine.auth_store import LoginStore
from habakkuk.engine.config import AuthConfig
from habakkuk.engine.i18n import t

from .common import KINDS, Sleep, now
from .services import service

NAMES = {"chatgpt": "ChatGPT", "copilot": "GitHub Copilot"}


async def sign_in(
    kind: str,
    settings: AuthConfig,
    home_root: Path,
    say: Callable[[str], None],
    sleep: Sleep = asyncio.sleep,
) -> None:
    """The device flow of `kind`, the login stored in auth.json."""
    wires = service(kind, settings)
    code = await wires.start()
    say(t("auth.enter_code", service=NAMES[kind], url=code.url, code=code.user_code))
    say(t("auth.waiting"))
    record = await wires.finish(code, sleep)
    store = LoginStore(home_root)
    async with store.locked():
        await asyncio.to_thread(store.put, kind, record)
    who = wires.describe(record).who
    if who:
        say(t("auth.signed_in", service=NAMES[kind], who=who, path=store.path))
    else:
        say(t("auth.signed_in_anonymous", service=NAMES[kind], path=store.path))


def when(epoch: float) -> str:
    """An expiry as the person reads it (UTC, to the minute)."""
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def status_lines(settings: AuthConfig, home_root: Path) -> list[str]:
    """One line per login kind: who, the usable token's expiry, the file."""
    store = LoginStore(home_root)
    lines: list[str] = []
    for kind in KINDS:
        record = store.get(kind)
        if record is None:
            lines.append(t("auth.status_none", kind=kind))
            continue
        described = service(kind, settings).describe(record)
        who = described.who or t("auth.who_unknown")
        if described.expires_at <= 0:
            expiry = t("auth.expiry_none")
        elif described.expires_at <= now():
            expiry = t("auth.expiry_past", when=when(described.expires_at))
        else:
            expiry = t("auth.expiry_future", when=when(described.expires_at))
        lines.append(t("auth.status_line", kind=kind, who=who, expiry=expiry, path=store.path))
    return lines


def signed_in_as(kind: str, settings: AuthConfig, home_root: Path) -> str | None:
    """Who the `kind` login is for (a placeholder when unknown); None: not signed in."""
    record = LoginStore(home_root).get(kind)
    if record is None:
        return None
    return service(kind, settings).describe(record).who or t("auth.who_unknown")


async def sign_out(kinds: list[str], home_root: Path) -> list[str]:
    """Forget the logins of `kinds`; a line for each."""
    store = LoginStore(home_root)
    lines: list[str] = []
    async with store.locked():
        for kind in kinds:
            removed = await asyncio.to_thread(store.remove, kind)
            key = "auth.signed_out" if removed else "auth.was_not_signed_in"
            lines.append(t(key, kind=kind, path=store.path))
    return lines
