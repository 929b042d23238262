"""The config file: strict YAML, validated in one pass, defaults applied in one place.

`load_config(home)` reads HOME/config.yaml. Every mistake (unknown key, wrong
type, bad choice, a reference to an undefined provider or agent, a bad
timezone) is a ConfigError whose one-line message names the file, the line and
the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from .config_schema import NodeLoader, line_of
from .errors import ConfigError
from .home import Home

ProviderType = Literal["anthropic", "openai", "responses", "litellm", "mock"]
Mode = Literal["read-only", "ask", "workspace", "full"]
Approvals = Literal["human", "reviewer", "reviewer_then_human"]

KNOWN_TOOLSETS = ("core",)


@dataclass(frozen=True)
class ModelRef:
    """`provider/model`: the model part may itself contain slashes (gateways)."""

    provider: str
    model: str

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        provider, sep, model = text.partition("/")
        if not sep or not provider or not model:
            raise ValueError(f"{text!r} is not PROVIDER/MODEL")
        return cls(provider, model)

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass
class ProviderConfig:
    """One model provider (`providers.NAME`)."""

    type: ProviderType | None = None
    preset: str | None = None
    base_url: str | None = None
    key_env: str | list[str] | None = None
    # mock provider: a script of replies inline or in a YAML/JSON file
    script: list[Any] | None = None
    script_file: str | None = None
    name: str = field(default="", init=False)

    @property
    def key_vars(self) -> list[str]:
        """The key variables, in rotation order."""
        if self.key_env is None:
            return []
        return [self.key_env] if isinstance(self.key_env, str) else list(self.key_env)


@dataclass
class AgentConfig:
    """One agent (`agents.NAME`)."""

    model: str
    fallbacks: list[str] = field(default_factory=list)
    mode: Mode = "workspace"
    workspace: str | None = None
    toolsets: list[str] = field(default_factory=lambda: ["core"])
    approvals: Approvals = "human"
    instructions: str = ""
    max_steps: int = 50
    name: str = field(default="", init=False)
    chain: list[ModelRef] = field(default_factory=list, init=False)
    workspace_path: Path = field(default=Path("."), init=False)


@dataclass
class WorkersConfig:
    """How many jobs of each kind one process runs at once."""

    turns: int = 8
    lease_seconds: float = 30.0


@dataclass
class ToolsConfig:
    """Settings shared by the built-in tools."""

    allow_private_urls: bool = False
    inline_budget: int = 32_000
    exec_timeout_seconds: float = 120.0


@dataclass
class Config:
    """The whole config. Later sections are added here and validated the same way."""

    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    agents: dict[str, AgentConfig] = field(default_factory=dict)
    default_agent: str | None = None
    timezone: str = "UTC"
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    path: Path = field(default=Path("config.yaml"), init=False)

    def agent(self, name: str | None) -> AgentConfig:
        """The named agent, or the default one; ConfigError when unknown."""
        key = name or self.default_agent
        if key is None or key not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ConfigError(f"agent {key!r} is not configured (agents: {known})")
        return self.agents[key]


def load_config(home: Home) -> Config:
    """Read and validate HOME/config.yaml; ConfigError when missing or invalid."""
    path = home.config_path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no config yet; run `habakkuk init` (offline demo) or `habakkuk setup`"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_config(text, path, home)


def parse_config(text: str, path: Path, home: Home) -> Config:
    """Validate config text read from `path`; relative paths resolve against the home."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: invalid YAML: {problem}") from None
    loader = NodeLoader(path)
    if node is None:
        node = yaml.MappingNode("tag:yaml.org,2002:map", [])
    config: Config = loader.load_dataclass(node, Config, "")
    config.path = path
    _resolve(config, home)
    return config


def _resolve(config: Config, home: Home) -> None:
    """Cross-references and derived values, checked after the shape is right."""
    from .presets import apply_preset

    path = config.path
    for name, provider in config.providers.items():
        provider.name = name
        message = apply_preset(provider)
        if message:
            raise ConfigError(f"{path}:{line_of(provider)}: providers.{name}: {message}")
    for name, agent in config.agents.items():
        agent.name = name
        refs = []
        for key, text in [("model", agent.model)] + [
            (f"fallbacks[{i}]", t) for i, t in enumerate(agent.fallbacks)
        ]:
            where = f"{path}:{line_of(agent, key.split('[')[0])}: agents.{name}.{key}"
            try:
                ref = ModelRef.parse(text)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            if ref.provider not in config.providers:
                known = ", ".join(sorted(config.providers)) or "none"
                raise ConfigError(
                    f"{where}: provider {ref.provider!r} is not defined (providers: {known})"
                )
            refs.append(ref)
        agent.chain = refs
        for toolset in agent.toolsets:
            if toolset not in KNOWN_TOOLSETS:
                raise ConfigError(
                    f"{path}:{line_of(agent, 'toolsets')}: agents.{name}.toolsets: "
                    f"unknown toolset {toolset!r} (known: {', '.join(KNOWN_TOOLSETS)})"
                )
        if agent.max_steps < 1:
            raise ConfigError(
                f"{path}:{line_of(agent, 'max_steps')}: agents.{name}.max_steps: must be >= 1"
            )
        workspace = Path(agent.workspace).expanduser() if agent.workspace else None
        if workspace is not None and not workspace.is_absolute():
            workspace = home.root / workspace
        agent.workspace_path = (workspace or home.default_workspace(name)).resolve()
    if config.default_agent is not None and config.default_agent not in config.agents:
        raise ConfigError(
            f"{path}:{line_of(config, 'default_agent')}: default_agent: "
            f"agent {config.default_agent!r} is not defined"
        )
    if config.default_agent is None and config.agents:
        config.default_agent = next(iter(config.agents))
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(config.timezone)
    except (KeyError, ValueError, ModuleNotFoundError, OSError):
        raise ConfigError(
            f"{path}:{line_of(config, 'timezone')}: timezone: unknown time zone "
            f"{config.timezone!r} (use Area/City, e.g. Europe/Paris)"
        ) from None
    if config.workers.turns < 1:
        raise ConfigError(f"{path}:{line_of(config.workers, 'turns')}: workers.turns: must be >= 1")
