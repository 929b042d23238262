"""The a2a section: strict, each mistake naming file, line and key; the served agents."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.a2a_config import served_agents
from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home

BASE = (
    "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n  helper:\n    model: d/x\n"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a2a:\n  serve: true\n", "config.yaml:9: a2a.serve: needs the http section"),
        ("a2a:\n  sever: true\n", "config.yaml:9: a2a.sever: unknown key"),
        ("http: {}\na2a:\n  agents: {ghost: x}\n", "a2a.agents.ghost: is not a configured agent"),
        ("a2a:\n  token_env: not-a-name\n", "config.yaml:9: a2a.token_env:"),
        (
            "a2a:\n  peers:\n    p:\n      url: ftp://x\n",
            "config.yaml:11: a2a.peers.p.url: must be an http:// or https:// URL",
        ),
        (
            "a2a:\n  peers:\n    p:\n      url: https://x\n      headers: {X-Key: 'no such'}\n",
            "a2a.peers.p.headers.X-Key: 'no such' is not a variable",
        ),
        (
            "a2a:\n  peers:\n    p:\n      url: https://x\n      timeout: soon\n",
            "config.yaml:12: a2a.peers.p.timeout:",
        ),
        (
            "a2a:\n  peers:\n    p:\n      url: https://x\n      timeot: 5m\n",
            "config.yaml:12: a2a.peers.p.timeot: unknown key",
        ),
    ],
)
def test_each_a2a_mistake_names_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(BASE + text, tmp_path / "config.yaml", Home(tmp_path))
    assert message in str(caught.value)


def test_peers_take_their_timeout_and_the_served_agents_their_descriptions(
    tmp_path: Path,
) -> None:
    text = BASE + (
        "http: {}\na2a:\n  serve: true\n  agents:\n    helper: Helps.\n"
        "  peers:\n    far:\n      url: https://far.example/a2a\n      timeout: 2m\n"
    )
    config = parse_config(text, tmp_path / "config.yaml", Home(tmp_path))
    assert config.a2a is not None
    assert config.a2a.peers["far"].timeout_seconds == 120
    assert served_agents(config.a2a, config.agents) == {"helper": "Helps."}
    assert list(served_agents(None, config.agents)) == ["helper", "main"]


def test_an_agent_may_list_the_a2a_toolset(tmp_path: Path) -> None:
    text = BASE + "    toolsets: [core, a2a]\n"
    config = parse_config(text, tmp_path / "config.yaml", Home(tmp_path))
    assert config.agents["helper"].toolsets == ["core", "a2a"]
