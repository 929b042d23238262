"""The runtime builds the memory service, wired to the home's secrets, and closes it."""

from __future__ import annotations

import pytest

from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import Provenance, SecretRefused
from tests.conftest import OpenRuntime, mock_config


async def test_runtime_memory_refuses_a_value_from_the_homes_env(
    runtime_factory: OpenRuntime, home: Home
) -> None:
    home.env_path.write_text("MY_SERVICE_TOKEN=plainwordsbutsecret\n", encoding="utf-8")
    runtime = await runtime_factory(mock_config())
    agent = Provenance(by="agent", session="s")
    with pytest.raises(SecretRefused, match=r"\$MY_SERVICE_TOKEN"):
        await runtime.memory.save("main", "Login", "it is plainwordsbutsecret", provenance=agent)
    saved = await runtime.memory.save("main", "Login", "in the password manager", provenance=agent)
    assert saved.created
    assert [h.note.slug for h in await runtime.memory.search("main", "manager")] == ["login"]
