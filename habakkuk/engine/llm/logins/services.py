"""The login services of one config: `auth:`'s endpoints, one LoginToken per kind."""

from __future__ import annotations

from pathlib import Path

from habakkuk.engine.auth_store import LoginStore

from ...config import AuthConfig
from ...errors import HabakkukError
from .chatgpt import ChatGPT
from .common import KINDS, Service
from .copilot import Copilot
from .credential import LoginToken


def service(kind: str, settings: AuthConfig) -> Service:
    """The sign-in and token wires of `kind`, at the endpoints config `auth:` names."""
    if kind == "chatgpt":
        return ChatGPT(settings.chatgpt.base_url)
    if kind == "copilot":
        return Copilot(settings.copilot.base_url, settings.copilot.api_url)
    raise HabakkukError.said("auth.unknown_kind", kind=kind, kinds=", ".join(KINDS))


class Logins:
    """The credentials of one process's providers: one LoginToken per kind, shared by
    every provider that signs in with it (so they refresh once)."""

    def __init__(self, settings: AuthConfig, home_root: Path):
        self.settings = settings
        self.store = LoginStore(home_root)
        self._tokens: dict[str, LoginToken] = {}

    def login(self, kind: str) -> LoginToken:
        """The credential of `kind`."""
        found = self._tokens.get(kind)
        if found is None:
            found = LoginToken(service(kind, self.settings), self.store)
            self._tokens[kind] = found
        return found
