"""`secrets:`: where secret values come from (spec 000 "Operations": Secret managers).

    secrets:
      cache: 5m                       # how long a value is kept in memory (default 5m)
      sources:
        op: {type: 1password}         # op read op://vault/item/field
        bw: {type: bitwarden}         # bw get password ITEM (ITEM#FIELD: a field of the item)
        vault: {type: command, command: "vault kv get -field=value $HABAKKUK_SECRET_REF"}
        files: {type: file, dir: ~/.secrets}   # each file 0600 (or stricter)
        kr: {type: keyring, service: habakkuk}
      refs:
        ANTHROPIC_API_KEY: "op:op://Private/Anthropic/credential"
        OPENAI_API_KEY: "op://Private/OpenAI/credential"   # op:// goes to the 1password source

A variable is read from the process environment, then its reference, then HOME/.env.
Each mistake is a ConfigError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .config_schema import line_of
from .durations import parse_duration
from .errors import ConfigError

SourceType = Literal["command", "1password", "bitwarden", "file", "keyring"]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_CACHE = 300.0
DEFAULT_TIMEOUT = 30.0


@dataclass
class SecretSourceConfig:
    """One source (`secrets.sources.NAME`). `command` is run with /bin/sh -c and the
    reference in $HABAKKUK_SECRET_REF; `dir` is where a file source's relative references
    are (default: the home); `service` is the keyring service (default habakkuk);
    `account` is the 1Password account (op --account)."""

    type: SourceType
    command: str | None = None
    dir: str | None = None
    service: str = "habakkuk"
    account: str | None = None
    cache: float | str | None = None  # default: secrets.cache
    timeout: float | str = DEFAULT_TIMEOUT
    name: str = field(default="", init=False)
    cache_seconds: float = field(default=DEFAULT_CACHE, init=False)
    timeout_seconds: float = field(default=DEFAULT_TIMEOUT, init=False)
    folder: Path | None = field(default=None, init=False)  # `dir` resolved


@dataclass(frozen=True)
class SecretRef:
    """A variable's reference: which source, and what to ask it for."""

    source: str
    reference: str


@dataclass
class SecretsConfig:
    """`secrets`: the sources and which variable each reference fills."""

    sources: dict[str, SecretSourceConfig] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    cache: float | str = "5m"
    resolved: dict[str, SecretRef] = field(default_factory=dict, init=False)


def resolve_secrets(secrets: SecretsConfig, path: Path, home: Path) -> None:
    """Check every source and reference (ConfigError naming the line)."""

    def error(section: object, key: str, where: str, message: str) -> ConfigError:
        return ConfigError(f"{path}:{line_of(section, key)}: secrets.{where}: {message}")

    try:
        default_cache = parse_duration(secrets.cache)
    except ValueError as exc:
        raise error(secrets, "cache", "cache", str(exc)) from None
    for name, source in secrets.sources.items():
        source.name = name
        if ":" in name or not name.strip():
            raise error(secrets, "sources", f"sources.{name}", "a source name has no ':'")
        try:
            source.cache_seconds = (
                parse_duration(source.cache) if source.cache is not None else default_cache
            )
        except ValueError as exc:
            raise error(source, "cache", f"sources.{name}.cache", str(exc)) from None
        try:
            source.timeout_seconds = parse_duration(source.timeout)
        except ValueError as exc:
            raise error(source, "timeout", f"sources.{name}.timeout", str(exc)) from None
        if source.type == "command":
            if not (source.command or "").strip():
                raise error(source, "type", f"sources.{name}.command", "a command source needs one")
        elif source.command is not None:
            raise error(source, "command", f"sources.{name}.command", "only for type: command")
        if source.dir is not None and source.type != "file":
            raise error(source, "dir", f"sources.{name}.dir", "only for type: file")
        if source.account is not None and source.type != "1password":
            raise error(source, "account", f"sources.{name}.account", "only for type: 1password")
        if source.type == "file":
            folder = Path(source.dir).expanduser() if source.dir else home
            source.folder = folder if folder.is_absolute() else home / folder
    onepassword = [s.name for s in secrets.sources.values() if s.type == "1password"]
    for variable, text in secrets.refs.items():
        where = f"refs.{variable}"
        if not _NAME.match(variable):
            raise error(secrets, "refs", where, f"{variable!r} is not a variable name")
        if text.startswith("op://"):
            if not onepassword:
                raise error(secrets, "refs", where, "an op:// reference needs a 1password source")
            secrets.resolved[variable] = SecretRef(onepassword[0], text)
            continue
        source_name, sep, reference = text.partition(":")
        if not sep or not reference.strip():
            raise error(secrets, "refs", where, "must be SOURCE:REFERENCE (or an op:// reference)")
        if source_name not in secrets.sources:
            known = ", ".join(sorted(secrets.sources)) or "none"
            raise error(
                secrets, "refs", where, f"source {source_name!r} is not defined (sources: {known})"
            )
        secrets.resolved[variable] = SecretRef(source_name, reference.strip())
