"""A memory service on a temporary home with two agents, `main` and `other`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.home import Home
from habakkuk.knowledge.memory_types import Provenance
from habakkuk.knowledge.note_store import SecretValues
from habakkuk.knowledge.service import Memory

TWO_AGENTS = """
providers:
  mock:
    type: mock
agents:
  main:
    model: mock/scripted
  other:
    model: mock/scripted
"""

AGENT = Provenance(by="agent", session="s1", tool="memory_save")
USER = Provenance(by="user")
REVIEW = Provenance(by="review", session="s1")
TAINTED = Provenance(by="agent", session="s2", tool="memory_save", tainted=True)


@pytest.fixture
def config(home: Home) -> Config:
    home.config_path.write_text(TWO_AGENTS, encoding="utf-8")
    return parse_config(TWO_AGENTS, home.config_path, home)


@pytest.fixture
async def open_memory(home: Home, config: Config) -> AsyncIterator[Callable[..., Memory]]:
    """Build services on the test home (closed afterwards); secrets default to none."""
    opened: list[Memory] = []

    def _open(secret_values: SecretValues = lambda: []) -> Memory:
        memory = Memory(home, config, secret_values)
        opened.append(memory)
        return memory

    yield _open
    for memory in opened:
        await memory.close()


@pytest.fixture
def memory(open_memory: Callable[..., Memory]) -> Memory:
    return open_memory()
