"""What the A2A tests share: a served config, and a2a-sdk clients of either version."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import AgentCard, AgentInterface, Message, Part, Role, SendMessageRequest

from tests.conftest import mock_config

SCRIPT = """
- match: "tool"
  steps:
    - text: "Before the tool."
      tool_calls: [{name: exec, arguments: {command: "sleep 1"}}]
    - text: "After the tool."
- match: "gate"
  steps:
    - text: "Waiting."
      tool_calls: [{name: exec, arguments: {command: "until [ -e gate ]; do sleep 0.05; done"}}]
    - text: "Through."
- match: "slow"
  steps:
    - tool_calls: [{name: exec, arguments: {command: "sleep 30"}}]
    - text: "never"
- steps:
    - text: "Echo: {input}"
"""


def a2a_config(extra: str = "", script: str = SCRIPT) -> str:
    """One mock agent `main` (full mode), A2A served."""
    return mock_config(script, extra="a2a:\n  serve: true\n" + extra)


def http_client(token: str | None) -> httpx.AsyncClient:
    """An httpx client carrying the bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(headers=headers, timeout=30)


@contextlib.asynccontextmanager
async def sdk_client(
    url: str, token: str | None, version: str, *, streaming: bool = False, path: str = ""
) -> AsyncIterator[tuple[Client, AgentCard]]:
    """The a2a-sdk client for the card at `url`, on the interface of `version` only."""
    http = http_client(token)
    try:
        yield await _connect(http, url, version, streaming, path)
    finally:
        await http.aclose()


async def _connect(
    http: httpx.AsyncClient, url: str, version: str, streaming: bool, path: str
) -> tuple[Client, AgentCard]:
    card = await A2ACardResolver(http, url).get_agent_card(relative_card_path=path or None)
    chosen = [i for i in card.supported_interfaces if i.protocol_version.startswith(version)]
    assert chosen, card
    del card.supported_interfaces[:]
    card.supported_interfaces.append(AgentInterface(**_interface(chosen[0])))
    config = ClientConfig(streaming=streaming, httpx_client=http)
    return ClientFactory(config).create(card), card


def _interface(interface: AgentInterface) -> dict[str, Any]:
    return {
        "url": interface.url,
        "protocol_binding": interface.protocol_binding,
        "protocol_version": interface.protocol_version,
    }


def user_message(text: str, message_id: str, context_id: str = "") -> SendMessageRequest:
    """A SendMessageRequest holding one user text part."""
    message = Message(
        message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)], context_id=context_id
    )
    return SendMessageRequest(message=message)
