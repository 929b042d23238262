"""The model adapters of the logins: Responses at ChatGPT's backend, Chat Completions at
Copilot's, each call with the session the credential handed out (its token as the
request's key, the account header or the endpoint with it).

ChatGPT's subscription backend (https://chatgpt.com/backend-api/codex) is the
Responses API with a few rules of its own: `stream` and `store: false` (the adapter
sends both anyway), `instructions` always present, and no `max_output_tokens` (it is
refused there). Copilot's is OpenAI Chat Completions with the editor headers.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ...config import ProviderConfig
from ..adapters.openai_chat import TIMEOUT_SECONDS, OpenAIChatProvider, build_params
from ..adapters.responses import ResponsesProvider
from ..adapters.sdk_http import sdk_http_client
from ..provider import ProviderError
from ..types import ModelRequest
from .common import Session
from .credential import LoginToken

if TYPE_CHECKING:
    from openai import AsyncOpenAI

CHATGPT_BACKEND = "https://chatgpt.com/backend-api/codex"
# The backend refuses a request without instructions.
DEFAULT_INSTRUCTIONS = "You are a helpful assistant."
KEPT_CLIENTS = 3  # a refresh makes a new client; the old ones' calls may still stream


class SessionClients:
    """One SDK client per session token, the last few kept (older ones closed)."""

    def __init__(self) -> None:
        self._clients: OrderedDict[tuple[str | None, str], AsyncOpenAI] = OrderedDict()

    def get(self, base_url: str | None, session: Session) -> AsyncOpenAI:
        """The client for this URL and session."""
        key = (base_url, session.token)
        client = self._clients.get(key)
        if client is None:
            client = _new_client(base_url, session)
            self._clients[key] = client
            while len(self._clients) > KEPT_CLIENTS:
                _, old = self._clients.popitem(last=False)
                asyncio.get_running_loop().create_task(old.close())
        return client

    async def aclose(self) -> None:
        """Close every client."""
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            await client.close()


def _new_client(base_url: str | None, session: Session) -> AsyncOpenAI:
    """An AsyncOpenAI client as openai_chat.new_client makes it, with the session's headers."""
    import openai

    return openai.AsyncOpenAI(
        api_key=session.token,
        base_url=base_url,
        default_headers=session.headers,
        max_retries=0,
        timeout=TIMEOUT_SECONDS,
        http_client=sdk_http_client(TIMEOUT_SECONDS),
    )


def _session(login: LoginToken, request: ModelRequest, provider: str) -> Session:
    session = login.session_for(request.api_key)
    if session is None:  # called without the router's token (or a stale one)
        raise ProviderError(
            "auth", f"no {login.kind} session for this call: the router gives it", provider=provider
        )
    return session


class ChatGPTProvider(ResponsesProvider):
    """`type: responses` with `auth: chatgpt`."""

    def __init__(self, config: ProviderConfig, login: LoginToken):
        super().__init__(config)
        self.login = login
        self.base_url = config.base_url or CHATGPT_BACKEND
        self.sessions = SessionClients()

    def prepare(self, request: ModelRequest) -> AsyncOpenAI:
        """The client for the session the credential handed out."""
        return self.sessions.get(self.base_url, _session(self.login, request, self.name))

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Responses parameters as the subscription backend takes them."""
        params = super().params(request)
        params.pop("max_output_tokens", None)
        params.setdefault("instructions", DEFAULT_INSTRUCTIONS)
        return params

    def warm(self, api_key: str | None) -> None:
        """Nothing to make ahead: the client needs the session's token."""

    async def aclose(self) -> None:
        """Close the clients."""
        await self.sessions.aclose()


class CopilotProvider(OpenAIChatProvider):
    """`type: openai` with `auth: copilot`."""

    def __init__(self, config: ProviderConfig, login: LoginToken):
        super().__init__(config)
        self.login = login
        self.official = False  # Copilot takes max_tokens
        self.sessions = SessionClients()

    def prepare(self, request: ModelRequest) -> AsyncOpenAI:
        """The client for the endpoint the Copilot token names (or base_url)."""
        session = _session(self.login, request, self.name)
        return self.sessions.get(self.base_url or session.base_url, session)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """Chat Completions parameters (max_tokens)."""
        return build_params(request, official=False)

    def warm(self, api_key: str | None) -> None:
        """Nothing to make ahead: the client needs the session's token."""

    async def aclose(self) -> None:
        """Close the clients."""
        await self.sessions.aclose()


def create(config: ProviderConfig, login: LoginToken) -> ChatGPTProvider | CopilotProvider:
    """The adapter of a login provider."""
    if config.auth == "chatgpt":
        return ChatGPTProvider(config, login)
    return CopilotProvider(config, login)
