"""Strict config: each kind of mistake gets one line naming file, line and key."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from habakkuk.engine.config import Config, ModelRef, load_config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Environment, Home

GOOD = """
providers:
  demo: {type: mock}
  openrouter: {}
  local: {preset: ollama}
agents:
  main:
    model: demo/echo
    fallbacks: [openrouter/anthropic/claude-sonnet-4-5]
    mode: full
    workspace: work
timezone: Europe/Paris
"""


AGENT_D = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


def parse(text: str, tmp_path: Path) -> Config:
    return parse_config(textwrap.dedent(text), tmp_path / "config.yaml", Home(tmp_path))


def test_valid_config_applies_defaults_presets_and_resolves_paths(tmp_path: Path) -> None:
    config = parse(GOOD, tmp_path)
    main = config.agents["main"]
    assert main.chain == [
        ModelRef("demo", "echo"),
        ModelRef("openrouter", "anthropic/claude-sonnet-4-5"),
    ]
    assert main.toolsets == ["core", "media", "memory", "skills", "schedule", "delegate", "board"]
    assert main.approvals == "human"
    assert main.workspace_path == (tmp_path / "work").resolve()
    assert config.default_agent == "main"
    assert config.providers["openrouter"].type == "openai"
    assert config.providers["openrouter"].key_vars == ["OPENROUTER_API_KEY"]
    assert config.providers["local"].base_url == "http://127.0.0.1:11434/v1"
    assert config.workers.turns == 8


def test_a_config_that_lists_toolsets_gets_exactly_that_list(tmp_path: Path) -> None:
    config = parse(AGENT_D + "    toolsets: [core]\n", tmp_path)
    assert config.agents["main"].toolsets == ["core"]
    config = parse(AGENT_D + "    toolsets: [memory]\n", tmp_path)
    assert config.agents["main"].toolsets == ["memory"]


def test_config_mcp_servers_join_the_default_toolsets_and_a_listed_list_stays_exact(
    tmp_path: Path,
) -> None:
    from habakkuk.engine.toolsets import DEFAULT_TOOLSETS

    servers = "mcp_servers:\n  files: {command: files-server}\n  web: {url: https://h/mcp}\n"
    agents = (
        '  listed:\n    model: d/x\n    toolsets: [core, "mcp:web"]\n'
        "  same:\n    model: d/x\n"
        "    toolsets: [core, media, memory, skills, schedule, delegate, board]\n"
    )
    config = parse(AGENT_D + agents + servers, tmp_path)
    assert config.agents["main"].toolsets == [*DEFAULT_TOOLSETS, "mcp:files", "mcp:web"]
    assert config.agents["listed"].toolsets == ["core", "mcp:web"]
    # A list written out, even the default's, is exactly that list: no server joins it.
    assert config.agents["same"].toolsets == list(DEFAULT_TOOLSETS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "agents:\n  main:\n    model: demo/x\n    modee: full\n",
            "config.yaml:4: agents.main.modee: unknown key",
        ),
        (
            "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: nope/x\n",
            "config.yaml:5: agents.main.model: provider 'nope' is not defined",
        ),
        (
            "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n    mode: yolo\n",
            "config.yaml:6: agents.main.mode: must be one of read-only, ask, workspace, full",
        ),
        ("workers:\n  turns: lots\n", "config.yaml:2: workers.turns: must be an integer"),
        ("timezone: Mars/Base\n", "config.yaml:1: timezone: unknown time zone 'Mars/Base'"),
        ("agents: [\n", "config.yaml:2: invalid YAML"),
        (
            "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: justamodel\n",
            "config.yaml:5: agents.main.model: 'justamodel' is not PROVIDER/MODEL",
        ),
        (
            AGENT_D + "    fallbacks: [e/y]\n",
            "config.yaml:6: agents.main.fallbacks[0]: provider 'e' is not defined",
        ),
        ("providers:\n  d: {type: magic}\n", "config.yaml:2: providers.d.type: must be one of"),
        ("providers:\n  d: {preset: nowhere}\n", "config.yaml:2: providers.d: unknown preset"),
        ("agents:\n  main: {}\n", "config.yaml:2: agents.main.model: is required"),
        ("default_agent: ghost\n", "config.yaml:1: default_agent: agent 'ghost' is not defined"),
        (
            AGENT_D + "    toolsets: [weird]\n",
            "config.yaml:6: agents.main.toolsets: unknown toolset 'weird'",
        ),
    ],
)
def test_each_mistake_names_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text, tmp_path)
    text_of_error = str(caught.value)
    assert message in text_of_error
    assert "\n" not in text_of_error


def test_missing_config_says_how_to_create_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="habakkuk init"):
        load_config(Home(tmp_path))


def test_process_environment_wins_over_env_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text('export A_KEY="from-file"\nB_KEY=file-only\n# comment\nnot a line\n')
    monkeypatch.setenv("A_KEY", "from-process")
    env = Environment(env_file)
    assert env.get("A_KEY") == "from-process"
    assert env.get("B_KEY") == "file-only"
    assert env.get("MISSING") is None


@pytest.mark.parametrize(
    "text",
    ["agents:\n  main:\n    model: demo/x\n    modee: full\n", "timezone: [\n"],
)
def test_cli_reports_config_errors_in_one_line_with_exit_code_2(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.yaml").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", "run", "hi"],
        capture_output=True,
        text=True,
        env={"HABAKKUK_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("habakkuk: ") and "config.yaml:" in lines[0]
    assert "Traceback" not in result.stderr


def test_a_bare_off_means_the_word_not_false(tmp_path: Path) -> None:
    # YAML 1.1 reads unquoted off as a boolean; every setting whose value may be "off"
    # takes the word as written, whether its type is a choice or a string.
    config = parse(
        """
        providers: {demo: {type: mock}}
        agents: {main: {model: demo/echo, thinking: off}}
        skills: {curate: off}
        memory: {nightly: off}
        """,
        tmp_path,
    )
    assert config.agents["main"].thinking == "off"
    assert config.skills.curate == "off"
    assert config.memory.nightly == "off"


def test_the_readme_names_the_default_toolsets_the_code_gives() -> None:
    from habakkuk.engine.toolsets import DEFAULT_TOOLSETS

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    start = readme.index("An agent without `toolsets:` gets the default:")
    sentence = readme[start : readme.index(" plus ", start)]
    named = [word.strip("`,") for word in sentence.split() if word.startswith("`")][1:]
    assert named == list(DEFAULT_TOOLSETS)
