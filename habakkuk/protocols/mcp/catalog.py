"""The built-in catalog (catalog.yaml) and `habakkuk mcp add`.

`add_server` appends one entry to `mcp_servers` in config.yaml by editing the
text after the section's last entry, so comments and layout stay; a flow-style
or empty `mcp_servers:` is rewritten through the YAML tree instead. The edited
text must load (`parse_config`) before it replaces the file, and the previous
file is kept as config.yaml.bak.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home

CATALOG_FILE = Path(__file__).with_name("catalog.yaml")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class CatalogEntry:
    """One server the catalog knows."""

    name: str
    title: str
    publisher: str
    description: str
    server: dict[str, Any]
    keywords: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    programs: list[str] = field(default_factory=list)
    archived: bool = False

    def how(self) -> str:
        """How it runs, in one line."""
        if "url" in self.server:
            auth = " (sign in: oauth)" if self.server.get("auth") == "oauth" else ""
            return f"{self.server['url']}{auth}"
        return " ".join([str(self.server["command"]), *map(str, self.server.get("args", []))])


def load_catalog(path: Path = CATALOG_FILE) -> list[CatalogEntry]:
    """Every catalog entry, in file order."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    return [CatalogEntry(**item) for item in raw]


def find(name: str, entries: list[CatalogEntry] | None = None) -> CatalogEntry:
    """The entry called `name`; ConfigError listing close names when unknown."""
    entries = entries if entries is not None else load_catalog()
    for entry in entries:
        if entry.name == name:
            return entry
    import difflib

    close = difflib.get_close_matches(name, [e.name for e in entries], n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else " (see habakkuk mcp catalog)"
    raise ConfigError(f"mcp add: {name!r} is not in the catalog{hint}")


def search(query: str, entries: list[CatalogEntry] | None = None) -> list[CatalogEntry]:
    """Entries matching every word of `query` in name, title, description or keywords."""
    entries = entries if entries is not None else load_catalog()
    words = query.lower().split()
    found = []
    for entry in entries:
        haystack = " ".join(
            [entry.name, entry.title, entry.description, entry.publisher, *entry.keywords]
        ).lower()
        if all(word in haystack for word in words):
            found.append(entry)
    return found


def print_catalog(query: str = "") -> int:
    """`habakkuk mcp catalog [QUERY]`."""
    entries = search(query)
    if not entries:
        print(f"no catalog server matches {query!r}", file=sys.stderr)
        return 1
    for entry in entries:
        mark = "  [archived reference server]" if entry.archived else ""
        print(f"{entry.name:<22} {entry.title} — {entry.publisher}{mark}")
        print(f"{'':<22} {entry.description}")
        print(f"{'':<22} runs: {entry.how()}")
        if entry.params:
            params = " ".join(f"{k}=<{v}>" for k, v in entry.params.items())
            print(f"{'':<22} add: habakkuk mcp add {entry.name} {params}")
        if entry.vars:
            print(f"{'':<22} needs: {', '.join(entry.vars)}")
    return 0


def fill(entry: CatalogEntry, params: dict[str, str]) -> dict[str, Any]:
    """The entry's server mapping with its {param} placeholders filled."""
    unknown = sorted(set(params) - set(entry.params))
    if unknown:
        known = ", ".join(entry.params) or "none"
        raise ConfigError(
            f"mcp add {entry.name}: unknown parameter {unknown[0]!r} (takes: {known})"
        )
    missing = [p for p in entry.params if not params.get(p)]
    if missing:
        wanted = " ".join(f"{p}=<{entry.params[p]}>" for p in missing)
        raise ConfigError(f"mcp add {entry.name}: needs {wanted}")

    # `~` is the user's: the child gets no shell to expand it
    values = {k: os.path.expanduser(v) if v.startswith("~") else v for k, v in params.items()}

    def substitute(value: Any) -> Any:
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [substitute(v) for v in value]
        if isinstance(value, dict):
            return {k: substitute(v) for k, v in value.items()}
        return value

    return dict(substitute(copy.deepcopy(entry.server)))


def _entry_yaml(name: str, server: dict[str, Any], indent: int) -> str:
    text = yaml.safe_dump(
        {name: server}, sort_keys=False, default_flow_style=None, allow_unicode=True, width=1000
    )
    pad = " " * indent
    return "".join(pad + line if line.strip() else line for line in text.splitlines(True))


def edit_config_text(text: str, name: str, server: dict[str, Any]) -> str:
    """`text` with `name: server` appended to its top-level `mcp_servers`."""
    root = yaml.compose(text, Loader=yaml.SafeLoader) if text.strip() else None
    section = None
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "mcp_servers":
                section = (key, value)
    elif root is not None:
        raise ConfigError("config.yaml: the top level must be a mapping")
    if section is None:
        tail = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{tail}mcp_servers:\n{_entry_yaml(name, server, 2)}"
    key, value = section
    is_null = isinstance(value, yaml.ScalarNode) and value.tag == "tag:yaml.org,2002:null"
    if not is_null and not isinstance(value, yaml.MappingNode):
        raise ConfigError(f"config.yaml:{key.start_mark.line + 1}: mcp_servers: must be a mapping")
    if isinstance(value, yaml.MappingNode):
        existing = [str(k.value) for k, _ in value.value]
        if name in existing:
            raise ConfigError(
                f"config.yaml: mcp_servers.{name} exists already; pick another with --name"
            )
    if is_null or (isinstance(value, yaml.MappingNode) and value.flow_style):
        # Rewrite just this section through the tree: the rest of the file stays as it is.
        current = yaml.safe_load(yaml.serialize(value)) or {}
        current[name] = server
        body = "".join(_entry_yaml(k, v, 2) for k, v in current.items())
        lines = text.splitlines(True)
        start_line = key.start_mark.line
        end = value.end_mark.index if not is_null else key.end_mark.index + 1
        # drop the rest of the key's line (the flow mapping and any comment after it)
        line_end = text.find("\n", end)
        line_end = len(text) if line_end == -1 else line_end + 1
        head = "".join(lines[:start_line])
        return f"{head}mcp_servers:\n{body}{text[line_end:]}"
    indent = value.value[0][0].start_mark.column if value.value else 2
    last_value = value.value[-1][1]
    insert_at = last_value.end_mark.index
    # block nodes end at the start of the next token: move to the end of that line
    line_end = text.rfind("\n", 0, insert_at)
    if text[line_end + 1 : insert_at].strip():
        line_end = text.find("\n", insert_at)
        insert_at = len(text) if line_end == -1 else line_end + 1
    else:
        insert_at = line_end + 1
    before = text[:insert_at]
    if not before.endswith("\n"):
        before += "\n"
    return before + _entry_yaml(name, server, indent) + text[insert_at:]


def add_server(
    home: Home, entry_name: str, params: dict[str, str], name: str | None = None
) -> tuple[CatalogEntry, str]:
    """Add a catalog server to config.yaml (validated; old file kept as .bak)."""
    from habakkuk.engine.config import parse_config
    from habakkuk.engine.home import write_private_file

    entry = find(entry_name)
    target = name or entry.name
    if not re.fullmatch(r"[A-Za-z0-9_-]+", target):
        raise ConfigError(f"mcp add: --name {target!r} may hold only letters, digits, _ and -")
    server = fill(entry, params)
    path = home.config_path
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no config yet; run `habakkuk init` first") from None
    new = edit_config_text(old, target, server)
    try:
        parse_config(new, path, home)
    except ConfigError as exc:
        raise ConfigError(f"mcp add: the edited config would not load: {exc}") from None
    backup = path.with_name("config.yaml.bak")
    write_private_file(backup, old)
    write_private_file(path, new)
    return entry, target


def add_command(home: Home, entry_name: str, raw_params: list[str], name: str | None) -> int:
    """`habakkuk mcp add NAME [param=value] [--name N]`."""
    params: dict[str, str] = {}
    for item in raw_params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"mcp add: {item!r} is not param=value")
        params[key] = value
    entry, target = add_server(home, entry_name, params, name)
    print(f"added mcp_servers.{target} to {home.config_path} (previous: config.yaml.bak)")
    from habakkuk.engine.config import load_config
    from habakkuk.engine.secrets import home_environment

    config = load_config(home)  # as written: a reference in secrets.refs counts as set
    env = home_environment(home, config)
    missing = [v for v in entry.vars if env.get(v) is None]
    if missing:
        print(f"put these in {home.env_path}:")
        for var in missing:
            print(f"  {var}=...   # {entry.vars[var]}")
    absent = [p for p in entry.programs if shutil.which(p) is None]
    if absent:
        print(f"it needs on PATH: {', '.join(absent)}")
    if entry.server.get("auth") == "oauth":
        print(f"sign in: habakkuk mcp login {target}")
    from .checks import reach_line

    print(f"{reach_line(config, target)}; habakkuk mcp checks the connection")
    return 0
