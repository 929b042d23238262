"""The config file: strict YAML, validated in one pass, defaults applied in one place.

`load_config(home)` reads HOME/config.yaml. Every mistake (unknown key, wrong
type, bad choice, a reference to an undefined provider or agent, a bad
timezone) is a ConfigError whose one-line message names the file, the line and
the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from .a2a_config import A2AConfig, resolve_a2a
from .browser_config import BrowserConfig, check_connect, merged, resolve_browser
from .budget_config import AgentBudgetConfig, BudgetConfig, check_limits
from .channel_config import ChannelConfig, resolve_channels
from .computer_config import ComputerConfig, check_computer
from .config_schema import NodeLoader, check_hooks, compose_yaml, line_of
from .device_config import NodesConfig, resolve_nodes
from .durations import parse_duration
from .errors import ConfigError
from .home import Home
from .homeassistant_config import HomeAssistantConfig, resolve_homeassistant
from .hook_events import HookEvent  # the events the code fires: the only ones accepted
from .logging_config import LoggingConfig, resolve_logging
from .meeting_config import MeetingConfig, resolve_meeting
from .presets import PRESETS, LoginKind, ProviderType
from .realtime_config import RealtimeConfig, resolve_realtime
from .sandbox_config import DockerConfig, SandboxKind, SshConfig, resolve_sandbox
from .secrets_config import SecretsConfig, resolve_secrets
from .talk_config import TalkConfig, resolve_talk
from .telemetry_config import TelemetryConfig, resolve_telemetry
from .toolsets import (
    DEFAULT_TOOLSETS,
    KNOWN_TOOLSETS,
    MCP_PREFIX,
    OPT_IN_TOOLSETS,
    offer_to_default_agents,
)
from .transcription_config import TranscriptionConfig, resolve_transcription
from .tts_config import TtsConfig, resolve_tts

Mode = Literal["read-only", "ask", "workspace", "full"]
Approvals = Literal["human", "reviewer", "reviewer_then_human"]
# The reasoning effort sent with each model request (/think sets it per session).
Thinking = Literal["off", "low", "medium", "high"]
THINKING_LEVELS: tuple[Thinking, ...] = ("off", "low", "medium", "high")


def thinking_level(value: object) -> Thinking | None:
    """`value` as a thinking level, or None when it is not one (e.g. nothing chosen)."""
    for level in THINKING_LEVELS:
        if value == level:
            return level
    return None


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
    # bedrock: the AWS region (else AWS_REGION, AWS_DEFAULT_REGION, the profile's)
    region: str | None = None
    # A subscription login (`habakkuk auth login KIND`) instead of a key.
    auth: LoginKind | None = None
    name: str = field(default="", init=False)

    @property
    def key_vars(self) -> list[str]:
        """The key variables, in rotation order."""
        if self.key_env is None:
            return []
        return [self.key_env] if isinstance(self.key_env, str) else list(self.key_env)


@dataclass
class ChatGPTAuthConfig:
    """`auth.chatgpt`: where OpenAI's sign-in and token endpoints are."""

    base_url: str = "https://auth.openai.com"


@dataclass
class CopilotAuthConfig:
    """`auth.copilot`: the GitHub server (GitHub Enterprise: its URL) and its REST API
    (default: api.github.com for github.com, else the server's /api/v3)."""

    base_url: str = "https://github.com"
    api_url: str | None = None


@dataclass
class AuthConfig:
    """`auth`: the endpoints of the subscription logins (engine/llm/logins)."""

    chatgpt: ChatGPTAuthConfig = field(default_factory=ChatGPTAuthConfig)
    copilot: CopilotAuthConfig = field(default_factory=CopilotAuthConfig)


@dataclass
class AgentConfig:
    """One agent (`agents.NAME`)."""

    model: str
    fallbacks: list[str] = field(default_factory=list)
    mode: Mode = "workspace"
    workspace: str | None = None
    # Left out: the default (engine/toolsets.py), plus every MCP server's toolset.
    toolsets: list[str] = field(default_factory=lambda: list(DEFAULT_TOOLSETS))
    approvals: Approvals = "human"
    # The approval reviewer's model (PROVIDER/MODEL); default: the agent's own chain.
    reviewer_model: str | None = None
    # The model that titles the agent's sessions after their first turn (PROVIDER/MODEL,
    # or "off"); default: the top-level title_model, else the agent's own chain.
    title_model: str | None = None
    instructions: str = ""
    max_steps: int = 50
    thinking: Thinking = "off"
    # Past this many tool specs the agent gets tool_search instead of them all; -1: never,
    # and every tool is listed, the on-demand ones (toolsets.ON_DEMAND_TOOLS) too.
    tool_search_over: int = 60
    # Compact the context when the last prompt reached this many tokens (-1: never;
    # default: 600000 when the main model's provider is anthropic, else 150000).
    compact_at: int | None = None
    # The provider's hosted web search and fetch, where the model has them (llm/hosted.py).
    web: bool = True
    # The agent's own spending limits (engine/budget_config.py), on top of the install's.
    budget: AgentBudgetConfig = field(default_factory=AgentBudgetConfig)
    # Where exec and background processes run (engine/sandbox_config.py, tools/sandbox).
    sandbox: SandboxKind = "none"
    docker: DockerConfig = field(default_factory=DockerConfig)
    ssh: SshConfig | None = None
    # The agent's own browser settings over the top-level browser: (engine/browser_config.py).
    browser: BrowserConfig | None = None
    # The agent's desktop for the computer toolset (engine/computer_config.py).
    computer: ComputerConfig = field(default_factory=ComputerConfig)
    name: str = field(default="", init=False)
    chain: list[ModelRef] = field(default_factory=list, init=False)
    reviewer_chain: list[ModelRef] = field(default_factory=list, init=False)
    # Resolved title_model: [] when titles are off (engine/agent/titles.py).
    title_chain: list[ModelRef] = field(default_factory=list, init=False)
    workspace_path: Path = field(default=Path("."), init=False)


@dataclass
class WorkersConfig:
    """How many jobs of each kind one process runs at once."""

    turns: int = 8
    # Scheduled runs (prompt turns are turns; scripts run in this pool of their own, so
    # slow scripts never hold up chat turns).
    schedules: int = 2
    # Delegated sub-turns run in a pool of their own, so parents waiting on their
    # children can never take every worker.
    subturns: int = 4
    # Board cards' turns (each is the assignee's turn, run in this pool).
    cards: int = 4
    lease_seconds: float = 30.0


@dataclass
class LimitsConfig:
    """Self-protection of `habakkuk serve` (services/memory_guard.py)."""

    # Past this resident memory (MiB) serve claims no new job, lets running ones finish
    # within grace_seconds (handing back the rest), and exits with EXIT_MEMORY for its
    # supervisor to restart it. 0: off.
    max_rss_mb: int = 0
    grace_seconds: float = 30.0
    check_seconds: float = 2.0  # how often the resident memory is read


@dataclass
class ToolsConfig:
    """Settings shared by the built-in tools."""

    allow_private_urls: bool = False
    inline_budget: int = 32_000
    exec_timeout_seconds: float = 120.0


@dataclass
class MetricsConfig:
    """`http.metrics`: the Prometheus endpoint."""

    public: bool = False  # true: /metrics answers without the API token


@dataclass
class WebhookConfig:
    """One webhook (`http.hooks.NAME`), served at POST /hooks/NAME."""

    prompt: str = "{{.Body}}"  # a template over {{.Body}} and the body's top-level fields
    agent: str | None = None
    secret_env: str | None = None  # HMAC-SHA256 signature or bearer secret; else the API token
    deliver: str | None = None  # ACCOUNT:CONVERSATION; default: web conversation hook-NAME
    name: str = field(default="", init=False)


@dataclass
class HttpConfig:
    """`http`: the HTTP surface (JSON API, dashboard, /v1, webhooks, metrics)."""

    listen: str = "127.0.0.1:8484"
    token_env: str | None = None
    account: str = "web"
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    hooks: dict[str, WebhookConfig] = field(default_factory=dict)
    # the address the world reaches this server at behind a proxy (https://bot.example.org):
    # webhook platforms sign that URL, and fetch files offered under it
    public_url: str | None = None
    host: str = field(default="127.0.0.1", init=False)
    port: int = field(default=8484, init=False)


GenerationProvider = Literal["openai", "gemini", "fal"]
# Per provider: the key variable and the API's base URL when the section names neither.
GENERATION_KEYS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "fal": "FAL_KEY",
}
GENERATION_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com",
    "fal": "https://queue.fal.run",
}
IMAGE_MODELS: dict[str, str] = {
    "openai": "gpt-image-1",
    "gemini": "gemini-2.5-flash-image",
    "fal": "fal-ai/flux/schnell",
}
VIDEO_MODELS: dict[str, str] = {
    "openai": "sora-2",
    "gemini": "veo-3.0-generate-001",
    "fal": "fal-ai/veo3",
}
VIDEO_IMAGE_MODELS: dict[str, str] = {"fal": "fal-ai/veo3/image-to-video"}


@dataclass
class ImagesConfig:
    """`images`: the provider image_generate uses (model, key and URL default per provider)."""

    provider: GenerationProvider
    model: str = ""
    key_env: str = ""
    base_url: str = ""
    size: str = "1024x1024"  # WIDTHxHEIGHT, or auto


@dataclass
class VideoConfig:
    """`video`: the provider video_generate uses; a job is polled until done or `timeout`."""

    provider: GenerationProvider
    model: str = ""
    image_model: str = ""  # fal: the model that starts from an image
    key_env: str = ""
    base_url: str = ""
    size: str = "1280x720"
    seconds: int = 8
    timeout: str | float = "10m"
    # The first wait between two polls; it grows (x1.5) up to 30 s.
    poll_interval: str | float = "5s"
    timeout_seconds: float = field(default=600.0, init=False)
    poll_seconds: float = field(default=5.0, init=False)


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback_host(host: str) -> bool:
    """True for a loopback name or address (localhost, 127.0.0.0/8, ::1)."""
    import ipaddress

    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) into its parts; ValueError when malformed."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"{text!r} is not HOST:PORT")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:8484")
    return host or "0.0.0.0", port


def http_url(http: HttpConfig | None) -> str | None:
    """The resolved http section's own address (a wildcard host as 127.0.0.1); None
    without one."""
    if http is None:
        return None
    host = "127.0.0.1" if http.host in ("0.0.0.0", "::", "") else http.host
    return f"http://[{host}]:{http.port}" if ":" in host else f"http://{host}:{http.port}"


@dataclass
class HookConfig:
    """One hook (`hooks[i]`): a shell command run on an event whose subject matches."""

    event: HookEvent
    command: str
    timeout: float = 10.0
    match: str | None = None
    # Where the command runs (default: the home). A plugin's hooks run in its folder.
    cwd: Path | None = field(default=None, init=False)
    plugin: str = field(default="", init=False)  # the enabled plugin that brought it


McpRisk = Literal["read", "write", "network", "exec"]


@dataclass
class McpServerConfig:
    """One MCP server (`mcp_servers.NAME`): a stdio `command` or a Streamable HTTP `url`."""

    command: str | None = None
    args: list[str] = field(default_factory=list)
    # child variable -> the variable (process env or HOME/.env) holding its value
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    # header -> the variable holding its value
    headers: dict[str, str] = field(default_factory=dict)
    risk: McpRisk = "network"
    approve: list[str] = field(default_factory=list)
    allow: list[str] | None = None
    timeout: float | str = "120s"
    auth: Literal["oauth"] | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    scopes: list[str] | None = None
    callback_port: int | None = None
    name: str = field(default="", init=False)
    timeout_seconds: float = field(default=120.0, init=False)
    # Where a stdio server runs (default: the home's working directory); a plugin's
    # servers run in the plugin's folder (engine/plugin_config.py).
    cwd: Path | None = field(default=None, init=False)


@dataclass
class McpServeConfig:
    """Habakkuk as an MCP server (`mcp_server`)."""

    http: bool = False
    allow_send: bool = False


@dataclass
class PriceConfig:
    """`pricing.MODEL`: US dollars per million tokens (overrides the built-in table).

    The key is a model-id prefix; cache prices default from the input price.
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass
class RetentionConfig:
    """`retention`: how long finished work is kept (0 keeps it forever)."""

    jobs_days: float = 14
    sessions_days: float = 365
    usage_days: float = 400


@dataclass
class StorageConfig:
    """`storage`: where the home's databases live. Without `url`, SQLite files in the
    home; with `url: postgresql://USER@HOST/DB`, that PostgreSQL database, which several
    machines' processes may share (HABAKKUK_DATABASE_URL, when set, wins)."""

    url: str | None = None


@dataclass
class ServeConfig:
    """`serve`: what this process hosts when it serves (`habakkuk --serve`, the app).

    `agents`: the agents whose turns it runs (their folders are on this machine, or on
    a filesystem it shares with the others); None hosts them all. `--agents a,b` on
    `habakkuk --serve` wins over it."""

    agents: list[str] | None = None


@dataclass
class EmbeddingsConfig:
    """`memory.embeddings`: the provider (of type openai) and model semantic search uses."""

    provider: str
    model: str


@dataclass
class MemoryConfig:
    """`memory`: semantic search, the background review, the nightly pass, the history."""

    embeddings: EmbeddingsConfig | None = None
    review: bool = False
    review_idle: str = "15m"
    review_model: str | None = None
    review_budget: int = 200_000  # tokens per agent per day, review and nightly together
    nightly: str = "03:30"  # local time HH:MM, or "off"
    stale_days: int = 365
    history_days: float = 90
    # Derived by _resolve_memory.
    review_idle_seconds: float = field(default=900.0, init=False)
    review_chain: list[ModelRef] = field(default_factory=list, init=False)


SkillsCurate = Literal["off", "daily", "weekly", "monthly"]


@dataclass
class SkillsConfig:
    """`skills`: the curator and where `habakkuk skills install NAME` looks names up."""

    curate: SkillsCurate = "off"
    archive_after_days: float = 90
    # registry name -> the URL of its index (JSON; see knowledge/hub/registry.py)
    registries: dict[str, str] = field(default_factory=dict)


@dataclass
class BoardConfig:
    """`board`: the shared task board's dispatcher."""

    # A card is dispatched at most this many times (each reopen is another attempt);
    # after that an agent cannot reopen it, only the user.
    max_attempts: int = 3
    dispatch_seconds: float = 5.0  # how often the dispatcher looks without being woken


@dataclass
class DelegationConfig:
    """`delegation`: sub-agents handed a task with the delegate tool."""

    # A child still running after this is stopped and reported "timed out" (with its
    # partial output) to a parent waiting on it.
    timeout_seconds: float = 1800.0


SearchProviderName = Literal["brave", "tavily", "exa", "searxng", "duckduckgo"]
# The variable each keyed search provider reads its key from unless key_env names another.
SEARCH_KEY_ENV: dict[str, str] = {
    "brave": "BRAVE_API_KEY",
    "tavily": "TAVILY_API_KEY",
    "exa": "EXA_API_KEY",
}


@dataclass
class SearchConfig:
    """`search`: the provider behind web_search (without the section: DuckDuckGo's HTML
    page, best effort)."""

    provider: SearchProviderName
    url: str | None = None  # the SearXNG instance (searxng only, and required there)
    base_url: str | None = None  # the provider's API address, to point it elsewhere
    key_env: str | None = None  # default per provider (SEARCH_KEY_ENV); none for the rest

    @property
    def key_var(self) -> str | None:
        """The variable holding the key (None for providers that take none)."""
        return self.key_env or SEARCH_KEY_ENV.get(self.provider)


@dataclass(frozen=True)
class PluginCommand:
    """A chat command an enabled plugin brings: a prompt the agent runs as a message, or
    a script (run in the plugin's folder) whose output is the reply."""

    name: str
    plugin: str
    summary: str
    prompt: str | None = None
    script: str | None = None
    folder: Path = Path(".")
    timeout: float = 30.0


@dataclass
class Config:
    """The whole config. Later sections are added here and validated the same way."""

    providers: dict[str, ProviderConfig] = field(default_factory=dict)
    agents: dict[str, AgentConfig] = field(default_factory=dict)
    default_agent: str | None = None
    timezone: str = "UTC"
    # The language Habakkuk's own words are in (engine/i18n): a tag such as fr, pt-BR or
    # fr_CA.UTF-8; "" follows the locale on the CLI and English elsewhere. A channel's own
    # `language:` overrides it for that channel.
    language: str = ""
    # The model that titles sessions after their first turn (PROVIDER/MODEL, or "off");
    # default: each agent's own chain. An agent's own title_model wins.
    title_model: str | None = None
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    mcp_server: McpServeConfig = field(default_factory=McpServeConfig)
    http: HttpConfig | None = None
    channels: dict[str, ChannelConfig] = field(default_factory=dict)
    transcription: TranscriptionConfig | None = None
    hooks: list[HookConfig] = field(default_factory=list)
    # Workspace snapshots before a turn's first change (needs git on PATH).
    checkpoints: bool = True
    checkpoint_max_mb: int = 200
    # Model-id prefix -> price per million tokens, over the built-in table.
    pricing: dict[str, PriceConfig] = field(default_factory=dict)
    # Spending limits of the whole install (engine/budget_config.py).
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    board: BoardConfig = field(default_factory=BoardConfig)
    delegation: DelegationConfig = field(default_factory=DelegationConfig)
    talk: TalkConfig = field(default_factory=TalkConfig)
    meeting: MeetingConfig = field(default_factory=MeetingConfig)
    images: ImagesConfig | None = None
    video: VideoConfig | None = None
    search: SearchConfig | None = None
    tts: TtsConfig | None = None
    realtime: RealtimeConfig | None = None
    homeassistant: HomeAssistantConfig | None = None  # the toolset homeassistant, triggers
    auth: AuthConfig = field(default_factory=AuthConfig)
    telemetry: TelemetryConfig | None = None
    # Device nodes (engine/device_config.py); needs http.
    nodes: NodesConfig | None = None
    a2a: A2AConfig | None = None  # engine/a2a_config.py
    secrets: SecretsConfig = field(default_factory=SecretsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)  # habakkuk.log
    browser: BrowserConfig = field(default_factory=BrowserConfig)  # the browser toolset
    path: Path = field(default=Path("config.yaml"), init=False)
    # Merged in from enabled plugins by load_config (engine/plugin_config.py), never
    # written to config.yaml: their skill folders (shared), commands, and one line per
    # plugin that failed to load (reported by doctor and at start, never fatal).
    plugin_skill_dirs: list[tuple[str, Path]] = field(default_factory=list, init=False)
    plugin_commands: dict[str, PluginCommand] = field(default_factory=dict, init=False)
    plugin_problems: list[str] = field(default_factory=list, init=False)

    def agent(self, name: str | None) -> AgentConfig:
        """The named agent, or the default one; ConfigError when unknown."""
        key = name or self.default_agent
        if not self.agents:
            raise ConfigError(
                f"{self.path}:{line_of(self, 'agents')}: agents: no agent is defined; add one, "
                "e.g. agents: {main: {model: PROVIDER/MODEL}} (see `habakkuk init`)"
            )
        if key is None or key not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ConfigError(f"agent {key!r} is not configured (agents: {known})")
        return self.agents[key]

    def language_of(self, channel: str) -> str:
        """The language tag Habakkuk speaks in `channel` (and a session it starts is
        prompted with): the channel's `language:`, else config.yaml's; "" for neither."""
        found = self.channels.get(channel)
        return (found.language if found is not None else "") or self.language


def load_config(home: Home) -> Config:
    """Read and validate HOME/config.yaml; ConfigError when missing or invalid."""
    from .home import check_home_root, read_text_file
    from .i18n import t

    check_home_root(home.root)
    path = home.config_path
    try:
        text = read_text_file(path)
    except FileNotFoundError:
        raise ConfigError(t("cli.config_missing", path=path)) from None
    except OSError as exc:
        raise ConfigError(t("cli.config_unreadable", path=path, reason=exc.strerror)) from None
    config = parse_config(text, path, home)
    # Enabled plugins join what config.yaml says; their problems are reported, never fatal.
    from .plugin_config import merge_plugins

    merge_plugins(config, home.root, plugin_parts())
    return config


def plugin_parts() -> Any:
    """What engine/plugin_config.py reads plugins with (a ConfigParts)."""
    from .plugin_config import ConfigParts

    return ConfigParts(
        Config, McpServerConfig, HookConfig, PluginCommand, _resolve_mcp, parse_duration
    )


def parse_config(text: str, path: Path, home: Home) -> Config:
    """Validate config text read from `path`; relative paths resolve against the home."""
    node = compose_yaml(text, path)
    if node is None:
        raise ConfigError(
            f"{path}:1: the file is empty (or only comments): it needs providers: and agents:; "
            "`habakkuk init --force` writes a commented starter"
        )
    loader = NodeLoader(path)
    config: Config = loader.load_dataclass(node, Config, "")
    config.path = path
    _resolve(config, home)
    return config


COMPACT_AT_ANTHROPIC = 600_000
COMPACT_AT_DEFAULT = 150_000


def default_compact_at(config: Config, agent: AgentConfig) -> int:
    """The compaction threshold for the agent's main model's provider type."""
    provider = config.providers.get(agent.chain[0].provider) if agent.chain else None
    if provider is not None and provider.type == "anthropic":
        return COMPACT_AT_ANTHROPIC
    return COMPACT_AT_DEFAULT


def resolve_compact_at(config: Config, agent: AgentConfig) -> int:
    """The agent's compact_at in tokens: its setting, else the default; -1 means off."""
    if agent.compact_at is not None:
        return agent.compact_at
    return default_compact_at(config, agent)


_AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def apply_preset(provider: ProviderConfig) -> str | None:
    """Fill type, base URL and key variable from the provider's preset.

    A provider names its preset with `preset:`, or is named after one and sets no
    type. Returns an error message, or None when the provider is complete.
    """
    preset_name = provider.preset
    if preset_name is None and provider.type is None and provider.name in PRESETS:
        preset_name = provider.name
    if preset_name is not None:
        preset = PRESETS.get(preset_name)
        if preset is None:
            return f"unknown preset {preset_name!r} (known: {', '.join(sorted(PRESETS))})"
        if provider.type is None:
            provider.type = preset.type
        if provider.base_url is None:
            provider.base_url = preset.base_url
        if provider.key_env is None:
            provider.key_env = preset.key_env
        if provider.auth is None:
            provider.auth = preset.auth
    if provider.type is None and provider.auth is not None:
        provider.type = LOGIN_TYPES[provider.auth]
    if provider.type is None:
        return f"needs a type ({', '.join(get_args(ProviderType))}) or a preset"
    if provider.region is not None:
        if provider.type != "bedrock":
            return "region: only a bedrock provider takes a region"
        if not _AWS_REGION.fullmatch(provider.region):
            return f"region: {provider.region!r} is not an AWS region (like us-east-1)"
    if provider.auth is not None:
        wanted = LOGIN_TYPES[provider.auth]
        if provider.type != wanted:
            return f"auth: {provider.auth} needs type: {wanted} (not {provider.type})"
        if provider.key_env is not None:
            return f"auth: {provider.auth} signs in with `habakkuk auth login`; drop key_env"
    return None


# The adapter each login's backend speaks.
LOGIN_TYPES: dict[str, ProviderType] = {"chatgpt": "responses", "copilot": "openai"}


def _resolve(config: Config, home: Home) -> None:
    """Cross-references and derived values, checked after the shape is right."""
    path = config.path
    _resolve_mcp(config)
    # Every configured MCP server reaches the agents on the default toolsets, as an
    # enabled plugin's servers do (plugin_config.merge_plugins): a server that is up
    # is never silently out of every agent's reach.
    for server in config.mcp_servers:
        offer_to_default_agents(config.agents.values(), server)
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
        agent.reviewer_chain = list(refs)
        if agent.reviewer_model is not None:
            where = f"{path}:{line_of(agent, 'reviewer_model')}: agents.{name}.reviewer_model"
            try:
                reviewer = ModelRef.parse(agent.reviewer_model)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            if reviewer.provider not in config.providers:
                known = ", ".join(sorted(config.providers)) or "none"
                raise ConfigError(
                    f"{where}: provider {reviewer.provider!r} is not defined (providers: {known})"
                )
            agent.reviewer_chain = [reviewer]
        agent.title_chain = _title_chain(config, agent)
        for toolset in agent.toolsets:
            if toolset.startswith(MCP_PREFIX):
                if toolset.removeprefix(MCP_PREFIX) not in config.mcp_servers:
                    known = ", ".join(sorted(config.mcp_servers)) or "none"
                    raise ConfigError(
                        f"{path}:{line_of(agent, 'toolsets')}: agents.{name}.toolsets: "
                        f"{toolset!r} names an unconfigured MCP server (mcp_servers: {known})"
                    )
            elif toolset not in KNOWN_TOOLSETS and toolset not in OPT_IN_TOOLSETS:
                raise ConfigError(
                    f"{path}:{line_of(agent, 'toolsets')}: agents.{name}.toolsets: "
                    f"unknown toolset {toolset!r} "
                    f"(known: {', '.join(KNOWN_TOOLSETS + OPT_IN_TOOLSETS)}, or mcp:SERVER)"
                )
        if agent.tool_search_over < -1:
            raise ConfigError(
                f"{path}:{line_of(agent, 'tool_search_over')}: agents.{name}.tool_search_over: "
                "must be -1 (off) or a count"
            )
        if agent.compact_at is not None and agent.compact_at != -1 and agent.compact_at < 1000:
            raise ConfigError(
                f"{path}:{line_of(agent, 'compact_at')}: agents.{name}.compact_at: "
                "must be -1 (off) or at least 1000 tokens"
            )
        check_limits(agent.budget, path, f"agents.{name}.budget")
        resolve_sandbox(agent, path)
        check_computer(agent.computer, path, f"agents.{name}.computer")
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
    for model, price in config.pricing.items():
        for part in ("input", "output", "cache_read", "cache_write"):
            value = getattr(price, part)
            # NaN passes `< 0` and would price every call as "unknown": refuse it too
            if value is not None and not (0 <= value < math.inf):
                raise ConfigError(
                    f"{path}:{line_of(price, part)}: pricing.{model}.{part}: must be >= 0"
                    f" and finite, not {value!r}"
                )
    check_limits(config.budget, path, "budget")
    if config.workers.turns < 1:
        raise ConfigError(f"{path}:{line_of(config.workers, 'turns')}: workers.turns: must be >= 1")
    if config.workers.schedules < 1:
        raise ConfigError(
            f"{path}:{line_of(config.workers, 'schedules')}: workers.schedules: must be >= 1"
        )
    for pool in ("subturns", "cards"):
        if getattr(config.workers, pool) < 1:
            raise ConfigError(
                f"{path}:{line_of(config.workers, pool)}: workers.{pool}: must be >= 1"
            )
    for key, least in (("max_rss_mb", 0), ("grace_seconds", 0), ("check_seconds", 0.1)):
        if getattr(config.limits, key) < least:
            where = f"{path}:{line_of(config.limits, key)}: limits.{key}"
            raise ConfigError(f"{where}: must be >= {least:g}")
    if config.board.max_attempts < 1:
        raise ConfigError(
            f"{path}:{line_of(config.board, 'max_attempts')}: board.max_attempts: must be >= 1"
        )
    if config.board.dispatch_seconds <= 0:
        raise ConfigError(
            f"{path}:{line_of(config.board, 'dispatch_seconds')}: board.dispatch_seconds: "
            "must be > 0"
        )
    if config.delegation.timeout_seconds <= 0:
        raise ConfigError(
            f"{path}:{line_of(config.delegation, 'timeout_seconds')}: "
            "delegation.timeout_seconds: must be > 0"
        )
    if config.serve.agents is not None:
        where = f"{path}:{line_of(config.serve, 'agents')}: serve.agents"
        config.serve.agents = hosted_agents(config, config.serve.agents, where)
    _resolve_hooks(config)
    _resolve_memory(config, config.memory)
    _resolve_skills(config, config.skills)
    resolve_talk(config.talk, config.path)
    resolve_meeting(
        config.meeting, config.path, config.providers, lambda text: ModelRef.parse(text).provider
    )
    if config.http is not None:
        _resolve_http(config, config.http)
    _resolve_channels(config)
    _resolve_generation(config)
    if config.search is not None:
        _resolve_search(config, config.search)
    if config.tts is not None:
        resolve_tts(config.tts, path)
    if config.realtime is not None:
        resolve_realtime(config.realtime, path)
    if config.telemetry is not None:
        resolve_telemetry(config.telemetry, path)
    if config.nodes is not None:
        resolve_nodes(config.nodes, path, http_url(config.http))
    if config.homeassistant is not None:
        accounts = set(config.channels) | ({config.http.account} if config.http else set())
        resolve_homeassistant(config.homeassistant, path, agents=config.agents, accounts=accounts)
    if config.a2a is not None:
        resolve_a2a(config.a2a, config.agents, config.http is not None, path)
    resolve_secrets(config.secrets, path, home.root)
    resolve_logging(config.logging, path)
    _resolve_browsers(config)


def hosted_agents(config: Config, names: Sequence[str], where: str) -> list[str]:
    """`names` (serve.agents, or `--agents a,b`) checked against the configured agents,
    duplicates dropped; ConfigError naming `where` for an unknown one or for none."""
    hosted = list(dict.fromkeys(name.strip() for name in names if name.strip()))
    if not hosted:
        raise ConfigError(
            f"{where}: names no agent; name at least one, or leave it out to host all"
        )
    unknown = [name for name in hosted if name not in config.agents]
    if unknown:
        known = ", ".join(sorted(config.agents)) or "none"
        raise ConfigError(f"{where}: agent {unknown[0]!r} is not configured (agents: {known})")
    return hosted


def _title_chain(config: Config, agent: AgentConfig) -> list[ModelRef]:
    """The chain that titles `agent`'s sessions: its title_model, else the top-level
    one, else its own chain; [] for "off". Left unset on a chain whose first model is
    the mock provider's, the default is off: a replayed script has nothing to say about
    the conversation (a title_model naming a mock model still titles, for tests)."""
    path = config.path
    if agent.title_model is not None:
        text, where = (
            agent.title_model,
            f"{path}:{line_of(agent, 'title_model')}: agents.{agent.name}.title_model",
        )
    elif config.title_model is not None:
        text, where = config.title_model, f"{path}:{line_of(config, 'title_model')}: title_model"
    else:
        first = config.providers.get(agent.chain[0].provider) if agent.chain else None
        return [] if first is None or first.type == "mock" else list(agent.chain)
    if text.strip().lower() == "off":
        return []
    try:
        ref = ModelRef.parse(text.strip())
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc} (or off)") from None
    if ref.provider not in config.providers:
        known = ", ".join(sorted(config.providers)) or "none"
        raise ConfigError(f"{where}: provider {ref.provider!r} is not defined (providers: {known})")
    return [ref]


def _resolve_memory(config: Config, memory: MemoryConfig) -> None:
    """The memory section's cross-references: the embeddings provider, the review model."""
    path = config.path

    def where(key: str, section: object = memory) -> str:
        return f"{path}:{line_of(section, key.split('.')[-1])}: memory.{key}"

    try:
        memory.review_idle_seconds = parse_duration(memory.review_idle)
    except ValueError as exc:
        raise ConfigError(f"{where('review_idle')}: {exc}") from None
    if memory.review_model is not None:
        try:
            ref = ModelRef.parse(memory.review_model)
        except ValueError as exc:
            raise ConfigError(f"{where('review_model')}: {exc}") from None
        if ref.provider not in config.providers:
            known = ", ".join(sorted(config.providers)) or "none"
            raise ConfigError(
                f"{where('review_model')}: provider {ref.provider!r} is not defined "
                f"(providers: {known})"
            )
        memory.review_chain = [ref]
    if memory.review_budget < 0:
        raise ConfigError(f"{where('review_budget')}: must be >= 0 (tokens per agent per day)")
    if memory.nightly != "off":
        hours, sep, minutes = memory.nightly.partition(":")
        ok = sep and hours.isdigit() and minutes.isdigit() and len(minutes) == 2
        if not ok or not (0 <= int(hours) <= 23 and 0 <= int(minutes) <= 59):
            raise ConfigError(
                f"{where('nightly')}: {memory.nightly!r} is not a time; use HH:MM (03:30) or off"
            )
    if memory.stale_days < 1:
        raise ConfigError(f"{where('stale_days')}: must be at least 1")
    if memory.history_days < 0:
        raise ConfigError(f"{where('history_days')}: must be >= 0 (0 keeps history forever)")
    embeddings = memory.embeddings
    if embeddings is not None:
        provider = config.providers.get(embeddings.provider)
        if provider is None:
            known = ", ".join(sorted(config.providers)) or "none"
            raise ConfigError(
                f"{where('embeddings.provider', embeddings)}: provider "
                f"{embeddings.provider!r} is not defined (providers: {known})"
            )
        if provider.type != "openai":
            raise ConfigError(
                f"{where('embeddings.provider', embeddings)}: provider {embeddings.provider!r} "
                f"is of type {provider.type}; embeddings need a provider of type openai "
                "(which covers local servers such as preset: ollama)"
            )
        if not embeddings.model.strip():
            raise ConfigError(f"{where('embeddings.model', embeddings)}: is empty")


def _resolve_skills(config: Config, skills: SkillsConfig) -> None:
    """The skills section: the archive age and the registry URLs."""
    path = config.path
    if skills.archive_after_days < 1:
        raise ConfigError(
            f"{path}:{line_of(skills, 'archive_after_days')}: skills.archive_after_days: "
            "must be at least 1"
        )
    for name, url in skills.registries.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", name):
            raise ConfigError(
                f"{path}:{line_of(skills, 'registries')}: skills.registries.{name}: "
                "a registry name is lowercase letters, digits and dashes"
            )
        if not url.startswith(("https://", "http://", "file://")):
            raise ConfigError(
                f"{path}:{line_of(skills, 'registries')}: skills.registries.{name}: "
                f"{url!r} is not an http(s):// or file:// URL"
            )


def _resolve_hooks(config: Config) -> None:
    path = config.path
    if config.checkpoint_max_mb < 1:
        raise ConfigError(
            f"{path}:{line_of(config, 'checkpoint_max_mb')}: checkpoint_max_mb: must be >= 1"
        )
    check_hooks(path, config.hooks)


def _resolve_http(config: Config, http: HttpConfig) -> None:
    path = config.path
    try:
        http.host, http.port = parse_listen(http.listen)
    except ValueError as exc:
        raise ConfigError(f"{path}:{line_of(http, 'listen')}: http.listen: {exc}") from None
    if not http.token_env and not is_loopback_host(http.host):
        raise ConfigError(
            f"{path}:{line_of(http, 'listen')}: http.listen: without http.token_env the "
            f"server only listens on loopback (127.0.0.1, ::1, localhost), not {http.host!r}"
        )
    if http.public_url is not None and not re.fullmatch(
        r"https?://[^/\s]+(/\S*)?", http.public_url
    ):
        raise ConfigError(
            f"{path}:{line_of(http, 'public_url')}: http.public_url: "
            f"{http.public_url!r} is not an http(s) URL"
        )
    for key, value in (("token_env", http.token_env), ("account", http.account)):
        if value is not None and not value.strip():
            raise ConfigError(f"{path}:{line_of(http, key)}: http.{key}: must not be empty")
    for name, hook in http.hooks.items():
        hook.name = name
        where = f"{path}:{line_of(hook)}: http.hooks.{name}"
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigError(f"{where}: a hook name uses letters, digits, - and _ only")
        if hook.agent is not None and hook.agent not in config.agents:
            raise ConfigError(
                f"{path}:{line_of(hook, 'agent')}: http.hooks.{name}.agent: "
                f"agent {hook.agent!r} is not defined"
            )
        if hook.secret_env is not None and not hook.secret_env.strip():
            raise ConfigError(
                f"{path}:{line_of(hook, 'secret_env')}: http.hooks.{name}.secret_env: "
                "must not be empty"
            )
        if hook.deliver is not None:
            account, sep, conversation = hook.deliver.partition(":")
            if not sep or not conversation:
                raise ConfigError(
                    f"{path}:{line_of(hook, 'deliver')}: http.hooks.{name}.deliver: "
                    f"{hook.deliver!r} is not ACCOUNT:CONVERSATION"
                )
            if account != http.account:
                raise ConfigError(
                    f"{path}:{line_of(hook, 'deliver')}: http.hooks.{name}.deliver: "
                    f"channel account {account!r} is not configured (accounts: {http.account})"
                )
        bad = template_problem(hook.prompt)
        if bad:
            raise ConfigError(f"{path}:{line_of(hook, 'prompt')}: http.hooks.{name}.prompt: {bad}")


def template_problem(template: str) -> str:
    """Why a webhook prompt template is malformed, or "" when it is fine.

    Templates substitute `{{.Body}}` (the raw body) and `{{.field}}` (a top-level
    JSON field of the body); nothing else is allowed between braces.
    """
    import re

    for match in re.finditer(r"\{\{(.*?)\}\}", template, re.DOTALL):
        inner = match.group(1).strip()
        if not re.fullmatch(r"\.[A-Za-z_][A-Za-z0-9_-]*", inner):
            return f"{{{{{inner}}}}} is not a field reference like {{{{.Body}}}} or {{{{.title}}}}"
    if "{{" in re.sub(r"\{\{.*?\}\}", "", template, flags=re.DOTALL):
        return "an opened {{ is never closed"
    return ""


def _mcp_error(path: Path, server: McpServerConfig, key: str, message: str) -> ConfigError:
    line = line_of(server, key) if key else line_of(server)
    dotted = f"mcp_servers.{server.name}.{key}" if key else f"mcp_servers.{server.name}"
    return ConfigError(f"{path}:{line}: {dotted}: {message}")


def _resolve_mcp(config: Config) -> None:
    """Check each MCP server entry: one transport, its own keys, named variables."""
    import re

    path = config.path
    for name, server in config.mcp_servers.items():
        server.name = name
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise _mcp_error(path, server, "", "a name may hold only letters, digits, _ and -")
        if (server.command is None) == (server.url is None):
            raise _mcp_error(path, server, "", "give either command (stdio) or url (HTTP)")
        if server.url is not None:
            if not re.match(r"https?://[^/\s]+", server.url):
                raise _mcp_error(path, server, "url", f"{server.url!r} is not an http(s) URL")
            for key in ("args", "env"):
                if getattr(server, key):
                    raise _mcp_error(path, server, key, "only for command (stdio) servers")
        else:
            if not str(server.command).strip():
                raise _mcp_error(path, server, "command", "must not be empty")
            for key in ("headers", "auth", "client_id", "client_secret_env", "scopes"):
                if getattr(server, key):
                    raise _mcp_error(path, server, key, "only for url (Streamable HTTP) servers")
            if server.callback_port is not None:
                raise _mcp_error(
                    path, server, "callback_port", "only for url (Streamable HTTP) servers"
                )
        for key in ("env", "headers"):
            for child, variable in getattr(server, key).items():
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
                    raise _mcp_error(
                        path, server, key, f"{child}: {variable!r} must name a variable"
                    )
        if server.client_secret_env and not server.client_id:
            raise _mcp_error(path, server, "client_secret_env", "needs client_id")
        if server.callback_port is not None and not 0 < server.callback_port < 65536:
            raise _mcp_error(path, server, "callback_port", "must be a port number (1-65535)")
        try:
            server.timeout_seconds = parse_duration(server.timeout)
        except ValueError as exc:
            raise _mcp_error(path, server, "timeout", str(exc)) from None


def _resolve_channels(config: Config) -> None:
    """Check each channel account (habakkuk.engine.channel_config), then the web chat's."""
    path = config.path
    resolve_channels(config.channels, config.agents, path)
    web = config.channels.get(config.http.account) if config.http is not None else None
    if web is not None and web.type != "web":
        raise ConfigError(
            f"{path}:{line_of(web)}: channels.{web.name}: the web chat's account "
            f"(http.account) must be of type web, not {web.type}"
        )
    for channel in config.channels.values():
        if channel.voice_replies != "off" and config.tts is None:
            raise ConfigError(
                f"{path}:{line_of(channel, 'voice_replies')}: channels.{channel.name}."
                f"voice_replies: {channel.voice_replies} needs a tts: section to speak with"
            )
    if config.transcription is not None:
        resolve_transcription(config.transcription, path, config.path.parent)


def _resolve_generation(config: Config) -> None:
    """`images:` and `video:`: the provider's defaults filled in, every value checked."""
    if config.images is not None:
        _resolve_generation_section(config.path, "images", config.images, IMAGE_MODELS)
    if config.video is not None:
        _resolve_generation_section(config.path, "video", config.video, VIDEO_MODELS)


def _resolve_generation_section(
    path: Path, name: str, section: ImagesConfig | VideoConfig, models: dict[str, str]
) -> None:
    def error(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(section, key)}: {name}.{key}: {message}")

    provider = section.provider
    section.model = section.model.strip() or models[provider]
    section.key_env = section.key_env.strip() or GENERATION_KEYS[provider]
    section.base_url = (section.base_url.strip() or GENERATION_URLS[provider]).rstrip("/")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", section.key_env):
        raise error("key_env", f"{section.key_env!r} is not an environment variable name")
    if not re.match(r"https?://[^/\s]+", section.base_url):
        raise error("base_url", f"{section.base_url!r} is not an http(s) URL")
    if not re.fullmatch(r"[1-9][0-9]{1,4}x[1-9][0-9]{1,4}|auto", section.size):
        raise error("size", f"{section.size!r} is not WIDTHxHEIGHT (e.g. 1024x1024) or auto")
    if not isinstance(section, VideoConfig):
        return
    if section.size == "auto":
        raise error("size", "a video needs WIDTHxHEIGHT (e.g. 1280x720)")
    if section.image_model.strip() and provider != "fal":
        raise error("image_model", "only the fal provider uses a separate image model")
    section.image_model = section.image_model.strip() or VIDEO_IMAGE_MODELS.get(provider, "")
    if not 1 <= section.seconds <= 60:
        raise error("seconds", "must be between 1 and 60")
    try:
        section.timeout_seconds = parse_duration(section.timeout)
    except ValueError as exc:
        raise error("timeout", str(exc)) from None
    try:
        section.poll_seconds = parse_duration(section.poll_interval)
    except ValueError as exc:
        raise error("poll_interval", str(exc)) from None


def _resolve_search(config: Config, search: SearchConfig) -> None:
    """The search section: the instance of searxng, addresses that are URLs, a key
    variable only for the providers that take a key."""
    path = config.path

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(search, key)}: search.{key}: {message}")

    provider = search.provider
    if provider == "searxng":
        if search.url is None:
            example = "https://searx.example.org"
            raise fail("provider", f"searxng needs url: its instance's address, e.g. {example}")
        if search.base_url is not None:
            raise fail("base_url", "searxng takes the address of its instance as url")
    elif search.url is not None:
        raise fail("url", f"only for provider searxng (base_url points {provider} elsewhere)")
    for key in ("url", "base_url"):
        value = getattr(search, key)
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise fail(key, f"{value!r} is not an http(s) URL")
    if search.key_env is not None:
        if provider not in SEARCH_KEY_ENV:
            raise fail("key_env", f"{provider} takes no key")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", search.key_env):
            raise fail("key_env", f"{search.key_env!r} must name a variable, e.g. BRAVE_API_KEY")


def _resolve_browsers(config: Config) -> None:
    """The top-level browser section and each agent's own, checked as merged."""
    resolve_browser(config.browser, config.path)
    check_connect(config.browser, config.path, "browser")
    for name, agent in config.agents.items():
        if agent.browser is not None:
            where = f"agents.{name}.browser"
            resolve_browser(agent.browser, config.path, where)
            check_connect(merged(config.browser, agent.browser), config.path, where)
