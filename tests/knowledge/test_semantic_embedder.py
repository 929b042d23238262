"""The embedder against the fake model server's /v1/embeddings, through the real SDK."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import numpy as np
import pytest

from habakkuk.engine.config import ProviderConfig
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.presets import ProviderType
from habakkuk.knowledge.embeddings import BATCH_SIZE, PAUSE_SECONDS, Embedder
from tests.fakes.model_server import Fail, FakeModelServer, fake_embedding

KEY = "sk-embed-secret-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def provider(server: FakeModelServer, type_: ProviderType = "openai") -> ProviderConfig:
    config = ProviderConfig(type=type_, base_url=f"{server.base_url}/v1")
    config.name = "local"
    return config


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


@pytest.fixture
async def embedder(server: FakeModelServer) -> AsyncIterator[tuple[Embedder, Clock]]:
    clock = Clock()
    emb = Embedder(provider(server), "embed-fake", lambda: KEY, clock=clock)
    yield emb, clock
    await emb.aclose()


async def test_embed_returns_the_servers_unit_vectors_in_order(
    server: FakeModelServer, embedder: tuple[Embedder, Clock]
) -> None:
    emb, _ = embedder
    vectors = await emb.embed(["coffee with oat milk", "train times"])
    assert vectors is not None
    for text, vector in zip(["coffee with oat milk", "train times"], vectors, strict=True):
        expected = np.asarray(fake_embedding(text, "embed-fake", 256), dtype=np.float32)
        assert vector.dtype == np.float32
        assert np.allclose(vector, expected, atol=1e-6)
    assert server.embedding_requests[0].api_key == KEY


async def test_embed_sends_batches_of_64(
    server: FakeModelServer, embedder: tuple[Embedder, Clock]
) -> None:
    emb, _ = embedder
    texts = [f"note number {i}" for i in range(2 * BATCH_SIZE + 2)]
    vectors = await emb.embed(texts)
    assert vectors is not None and len(vectors) == len(texts)
    sizes = [len(r.json["input"]) for r in server.embedding_requests]
    assert sizes == [64, 64, 2]


async def test_an_error_pauses_embedding_for_a_minute_without_logging_the_key(
    server: FakeModelServer, embedder: tuple[Embedder, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    emb, clock = embedder
    server.fail_embeddings(Fail(401, "auth"))
    with caplog.at_level(logging.WARNING):
        assert await emb.embed(["first"]) is None
    assert emb.paused
    assert "paused for 60 s" in caplog.text and "auth" in caplog.text
    assert KEY not in caplog.text and KEY[-4:] not in caplog.text
    # Paused: no request at all.
    assert await emb.embed(["second"]) is None
    assert len(server.embedding_requests) == 1
    clock.now += PAUSE_SECONDS - 1
    assert await emb.embed(["third"]) is None
    clock.now += 1
    assert not emb.paused
    assert await emb.embed(["fourth"]) is not None
    assert len(server.embedding_requests) == 2


async def test_a_server_error_mid_way_pauses_and_returns_none(
    server: FakeModelServer, embedder: tuple[Embedder, Clock]
) -> None:
    emb, _ = embedder
    server.fail_embeddings(Fail(500))
    assert await emb.embed([f"t{i}" for i in range(BATCH_SIZE + 1)]) is None
    assert emb.paused


async def test_an_unreachable_server_pauses() -> None:
    dead = ProviderConfig(type="openai", base_url="http://127.0.0.1:9/v1")
    dead.name = "dead"
    gone = Embedder(dead, "embed-fake", lambda: KEY, clock=Clock())
    try:
        assert await gone.embed(["x"]) is None
        assert gone.paused
    finally:
        await gone.aclose()


def test_a_provider_not_of_type_openai_is_a_config_error(server: FakeModelServer) -> None:
    with pytest.raises(ConfigError, match=r"memory\.embeddings\.provider: 'local' is of type"):
        Embedder(provider(server, "anthropic"), "m", lambda: KEY)
