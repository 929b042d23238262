"""Our client (the a2a toolset's A2APeers) against the a2a-sdk's reference server, both
versions, and against our own server; the SSRF guard; the tools in a turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from habakkuk.engine.a2a_config import A2AConfig, A2APeerConfig
from habakkuk.engine.home import Environment
from habakkuk.protocols.a2a.client import A2AClientError, A2APeers
from tests.helpers import eventually

from .helpers import a2a_config
from .sdk_server import reference_agent

VERSIONS = ["1.0", "0.3"]


def _peers(url: str, *, headers: dict[str, str] | None = None, timeout: float = 300) -> A2APeers:
    peer = A2APeerConfig(url=url, headers=headers or {})
    peer.name = "ref"
    peer.timeout_seconds = timeout
    return A2APeers(
        A2AConfig(peers={"ref": peer}), Environment(overrides={"PEER_AUTH": "Bearer s3"})
    )


@pytest.mark.parametrize("version", VERSIONS)
async def test_discover_reads_the_reference_agents_card(version: str) -> None:
    async with reference_agent(version) as ref:
        info = await _peers(ref.url).discover("ref")
    assert info.name == "Reference"
    assert info.protocol == version
    assert info.url == ref.url + "/rpc"
    assert [(s.id, s.description) for s in info.skills] == [("echo", "Says it back")]


@pytest.mark.parametrize("version", VERSIONS)
async def test_send_gets_the_reply_and_continues_the_context(version: str) -> None:
    async with reference_agent(version, token="s3") as ref:
        peers = _peers(ref.url, headers={"Authorization": "PEER_AUTH"})
        first = await peers.send("ref", "hello", metadata={"from": "habakkuk"})
        second = await peers.send("ref", "again", context_id=first.context_id)
    assert first.reply == "peer says: hello" and first.state == "completed"
    assert first.task_id and first.context_id
    assert second.context_id == first.context_id
    assert ref.seen.texts == ["hello", "again"]
    assert ref.seen.metadata[0] == {"from": "habakkuk"}


@pytest.mark.parametrize("version", VERSIONS)
async def test_send_polls_a_task_that_still_works(version: str) -> None:
    async with reference_agent(version) as ref:
        peers = _peers(ref.url)
        sending = asyncio.create_task(peers.send("ref", "slow one"))
        await eventually(lambda: ref.seen.texts == ["slow one"], what="the peer to get it")
        ref.seen.release.set()
        result = await sending
    assert result.state == "completed" and result.reply == "peer says: slow one"


async def test_a_peers_missing_header_variable_is_a_clear_error() -> None:
    peers = _peers("http://127.0.0.1:9", headers={"Authorization": "NOT_SET_ANYWHERE"})
    with pytest.raises(A2AClientError, match="NOT_SET_ANYWHERE"):
        await peers.send("ref", "hi")


async def test_a_wrong_token_is_an_error_result_not_a_crash() -> None:
    async with reference_agent("1.0", token="right") as ref:
        with pytest.raises(A2AClientError, match="ref"):
            await _peers(ref.url).send("ref", "hi")


async def test_a_url_to_a_private_address_is_refused_by_the_guard() -> None:
    async with reference_agent("1.0") as ref:
        guarded = A2APeers(None, None)
        with pytest.raises(A2AClientError, match="refused"):
            await guarded.discover(ref.url)
        allowed = A2APeers(None, None, allow_private=True)
        assert (await allowed.discover(ref.url)).name == "Reference"


async def test_an_unknown_peer_name_is_refused() -> None:
    with pytest.raises(A2AClientError, match="neither a peer"):
        await A2APeers(None, None).discover("nobody")


async def test_our_client_talks_to_our_server_through_an_agent_card_url(serve: Any) -> None:
    served = await serve(a2a_config())
    env = Environment(overrides={"HAB_TOKEN": f"Bearer {served.token}"})
    peer = A2APeerConfig(url=served.url + "/a2a/main", headers={"Authorization": "HAB_TOKEN"})
    peer.name = "self"
    peers = A2APeers(A2AConfig(peers={"self": peer}), env)
    info = await peers.discover("self")
    assert info.name == "main" and info.protocol == "1.0"
    result = await peers.send("self", "hello")
    assert result.reply == "Echo: hello" and result.state == "completed"
    session = await served.runtime.sessions.session(result.context_id)
    assert session.agent == "main"
