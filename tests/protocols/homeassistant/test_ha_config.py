"""`homeassistant:` in config.yaml: its values, its defaults, and each mistake named by line."""

from __future__ import annotations

from typing import Any

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.toolsets import DEFAULT_TOOLSETS
from tests.conftest import mock_config

SECTION = """homeassistant:
  url: http://homeassistant.local:8123/
  allow_domains: [light, switch]
  confirm: [lock]
  triggers:
    left_home:
      entity_id: person.*
      from: home
      to: not_home
      cooldown: 2m
      prompt: "{{.Name}} left ({{.From}} -> {{.To}}); data {{.Data.entity_id}}"
"""


def test_the_section_is_read_with_its_defaults_and_triggers(home: Home) -> None:
    config = parse_config(mock_config(extra=SECTION), home.config_path, home)
    section = config.homeassistant
    assert section is not None
    assert section.url == "http://homeassistant.local:8123"
    assert section.websocket_url == "ws://homeassistant.local:8123/api/websocket"
    assert section.token_env == "HOMEASSISTANT_TOKEN"
    trigger = section.triggers["left_home"]
    assert (trigger.name, trigger.event_type, trigger.from_, trigger.to) == (
        "left_home",
        "state_changed",
        "home",
        "not_home",
    )
    assert trigger.cooldown_seconds == 120.0
    off = SECTION.replace("cooldown: 2m", "cooldown: 0s")
    quiet = parse_config(mock_config(extra=off), home.config_path, home).homeassistant
    assert quiet is not None and quiet.triggers["left_home"].cooldown_seconds == 0.0
    # The toolset is known, yet no agent gets it unless it lists it.
    assert "homeassistant" not in DEFAULT_TOOLSETS
    assert "homeassistant" not in config.agents["main"].toolsets


@pytest.mark.parametrize(
    ("section", "line", "needle"),
    [
        ("homeassistant:\n  url: http://ha.local:8123/api\n", 2, "homeassistant.url: is the"),
        ("homeassistant:\n  url: ha.local\n", 2, "homeassistant.url: 'ha.local' is not"),
        ("homeassistant: {}\n", 1, "homeassistant.url: is required"),
        ("homeassistant:\n  url: http://h\n  tokn_env: X\n", 3, "unknown key"),
        ("homeassistant:\n  url: http://h\n  token_env: 'A B'\n", 3, "not an environment"),
        ("homeassistant:\n  url: http://h\n  allow_domains: [Light]\n", 3, "not a domain"),
        (
            "homeassistant:\n  url: http://h\n  allow_domains: [lock]\n  confirm: [lock]\n",
            4,
            "'lock' is also in allow_domains",
        ),
        (
            "homeassistant:\n  url: http://h\n  triggers:\n    t:\n      agent: nobody\n",
            5,
            "homeassistant.triggers.t.agent: agent 'nobody' is not defined",
        ),
        (
            "homeassistant:\n  url: http://h\n  triggers:\n    t:\n      prompt: '{{.Body}}'\n",
            5,
            "{{.Body}} is not a field",
        ),
        (
            "homeassistant:\n  url: http://h\n  triggers:\n    t:\n      cooldown: soon\n",
            5,
            "homeassistant.triggers.t.cooldown",
        ),
        (
            "homeassistant:\n  url: http://h\n  triggers:\n    t:\n      deliver: telegram:1\n",
            5,
            "channel account 'telegram' is not configured",
        ),
        (
            "homeassistant:\n  url: http://h\n  triggers:\n    t:\n      to_state: on\n",
            5,
            "unknown key",
        ),
    ],
)
def test_each_mistake_is_an_error_naming_the_file_line_and_key(
    home: Home, section: str, line: int, needle: str
) -> None:
    text = mock_config(extra=section)
    at = text.splitlines().index(section.splitlines()[0]) + line
    with pytest.raises(ConfigError) as caught:
        parse_config(text, home.config_path, home)
    message = str(caught.value)
    assert f"{home.config_path}:{at}:" in message
    assert needle in message


async def test_an_agent_that_lists_the_toolset_gets_the_three_tools(runtime_factory: Any) -> None:
    text = mock_config().replace("mode: full\n", "mode: full\n    toolsets: [homeassistant]\n")
    runtime = await runtime_factory(text + SECTION)
    toolsets = runtime.config.agents["main"].toolsets
    names = [tool.name for tool in runtime.tools.tools_for(toolsets)]
    assert names == ["ha_call_service", "ha_history", "ha_states"]
    # An agent on the default toolsets is not offered them.
    others = [tool.name for tool in runtime.tools.tools_for(list(DEFAULT_TOOLSETS))]
    assert not [name for name in others if name.startswith("ha_")]
