"""What the computer never types (or opens): a credential the redactor knows the shape of,
a private key, a configured secret value, a Luhn-valid card number; and what it types."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from habakkuk.engine.computer_config import ComputerConfig
from habakkuk.engine.home import Home
from habakkuk.engine.llm.types import ToolUseBlock
from habakkuk.engine.redact import REDACTOR
from habakkuk.engine.toolkit.registry import ToolRegistry
from habakkuk.tools.computer.desk import Desktops
from habakkuk.tools.computer.safety import typing_refusal
from habakkuk.tools.computer.tools import computer_tools, open_tool
from tests.helpers import tool_context
from tests.knowledge.secrets_corpus import ENV_SECRETS, HARMLESS, SECRETS

# What an agent types into forms and address bars all day: never refused.
TYPED = [
    "https://www.example.com/reservations?party=4&time=19:30",
    "Table for four at 7:30 pm, by the window if possible",
    "alice@example.com",
    "+1 (555) 010-9999",
    "4111 1111 1111 1112",  # sixteen digits that fail the Luhn check: not a card
    "221B Baker Street, London NW1 6XE",
    "restaurants near me open now",
    "ls -la ~/Documents",
    "Order 12345678901 shipped.",
]


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_every_secret_of_the_corpus_is_refused_naming_what_it_is_not_its_value(name: str) -> None:
    text = SECRETS[name]
    why = typing_refusal(text)
    assert why is not None, name
    assert "never type" in why
    assert text not in why


@pytest.mark.parametrize("text", [*HARMLESS, *TYPED])
def test_ordinary_text_is_typed(text: str) -> None:
    assert typing_refusal(text) is None


@pytest.mark.parametrize("card", ["4111111111111111", "5555 5555 5555 4444", "3782-822463-10005"])
def test_luhn_valid_card_numbers_are_refused_however_they_are_spaced(card: str) -> None:
    assert "card" in (typing_refusal(f"pay with {card}") or "")


@pytest.mark.parametrize("value", sorted(ENV_SECRETS.values()))
def test_a_configured_secret_value_is_refused(value: str) -> None:
    assert typing_refusal(f"log in with {value} please", extra_values=[value]) is not None


@pytest.fixture
def configured_secret() -> Iterator[str]:
    """A secret value the process's redactor knows (as the runtime tells it the config's)."""
    before = REDACTOR.values
    REDACTOR.add_values(["orchid-lantern-velvet-42"])
    yield "orchid-lantern-velvet-42"
    REDACTOR.use_values(before)


def registry() -> ToolRegistry:
    def settings(agent: str) -> ComputerConfig:
        return ComputerConfig()

    desktops = Desktops(settings, environ={"PATH": "/nonexistent"})
    tools = ToolRegistry()
    for tool in computer_tools(desktops, settings):
        tools.register(tool, "computer")
    tools.register(open_tool(desktops, settings), "computer-open")
    return tools


async def test_the_tools_refuse_in_full_mode_before_any_desktop_starts(
    tmp_path: Path, configured_secret: str
) -> None:
    tools, ctx = registry(), tool_context(tmp_path, mode="full")
    curl = ["-u", "admin:" + "s3cretpw@", SECRETS["bearer"]]
    calls: list[tuple[str, dict[str, object]]] = [
        ("computer_type", {"text": SECRETS["openai"]}),
        ("computer_type", {"text": "my card: 4111 1111 1111 1111"}),
        ("computer_type", {"text": f"the password is {configured_secret}"}),
        ("computer_type", {"text": SECRETS["rsa pem"]}),
        ("computer_open", {"app": "curl", "args": curl}),
    ]
    for index, (name, args) in enumerate(calls):
        result = await tools.call(ToolUseBlock(f"c{index}", name, args), ctx, {name})
        assert result.is_error and result.text.startswith("refused:"), result.text
        assert configured_secret not in result.text
    assert not (tmp_path / "computer").exists()  # no desktop was started for any of them


async def test_a_sandboxed_agent_is_refused_every_computer_tool(tmp_path: Path) -> None:
    def settings(agent: str) -> ComputerConfig:
        return ComputerConfig()

    desktops = Desktops(settings, environ={"PATH": "/nonexistent"})
    tools = ToolRegistry()
    for tool in computer_tools(desktops, settings, lambda agent: "docker"):
        tools.register(tool, "computer")
    ctx = tool_context(tmp_path, mode="full")
    for name in ("computer_screenshot", "computer_cursor", "computer_wait"):
        args = {"seconds": 0.01} if name == "computer_wait" else {}
        result = await tools.call(ToolUseBlock(name, name, args), ctx, {name})
        assert result.is_error and "run in a docker sandbox" in result.text, result.text
    assert desktops.started("main") is None


def test_the_registered_tools_read_the_agents_sandbox(home: Home) -> None:
    from habakkuk.engine.config import parse_config
    from habakkuk.tools.computer import register_computer
    from tests.conftest import mock_config

    config = parse_config(mock_config(), home.config_path, home)
    config.agents["main"].sandbox = "ssh"
    tools = ToolRegistry()
    register_computer(tools, config)
    tool = tools.get("computer_click")
    assert tool is not None
    assert "ssh sandbox" in (tool.refuse({"x": 1, "y": 1}, tool_context(home.root)) or "")
