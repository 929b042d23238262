"""`habakkuk --serve --agents a,b` and `serve: {agents: [...]}`: the agents a process
hosts, checked before anything starts."""

from __future__ import annotations

import pytest

from habakkuk.cli import main
from habakkuk.cli.entry import command_word
from habakkuk.cli.serve import hosting
from habakkuk.engine.config import load_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig

AGENTS = """
providers:
  mock: {type: mock}
agents:
  main: {model: mock/x}
  second: {model: mock/y}
"""


@pytest.mark.parametrize(
    "argv", [["--serve", "--agents", "main,ghost"], ["serve", "--agents=ghost"]]
)
def test_an_unknown_agent_to_host_is_one_line_and_exit_2(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    write_config(AGENTS)
    assert main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == ("habakkuk: --agents: agent 'ghost' is not configured (agents: main, second)")


def test_an_unknown_agent_in_serve_agents_names_the_file_and_line(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(AGENTS + "serve:\n  agents: [ghost]\n")
    assert main(["--serve"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.endswith(":7: serve.agents: agent 'ghost' is not configured (agents: main, second)")


def test_agents_without_serve_is_refused_as_usage(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(AGENTS)
    with pytest.raises(SystemExit) as stopped:
        main(["--agents", "main"])
    assert stopped.value.code == 2
    assert "--agents goes with --serve" in capsys.readouterr().err


def test_the_flag_wins_over_the_config_and_none_hosts_every_agent(
    home: Home, write_config: WriteConfig
) -> None:
    write_config(AGENTS + "serve:\n  agents: [second]\n")
    assert hosting(load_config(home), None).serve.agents == ["second"]
    assert hosting(load_config(home), "main, main,second").serve.agents == ["main", "second"]
    write_config(AGENTS)
    assert hosting(load_config(home), None).serve.agents is None
    with pytest.raises(ConfigError, match="names no agent"):
        hosting(load_config(home), ",")


def test_the_value_of_agents_is_not_taken_for_a_command() -> None:
    assert command_word(["--serve", "--agents", "main"]) == ""
    assert command_word(["--agents", "main", "serve"]) == "serve"
    assert command_word(["--agents=main", "serve"]) == "serve"
