"""The runtime's memory with `memory.embeddings`: notes are embedded after a write and
found by meaning; a failing embedding server leaves the word search answering."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from habakkuk.knowledge.memory_types import Provenance
from tests.fakes.model_server import Fail, FakeModelServer

USER = Provenance(by="user")


@pytest.fixture
def server(model_server: FakeModelServer) -> FakeModelServer:
    return model_server


def config_text(server: FakeModelServer) -> str:
    return f"""
providers:
  mock:
    type: mock
  local:
    type: openai
    base_url: {server.base_url}/v1
    key_env: EMBED_KEY
agents:
  main:
    model: mock/scripted
memory:
  embeddings:
    provider: local
    model: embed-fake
"""


async def test_a_saved_note_is_embedded_and_found_by_meaning(
    server: FakeModelServer,
    runtime_factory: Callable[[str], Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMBED_KEY", "k-embed")
    server.same_meaning("car", "automobile")
    runtime = await runtime_factory(config_text(server))
    memory = runtime.memory
    await memory.save("main", "Commute", "Takes the automobile to work.", provenance=USER)
    await memory.save("main", "Garden", "Tomatoes and basil by the shed.", provenance=USER)
    await memory.embed_pending("main")  # what the background pass after the writes does
    assert server.embedding_requests, "the notes were never sent to the embeddings API"
    assert server.embedding_requests[0].api_key == "k-embed"
    hits = await memory.search("main", "car")
    assert [h.note.slug for h in hits] == ["commute"]
    sent = len(server.embedding_requests)
    await memory.reindex("main")
    assert await memory.embed_pending("main") == 0
    assert len(server.embedding_requests) == sent  # unchanged text is never sent again


async def test_an_embedding_failure_leaves_the_word_search_answering(
    server: FakeModelServer,
    runtime_factory: Callable[[str], Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EMBED_KEY", "k-embed")
    runtime = await runtime_factory(config_text(server))
    memory = runtime.memory
    server.fail_embeddings(Fail(status=500), Fail(status=500), Fail(status=500))
    await memory.save("main", "Bike", "A red bicycle in the hall.", provenance=USER)
    assert await memory.embed_pending("main") == 0
    hits = await memory.search("main", "bicycle")
    assert [h.note.slug for h in hits] == ["bike"]
    assert "[bicycle]" in hits[0].snippet
