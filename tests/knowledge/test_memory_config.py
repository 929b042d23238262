"""The `memory:` config section: defaults, validation with file:line, the memory toolset."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home

BASE = """\
providers:
  mock:
    type: mock
  local:
    preset: ollama
agents:
  main:
    model: mock/scripted
    toolsets: [core, memory]
"""


def load(tmp_path: Path, extra: str = "") -> Config:
    home = Home(tmp_path)
    return parse_config(BASE + extra, tmp_path / "config.yaml", home)


def test_defaults(tmp_path: Path) -> None:
    memory = load(tmp_path).memory
    assert memory.embeddings is None and memory.review is False
    assert (memory.review_idle_seconds, memory.review_budget, memory.nightly) == (
        900.0,
        200_000,
        "03:30",
    )
    assert (memory.stale_days, memory.history_days, memory.review_chain) == (365, 90, [])


def test_a_full_section_is_read_and_resolved(tmp_path: Path) -> None:
    memory = load(
        tmp_path,
        "memory:\n  embeddings: {provider: local, model: nomic-embed-text}\n"
        "  review: true\n  review_idle: 90s\n  review_model: mock/cheap\n"
        "  review_budget: 5000\n  nightly: 'off'\n  stale_days: 30\n  history_days: 7\n",
    ).memory
    assert memory.embeddings is not None and memory.embeddings.provider == "local"
    assert memory.review_idle_seconds == 90.0
    assert memory.review_chain[0].model == "cheap" and memory.nightly == "off"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("memory:\n  embeddings: {provider: mock, model: m}\n", ":11: memory.embeddings.provider"),
        ("memory:\n  embeddings: {provider: nope, model: m}\n", "'nope' is not defined"),
        ("memory:\n  review_idle: soon\n", ":11: memory.review_idle"),
        ("memory:\n  review_model: ghost/x\n", ":11: memory.review_model: provider 'ghost'"),
        ("memory:\n  nightly: '25:00'\n", ":11: memory.nightly: '25:00' is not a time"),
        ("memory:\n  review_budget: -1\n", ":11: memory.review_budget"),
        ("memory:\n  stale_days: 0\n", ":11: memory.stale_days"),
        ("memory:\n  reviews: true\n", ":11: memory.reviews: unknown key"),
    ],
)
def test_mistakes_name_the_file_line_and_key(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, extra)
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert text.startswith(str(tmp_path / "config.yaml"))


def test_the_embeddings_provider_must_be_of_type_openai(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match="of type mock; embeddings need a provider of type openai"
    ):
        load(tmp_path, "memory:\n  embeddings: {provider: mock, model: m}\n")


def test_an_unknown_toolset_still_fails_and_lists_memory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"known: core, media, memory"):
        parse_config(
            BASE.replace("[core, memory]", "[core, memry]"), tmp_path / "c.yaml", Home(tmp_path)
        )
