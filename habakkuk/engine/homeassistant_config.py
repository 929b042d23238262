"""`homeassistant:`: the Home Assistant instance, its domain rules and its triggers.

Spec 000 "Home Assistant". `url` is the instance's base address (without /api), the
long-lived access token is read from `token_env`; `allow_domains` are the service domains
an agent may call, `confirm` those it may call only after a human says yes; `triggers`
start turns from events on Home Assistant's bus (only in `habakkuk serve`). Each mistake
is a ConfigError naming the file, the line and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

DEFAULT_TOKEN_ENV = "HOMEASSISTANT_TOKEN"
DEFAULT_COOLDOWN = "30s"
DEFAULT_PROMPT = (
    "Home Assistant: {{.Name}} ({{.EntityID}}) went from {{.From}} to {{.To}} at {{.Time}}."
)
# The fields a trigger's prompt may name ({{.Data.key}} reads one field of the event's data).
TEMPLATE_FIELDS = ("EventType", "EntityID", "Name", "From", "To", "Time", "Data")
# A Home Assistant domain (light, alarm_control_panel) and an event type (state_changed).
DOMAIN = re.compile(r"[a-z0-9_]{1,64}")
EVENT_TYPE = re.compile(r"[A-Za-z0-9_.-]{1,100}")
TRIGGER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FIELD = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


@dataclass
class HaTriggerConfig:
    """`homeassistant.triggers.NAME`: which events start a turn, and the turn's prompt."""

    agent: str | None = None  # default: the default agent
    event_type: str = "state_changed"
    entity_id: str | None = None  # a pattern, * matching any run of characters
    to: str | None = None
    from_: str | None = field(default=None, metadata={"key": "from"})
    data: dict[str, str] = field(default_factory=dict)  # event data fields, equal as text
    cooldown: str | float = DEFAULT_COOLDOWN
    prompt: str = DEFAULT_PROMPT
    deliver: str | None = None  # ACCOUNT:CONVERSATION; default: the reply stays in the session
    name: str = field(default="", init=False)
    cooldown_seconds: float = field(default=30.0, init=False)


@dataclass
class HomeAssistantConfig:
    """`homeassistant`: where the instance is, its token's variable, the domain rules."""

    url: str
    token_env: str = DEFAULT_TOKEN_ENV
    allow_domains: list[str] = field(default_factory=list)
    confirm: list[str] = field(default_factory=list)
    triggers: dict[str, HaTriggerConfig] = field(default_factory=dict)

    @property
    def websocket_url(self) -> str:
        """The WebSocket API's address (ws:// or wss://, as the base address's scheme)."""
        return re.sub(r"^http", "ws", self.url) + "/api/websocket"


def template_problem(template: str) -> str:
    """Why a trigger's prompt template is malformed, or "" when it is fine."""
    for match in _FIELD.finditer(template):
        inner = match.group(1).strip()
        name = inner.removeprefix(".")
        if name.startswith("Data.") and re.fullmatch(r"Data\.[A-Za-z0-9_-]+", name):
            continue
        if not inner.startswith(".") or name not in TEMPLATE_FIELDS:
            known = ", ".join(f"{{{{.{f}}}}}" for f in TEMPLATE_FIELDS)
            return f"{{{{{inner}}}}} is not a field ({known}, or {{{{.Data.KEY}}}})"
    if "{{" in _FIELD.sub("", template):
        return "an opening {{ has no closing }}"
    return ""


def resolve_homeassistant(
    section: HomeAssistantConfig,
    path: Path,
    *,
    agents: Any,
    accounts: set[str],
) -> None:
    """Check every value and fill in what is derived (ConfigError naming the line).

    `agents`: the configured agents by name; `accounts`: the channel accounts a trigger
    may deliver to (the channels', and the web chat's when http runs)."""

    def error(key: str, message: str, where: Any = section, dotted: str = "") -> ConfigError:
        return ConfigError(
            f"{path}:{line_of(where, key)}: homeassistant.{dotted or key}: {message}"
        )

    url = section.url.strip().rstrip("/")
    if not re.fullmatch(r"https?://[^/\s?#]+(/[^\s?#]*)?", url):
        raise error("url", f"{section.url!r} is not an http(s) URL (the instance's address)")
    if url.endswith("/api"):
        raise error("url", "is the instance's base address, without /api")
    section.url = url
    section.token_env = section.token_env.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", section.token_env):
        raise error("token_env", f"{section.token_env!r} is not an environment variable name")
    for key in ("allow_domains", "confirm"):
        domains: list[str] = getattr(section, key)
        for domain in domains:
            if not DOMAIN.fullmatch(domain):
                raise error(key, f"{domain!r} is not a domain (like light or lock)")
    both = sorted(set(section.allow_domains) & set(section.confirm))
    if both:
        raise error(
            "confirm", f"{both[0]!r} is also in allow_domains; a domain is in one list only"
        )
    for name, trigger in section.triggers.items():
        trigger.name = name
        _resolve_trigger(trigger, path, agents=agents, accounts=accounts)


def _resolve_trigger(
    trigger: HaTriggerConfig, path: Path, *, agents: Any, accounts: set[str]
) -> None:
    name = trigger.name

    def error(key: str, message: str) -> ConfigError:
        where = f"homeassistant.triggers.{name}.{key}" if key else f"homeassistant.triggers.{name}"
        return ConfigError(f"{path}:{line_of(trigger, key or None)}: {where}: {message}")

    if not TRIGGER_NAME.fullmatch(name):
        raise error("", "a trigger name uses letters, digits, - and _ only")
    if trigger.agent is not None and trigger.agent not in agents:
        known = ", ".join(sorted(agents)) or "none"
        raise error("agent", f"agent {trigger.agent!r} is not defined (agents: {known})")
    if not EVENT_TYPE.fullmatch(trigger.event_type):
        raise error("event_type", f"{trigger.event_type!r} is not an event type")
    if trigger.entity_id is not None and not re.fullmatch(r"[a-z0-9_.*]{1,255}", trigger.entity_id):
        raise error("entity_id", f"{trigger.entity_id!r} is not an entity id pattern")
    try:
        # 0 (or 0s) turns the cooldown off: every match fires.
        zero = re.fullmatch(r"0+(\.0*)?\s*(ms|s|m|h)?", str(trigger.cooldown).strip())
        trigger.cooldown_seconds = 0.0 if zero else parse_duration(trigger.cooldown)
    except ValueError as exc:
        raise error("cooldown", str(exc)) from None
    bad = template_problem(trigger.prompt)
    if bad:
        raise error("prompt", bad)
    if not trigger.prompt.strip():
        raise error("prompt", "is empty")
    if trigger.deliver is not None:
        account, sep, conversation = trigger.deliver.partition(":")
        if not sep or not account or not conversation:
            raise error("deliver", f"{trigger.deliver!r} is not ACCOUNT:CONVERSATION")
        if account not in accounts:
            known = ", ".join(sorted(accounts)) or "none"
            raise error("deliver", f"channel account {account!r} is not configured ({known})")
