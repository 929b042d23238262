"""`habakkuk setup`: answers fed through input()/getpass, with the keyring forced off."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from habakkuk.cli import main
from habakkuk.cli.setup import run_setup
from habakkuk.engine.config import ModelRef, load_config
from habakkuk.engine.home import Environment, Home, read_env_file
from habakkuk.engine.llm import keys
from habakkuk.engine.llm.factory import ProviderHub
from habakkuk.services.setup import CHOICES
from tests.fakes.model_server import FakeModelServer
from tests.llm.test_provider_e2e import ThreadedServer


class Answers:
    """Feeds scripted answers to input() and getpass(); records the prompts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answers: list[str], secrets: list[str]):
        self.answers = list(answers)
        self.secrets = list(secrets)
        self.prompts: list[str] = []
        monkeypatch.setattr("builtins.input", self.ask)
        monkeypatch.setattr("getpass.getpass", self.ask_secret)

    def ask(self, prompt: str = "") -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)

    def ask_secret(self, prompt: str = "", stream: Any = None) -> str:
        self.prompts.append(prompt)
        if not self.secrets:
            raise EOFError
        return self.secrets.pop(0)


@pytest.fixture(autouse=True)
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys, "keyring_backend", lambda: None)


@pytest.fixture(autouse=True)
def models(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    """The key check's request goes to the fake model server (the SDKs' own variables)."""
    with ThreadedServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.base_url}/v1")
        yield server


class MemoryKeyring:
    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, user: str) -> str | None:
        return self.values.get((service, user))

    def set_password(self, service: str, user: str, value: str) -> None:
        self.values[(service, user)] = value


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "ws"


def test_anthropic_setup_writes_a_valid_config_and_the_key_to_env_0600(
    home: Home,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home.env_path.write_text("# mine\nOTHER=1\nANTHROPIC_API_KEY=old\n", encoding="utf-8")
    answers = Answers(monkeypatch, ["1", "", str(workspace)], ["sk-ant-new"])
    assert main(["setup"]) == 0
    config = load_config(home)
    agent = config.agent(None)
    assert agent.chain == [ModelRef("anthropic", "claude-sonnet-4-6")]
    assert agent.workspace_path == workspace.resolve()
    assert workspace.is_dir()
    assert config.providers["anthropic"].key_vars == ["ANTHROPIC_API_KEY"]
    env = read_env_file(home.env_path)
    assert env == {"OTHER": "1", "ANTHROPIC_API_KEY": "sk-ant-new"}
    assert home.env_path.read_text(encoding="utf-8").startswith("# mine\n")  # lines kept
    assert stat.S_IMODE(home.env_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.config_path.stat().st_mode) == 0o600
    assert any("hidden" in p for p in answers.prompts)
    out = capsys.readouterr().out
    assert "habakkuk doctor" in out
    assert "sk-ant-new" not in out  # the key is never echoed


def test_setup_keeps_the_old_config_as_bak_and_its_other_settings(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = (
        "providers:\n  demo: {type: mock}\n"
        "agents:\n  helper: {model: demo/echo}\n"
        "timezone: Europe/Paris\n"
    )
    home.config_path.write_text(old, encoding="utf-8")
    Answers(monkeypatch, ["2", "gpt-5-mini", str(workspace)], ["sk-openai"])
    assert main(["setup"]) == 0
    assert (home.root / "config.yaml.bak").read_text(encoding="utf-8") == old
    config = load_config(home)
    assert config.timezone == "Europe/Paris"
    assert set(config.agents) == {"helper", "habakkuk"}
    assert config.default_agent == "habakkuk"
    assert config.agent(None).chain == [ModelRef("openai", "gpt-5-mini")]


def test_compatible_server_setup_without_a_key(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch, models: FakeModelServer
) -> None:
    url = f"{models.base_url}/v1"
    Answers(monkeypatch, ["4", "not a url", url + "/", "llama3.1", str(workspace)], [""])
    assert main(["setup"]) == 0
    assert models.requests[-1].path == "/v1/models"  # the server was tried before saving
    provider = load_config(home).providers["custom"]
    assert provider.base_url == url
    assert provider.key_vars == []
    assert not home.env_path.exists()


def test_offline_demo_asks_for_no_key_and_runs(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = Answers(monkeypatch, [str(len(CHOICES)), "", str(workspace)], [])
    assert main(["setup"]) == 0
    assert not any("key" in p.lower() for p in answers.prompts)
    capsys.readouterr()
    assert main(["run", "--json", "hello"]) == 0
    assert '"status": "done"' in capsys.readouterr().out


def test_a_wrong_provider_number_is_asked_again(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = Answers(monkeypatch, ["9", "x", "2", "", str(workspace)], ["sk-oa"])
    assert main(["setup"]) == 0
    assert sum("Provider number" in p for p in answers.prompts) == 3
    config = load_config(home)
    assert config.providers["openai"].key_vars == ["OPENAI_API_KEY"]
    assert read_env_file(home.env_path) == {"OPENAI_API_KEY": "sk-oa"}


def test_ending_input_writes_nothing(
    home: Home, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    Answers(monkeypatch, ["1"], [])  # EOF at the key prompt
    assert main(["setup"]) == 1
    assert not home.config_path.exists()
    assert not home.env_path.exists()
    err = capsys.readouterr().err
    assert "nothing was written" in err
    assert "Traceback" not in err


def test_key_goes_to_a_usable_keyring_and_the_provider_hub_finds_it(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring = MemoryKeyring()
    monkeypatch.setattr(keys, "keyring_backend", lambda: ring)
    home.env_path.write_text("ANTHROPIC_API_KEY=stale\nKEEP=1\n", encoding="utf-8")
    Answers(monkeypatch, ["1", "", str(workspace)], ["sk-in-ring"])
    # The wizard alone: doctor does not read the keyring yet (see the providers report).
    assert run_setup(home) == 0
    assert ring.values == {("habakkuk", "ANTHROPIC_API_KEY"): "sk-in-ring"}
    # The stale .env line would win over the keyring, so setup removed it.
    assert read_env_file(home.env_path) == {"KEEP": "1"}
    config = load_config(home)
    hub = ProviderHub(config, Environment(home.env_path), home.root)
    assert hub.key(config.agent(None).chain[0]) == "sk-in-ring"


def test_setup_output_is_valid_yaml_with_a_header(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Answers(monkeypatch, [str(len(CHOICES)), "", str(workspace)], [])
    assert main(["setup"]) == 0
    text = home.config_path.read_text(encoding="utf-8")
    assert text.startswith("# Written by `habakkuk setup`")
    assert yaml.safe_load(text)["agents"]["habakkuk"]["model"] == "demo/tour"


def test_a_refused_key_says_why_and_is_asked_again_or_saved_anyway(
    home: Home,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    models: FakeModelServer,
) -> None:
    models.valid_keys = {"sk-ant-good"}
    answers = Answers(monkeypatch, ["1", "n", "", str(workspace)], ["sk-ant-bad", "sk-ant-good"])
    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    assert "the check failed: the key was refused" in out and "the key works" in out
    assert sum("hidden" in p for p in answers.prompts) == 2
    assert read_env_file(home.env_path) == {"ANTHROPIC_API_KEY": "sk-ant-good"}
    assert [r.api_key for r in models.requests] == ["sk-ant-bad", "sk-ant-good"]
    # Saved anyway: the same refusal, then y.
    Answers(monkeypatch, ["2", "y", "", str(workspace)], ["sk-oa-unknown"])
    assert main(["setup"]) == 0
    assert read_env_file(home.env_path)["OPENAI_API_KEY"] == "sk-oa-unknown"
    assert "the key was refused" in capsys.readouterr().out


def test_an_unreachable_server_is_named(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A port nobody listens on: the fake server's, once closed.
    with ThreadedServer() as gone:
        url = f"{gone.base_url}/v1"
    Answers(monkeypatch, ["4", url, "y", "llama3.1", str(workspace)], [""])
    assert main(["setup"]) == 0
    assert f"the check failed: cannot reach {url}" in capsys.readouterr().out


def test_gemini_is_offered_without_an_extra_and_its_key_is_checked(
    home: Home,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    models: FakeModelServer,
) -> None:
    monkeypatch.setattr("habakkuk.services.setup.GEMINI_URL", models.base_url)
    models.valid_keys = {"AIza-good"}
    Answers(monkeypatch, ["5", "n", "", str(workspace)], ["AIza-bad", "AIza-good"])
    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "Gemini" in line)
    assert "pip install" not in line  # the native adapter needs no extra
    assert "the check failed: the key was refused" in out and "the key works" in out
    assert [r.headers.get("x-goog-api-key") for r in models.requests] == ["AIza-bad", "AIza-good"]
    config = load_config(home)
    assert config.agent(None).chain == [ModelRef("gemini", "gemini-2.5-flash")]
    assert (config.providers["gemini"].type, config.providers["gemini"].key_vars) == (
        "gemini",
        ["GEMINI_API_KEY"],
    )
    assert read_env_file(home.env_path) == {"GEMINI_API_KEY": "AIza-good"}


def test_a_demo_home_then_setup_has_the_full_default_toolsets(
    home: Home, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from habakkuk.engine.toolsets import DEFAULT_TOOLSETS

    assert main(["init"]) == 0  # the offline demo's starter config
    assert load_config(home).agent(None).toolsets == list(DEFAULT_TOOLSETS)
    Answers(monkeypatch, ["1", "", str(workspace)], ["sk-ant-new"])
    assert main(["setup"]) == 0
    config = load_config(home)
    assert [str(ref) for ref in config.agent(None).chain] == ["anthropic/claude-sonnet-4-6"]
    assert config.agent(None).toolsets == list(DEFAULT_TOOLSETS)
    assert (
        "toolsets"
        not in yaml.safe_load(home.config_path.read_text(encoding="utf-8"))["agents"]["habakkuk"]
    )


OLD_STARTER = """\
providers:
  demo:
    type: mock
agents:
  habakkuk:
    model: demo/tour                   # PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-6
    mode: workspace                    # read-only | ask | workspace | full
    toolsets: [core, memory]           # files, commands, web; notes about you
"""


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        (OLD_STARTER, None),  # the old starter's pin: setup drops it
        (OLD_STARTER.replace("# files, commands, web; notes about you", ""), ["core", "memory"]),
    ],
    ids=["old-starter-pin", "users-own-list"],
)
def test_setup_drops_the_old_starters_toolsets_pin_and_keeps_a_users_list(
    home: Home,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    written: str,
    kept: list[str] | None,
) -> None:
    from habakkuk.engine.toolsets import DEFAULT_TOOLSETS

    home.config_path.write_text(written, encoding="utf-8")
    Answers(monkeypatch, ["2", "", str(workspace)], ["sk-oa"])
    assert main(["setup"]) == 0
    assert load_config(home).agent(None).toolsets == (kept or list(DEFAULT_TOOLSETS))
    said = "the demo's [core, memory] removed" in capsys.readouterr().out
    assert said == (kept is None)
