"""The A2A client of the a2a toolset, on the official a2a-sdk (spec 000 "Agent2Agent").

`to` is a peer under a2a.peers (a base URL or a card URL, headers resolved like MCP
headers, its own timeout) or a URL. A URL goes through the SSRF-guarded session (no
private addresses unless tools.allow_private_urls); a configured peer is the owner's
choice and may be on the LAN. Cards are fetched with A2A-Version: 1.0 (the SDK's card
resolver reads both shapes); the SDK's client factory uses the card's 1.0 JSON-RPC
interface when it offers one and 0.3 otherwise. A send is a blocking message; while the
task still works, tasks/get is polled until the peer's timeout (default 5 minutes).

The SDK (and httpx, protobuf) is imported by the first call: a turn that never calls a
peer never pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from habakkuk.engine.a2a_config import DEFAULT_PEER_TIMEOUT, A2AConfig
from habakkuk.engine.errors import HabakkukError

if TYPE_CHECKING:
    from a2a.client import Client
    from a2a.types.a2a_pb2 import AgentCard, Task

    from habakkuk.engine.home import Environment

CARD_PATH = "/.well-known/agent-card.json"
WORKING = ("submitted", "working")
POLL_FIRST = 0.5
POLL_MAX = 5.0
CONNECT_SLACK = 30.0  # beyond the peer's timeout, for the HTTP exchange itself


class A2AClientError(HabakkukError):
    """A peer could not be reached or answered with an error; the message says why."""


@dataclass(frozen=True)
class Target:
    """Where `to` points: the card's base URL and path, headers, timeout, whether guarded."""

    label: str
    base: str
    card_path: str
    headers: Mapping[str, str]
    timeout: float
    guarded: bool  # a URL the model gave: through the SSRF guard


@dataclass(frozen=True)
class Skill:
    """One skill on a card."""

    id: str
    name: str
    description: str


@dataclass(frozen=True)
class CardInfo:
    """What a2a_discover tells of a card."""

    name: str
    description: str
    skills: tuple[Skill, ...]
    protocol: str  # "1.0" or "0.3"
    url: str
    auth: tuple[str, ...]
    streaming: bool


@dataclass(frozen=True)
class SendResult:
    """What a2a_send tells: the reply, the task's state and ids."""

    reply: str
    state: str
    task_id: str
    context_id: str


def split_card_url(url: str) -> tuple[str, str]:
    """(base, card path) of a base URL or a card URL."""
    parts = urlsplit(url.strip())
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path.endswith(".json"):
        return origin, path
    return origin + path, CARD_PATH


def require_sdk() -> None:
    """A2AClientError naming the extra when the a2a-sdk is not installed."""
    import importlib.util

    if importlib.util.find_spec("a2a") is None or importlib.util.find_spec("httpx") is None:
        raise A2AClientError(
            "the a2a toolset needs the a2a-sdk package: pip install 'habakkuk[a2a]'"
        )


def _state_word(state: int) -> str:
    from a2a.types.a2a_pb2 import TaskState

    return TaskState.Name(state).removeprefix("TASK_STATE_").lower()


class A2APeers:
    """The peers of a2a.peers and any URL: discover their cards and send them messages."""

    def __init__(
        self, config: A2AConfig | None, env: Environment | None, *, allow_private: bool = False
    ):
        self.config = config or A2AConfig()
        self.env = env
        self.allow_private = allow_private

    def target(self, to: str) -> Target:
        """The peer named `to`, or the URL `to`; A2AClientError otherwise."""
        to = to.strip()
        peer = self.config.peers.get(to)
        if peer is not None:
            base, path = split_card_url(peer.url)
            return Target(
                to, base, path, self._headers(to, peer.headers), peer.timeout_seconds, guarded=False
            )
        parts = urlsplit(to)
        if parts.scheme in ("http", "https") and parts.netloc:
            base, path = split_card_url(to)
            return Target(to, base, path, {}, DEFAULT_PEER_TIMEOUT, guarded=True)
        known = ", ".join(sorted(self.config.peers)) or "none configured"
        raise A2AClientError(f"{to!r} is neither a peer under a2a.peers ({known}) nor a URL")

    def _headers(self, peer: str, headers: Mapping[str, str]) -> dict[str, str]:
        values: dict[str, str] = {}
        for header, variable in headers.items():
            value = self.env.get(variable) if self.env is not None else None
            if value is None:
                raise A2AClientError(
                    f"a2a.peers.{peer}: variable {variable} (for header {header}) is not set;"
                    " put it in the environment or .env"
                )
            values[header] = value
        return values

    @contextlib.asynccontextmanager
    async def _http(self, target: Target) -> AsyncIterator[Any]:
        import httpx

        from habakkuk.tools.netguard import guarded_session

        from .transport import SessionTransport

        allow_private = self.allow_private or not target.guarded
        session = guarded_session(
            allow_private=allow_private, timeout=target.timeout + CONNECT_SLACK
        )
        client = httpx.AsyncClient(
            transport=SessionTransport(session),
            headers={**target.headers, "A2A-Version": "1.0"},
            timeout=target.timeout + CONNECT_SLACK,
            follow_redirects=True,
        )
        try:
            yield client
        finally:
            await client.aclose()

    async def _card(self, http: Any, target: Target) -> AgentCard:
        from a2a.client import A2ACardResolver

        resolver = A2ACardResolver(http, target.base)
        try:
            return await resolver.get_agent_card(relative_card_path=target.card_path)
        except Exception as exc:  # the SDK's errors, httpx's, the guard's: all say why
            raise A2AClientError(f"{target.label}: cannot read its Agent Card: {exc}") from None

    async def discover(self, to: str) -> CardInfo:
        """The card of `to`: name, skills, protocol, auth."""
        require_sdk()
        target = self.target(to)
        async with self._http(target) as http:
            card = await self._card(http, target)
        return _card_info(card)

    async def send(
        self,
        to: str,
        text: str,
        *,
        context_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SendResult:
        """Send a blocking message; poll the task while it works, up to the timeout."""
        require_sdk()
        from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

        target = self.target(to)
        deadline = time.monotonic() + target.timeout
        message = Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context_id or "",
        )
        if metadata:
            message.metadata.update(dict(metadata))
        async with self._http(target) as http:
            card = await self._card(http, target)
            client = _client(card, http)
            try:
                last: Any = None
                async for event in client.send_message(SendMessageRequest(message=message)):
                    last = event
                if last is None:
                    raise A2AClientError(f"{target.label}: the peer sent no answer")
                if last.HasField("message"):
                    reply = _text(last.message.parts)
                    return SendResult(reply, "completed", "", last.message.context_id)
                task = await self._follow(client, last.task, deadline)
            except A2AClientError:
                raise
            except Exception as exc:  # the SDK's A2AError and transport errors: say why
                raise A2AClientError(f"{target.label}: {exc}") from None
            finally:
                await client.close()
        return SendResult(_reply(task), _state_word(task.status.state), task.id, task.context_id)

    async def _follow(self, client: Client, task: Task, deadline: float) -> Task:
        from a2a.types.a2a_pb2 import GetTaskRequest

        pause = POLL_FIRST
        while _state_word(task.status.state) in WORKING and time.monotonic() < deadline:
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, POLL_MAX)
            task = await client.get_task(GetTaskRequest(id=task.id))
        return task


def _client(card: AgentCard, http: Any) -> Client:
    from a2a.client import ClientConfig, ClientFactory

    return ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)


def _text(parts: Any) -> str:
    import json

    from google.protobuf.json_format import MessageToDict

    pieces = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        elif kind == "url":
            pieces.append(f"[file {part.filename or ''}: {part.url}]".replace("file :", "file:"))
        elif kind == "raw":
            pieces.append(f"[file {part.filename or 'attachment'} ({len(part.raw)} bytes)]")
    return "\n".join(pieces)


def _reply(task: Task) -> str:
    """The artifacts' text, else the last agent message's, else the status message's."""
    from a2a.types.a2a_pb2 import Role

    texts = [_text(artifact.parts) for artifact in task.artifacts]
    if any(texts):
        return "\n\n".join(t for t in texts if t)
    for message in reversed(task.history):
        if message.role == Role.ROLE_AGENT and _text(message.parts):
            return _text(message.parts)
    if task.status.HasField("message"):
        return _text(task.status.message.parts)
    return ""


def _card_info(card: AgentCard) -> CardInfo:
    interfaces = list(card.supported_interfaces)
    chosen = next((i for i in interfaces if i.protocol_version.startswith("1")), None)
    chosen = chosen or (interfaces[0] if interfaces else None)
    protocol = "1.0" if chosen is not None and chosen.protocol_version.startswith("1") else "0.3"
    auth = []
    for name, scheme in card.security_schemes.items():
        kind = scheme.WhichOneof("scheme") or "unknown"
        if kind == "http_auth_security_scheme":
            kind = f"http {scheme.http_auth_security_scheme.scheme}".strip()
        auth.append(f"{name} ({kind.removesuffix('_security_scheme')})")
    return CardInfo(
        name=card.name,
        description=card.description,
        skills=tuple(Skill(s.id, s.name, s.description) for s in card.skills),
        protocol=protocol,
        url=chosen.url if chosen is not None else "",
        auth=tuple(auth),
        streaming=card.capabilities.streaming,
    )
