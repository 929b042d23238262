"""`browser:` in config.yaml: the top-level section, an agent's own over it, and mistakes
named by file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import Config, load_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.tools.browser.fleet import agent_settings

BASE = """\
providers:
  p: {type: openai, base_url: "http://127.0.0.1:1/v1", key_env: K}
agents:
  main: {model: p/m, toolsets: [core, browser]}
  shopper:
    model: p/m
    browser:
      allowed_urls: ["https://shop.example/*"]
      headless: false
"""


def _load(tmp_path: Path, text: str) -> Config:
    home = Home(tmp_path)
    (tmp_path / "config.yaml").write_text(text)
    return load_config(home)


def test_an_agent_browser_section_overrides_only_the_keys_it_writes(tmp_path: Path) -> None:
    text = (
        BASE
        + "browser:\n  blocked_urls: ['*/ads/*']\n  allow_private: ['*.lan']\n  headless: true\n"
    )
    config = _load(tmp_path, text)
    settings = agent_settings(config)
    main, shopper = settings("main"), settings("shopper")
    assert main.allow_private == ["*.lan"] and main.allowed_urls == [] and main.headless
    assert shopper.allowed_urls == ["https://shop.example/*"]
    assert shopper.allow_private == ["*.lan"] and shopper.blocked_urls == ["*/ads/*"]
    assert not shopper.headless


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ("browser:\n  colour: red\n", "browser.colour: unknown key"),
        ("browser:\n  mode: connect\n", "mode connect needs a cdp_url"),
        ("browser:\n  cdp_url: ftp://x\n", "browser.cdp_url"),
        ("browser:\n  idle_timeout: 0\n", "browser.idle_timeout: must be > 0"),
        ("browser:\n  allow_private: ['a b']\n", "is not a host pattern"),
    ],
)
def test_mistakes_name_the_file_line_and_key(tmp_path: Path, section: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        _load(tmp_path, BASE + section)
    assert "config.yaml:" in str(caught.value)


def test_the_browser_toolset_is_known_but_not_a_default(tmp_path: Path) -> None:
    config = _load(tmp_path, BASE)
    agents = config.agents
    assert "browser" in agents["main"].toolsets
    assert "browser" not in agents["shopper"].toolsets
