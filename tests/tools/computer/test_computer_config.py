"""`agents.NAME.computer` is validated like every section, and the toolsets `computer`
and `computer-open` are offered only to agents that list them."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.toolsets import DEFAULT_TOOLSETS
from tests.conftest import mock_config

AGENT = mock_config()


def load(home: Home, extra: str) -> object:
    return parse_config(AGENT + extra, home.config_path, home)


def test_the_computer_settings_default_and_are_read(home: Home) -> None:
    config = parse_config(
        AGENT
        + "    toolsets: [core, computer, computer-open]\n"
        + "    computer:\n      backend: linux\n      max_actions: 20\n"
        + "      confirm_apps: [1Password, Terminal]\n",
        home.config_path,
        home,
    )
    computer = config.agents["main"].computer
    assert (computer.backend, computer.max_actions) == ("linux", 20)
    assert computer.confirm_apps == ["1Password", "Terminal"]
    assert (computer.display, computer.screen) == (99, (1280, 800))
    assert "computer" not in DEFAULT_TOOLSETS and "computer-open" not in DEFAULT_TOOLSETS
    plain = parse_config(AGENT, home.config_path, home)
    assert "computer" not in plain.agents["main"].toolsets


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("      backend: windows\n", "computer.backend: must be one of xvfb, linux, macos"),
        ("      size: 1280\n", "computer.size: must be WIDTHxHEIGHT"),
        ("      size: 99999x100\n", "computer.size: must be WIDTHxHEIGHT"),
        ("      max_actions: 0\n", "computer.max_actions: must be at least 1"),
        ("      display: -1\n", "computer.display: must be an X display number"),
        ("      confirm_apps: ['  ']\n", "computer.confirm_apps: entry 0 is empty"),
        ("      screen: 1x1\n", "computer.screen: unknown key"),
    ],
)
def test_each_mistake_names_the_file_line_and_key(home: Home, lines: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(home, "    computer:\n" + lines)
    assert str(caught.value).startswith(f"{home.config_path}:9: agents.main.")


def test_doctor_says_which_programs_a_computer_agent_is_missing(home: Home, tmp_path: Path) -> None:
    from habakkuk.services.doctor_computer import computer_checks

    config = parse_config(
        AGENT + "    toolsets: [core, computer]\n"
        "  other:\n    model: mock/scripted\n"
        "  desk:\n    model: mock/scripted\n    toolsets: [computer-open]\n"
        "    computer:\n      backend: linux\n",
        home.config_path,
        home,
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("xdotool", "scrot"):
        (bin_dir / program).write_text("#!/bin/sh\n")
        (bin_dir / program).chmod(0o755)
    checks = computer_checks(config, {"PATH": str(bin_dir), "DISPLAY": ":0"})
    assert checks == [
        ("FAIL", "computer (main)",
         "backend xvfb is missing Xvfb (install xvfb)"),
        ("ok", "computer (desk)", "backend x11: xdotool, scrot"),
    ]  # fmt: skip
    wayland = computer_checks(config, {"PATH": str(bin_dir), "WAYLAND_DISPLAY": "wayland-0"})
    assert wayland[1] == (
        "FAIL", "computer (desk)",
        "backend wayland is missing grim, ydotool (install grim, ydotool)",
    )  # fmt: skip
