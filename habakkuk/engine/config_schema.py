"""Strict mapping of YAML nodes onto config dataclasses.

Every config section is a dataclass; this module walks its type hints and the
YAML node tree together, so an unknown key, a wrong type or a bad choice is an
error that names the file, the line and the dotted key. Defaults live on the
dataclasses themselves: one place.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import yaml

from .errors import ConfigError


def _describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    value = node.value
    return f"{value!r}" if value != "" else "an empty value"


class NodeLoader:
    """Turns YAML nodes into typed values, raising ConfigError with positions."""

    def __init__(self, file: Path):
        self.file = file

    def error(self, node: yaml.Node | None, key: str, message: str) -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else 1
        where = f"{self.file}:{line}"
        return ConfigError(f"{where}: {key}: {message}" if key else f"{where}: {message}")

    def scalar(self, node: yaml.Node) -> Any:
        """The plain Python value of a scalar node, resolved by YAML's own rules."""
        return yaml.safe_load(yaml.serialize(node))

    def load(self, node: yaml.Node, hint: Any, key: str) -> Any:
        """Convert `node` to the type `hint`; `key` is the dotted path for messages."""
        origin = get_origin(hint)
        if hint is Any:
            return yaml.safe_load(yaml.serialize(node))
        if origin in (Union, types.UnionType):
            options = [a for a in get_args(hint) if a is not type(None)]
            is_null = isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"
            if is_null and type(None) in get_args(hint):
                return None
            errors: list[ConfigError] = []
            for option in options:
                try:
                    return self.load(node, option, key)
                except ConfigError as exc:
                    errors.append(exc)
            raise errors[0]
        if origin is Literal:
            value = self.scalar(node) if isinstance(node, yaml.ScalarNode) else None
            choices = get_args(hint)
            if value not in choices and isinstance(node, yaml.ScalarNode) and node.value in choices:
                # YAML 1.1 reads a bare off/on/no/yes as a boolean; the word was meant.
                value = node.value
            if value not in choices:
                names = ", ".join(str(c) for c in choices)
                raise self.error(node, key, f"must be one of {names}, not {_describe(node)}")
            return value
        if origin is list:
            (item_hint,) = get_args(hint)
            if not isinstance(node, yaml.SequenceNode):
                raise self.error(node, key, f"must be a list, not {_describe(node)}")
            return [self.load(item, item_hint, f"{key}[{i}]") for i, item in enumerate(node.value)]
        if origin is dict:
            _, value_hint = get_args(hint)
            if not isinstance(node, yaml.MappingNode):
                raise self.error(node, key, f"must be a mapping, not {_describe(node)}")
            result: dict[str, Any] = {}
            for key_node, value_node in node.value:
                name = str(self.scalar(key_node))
                if name in result:
                    raise self.error(key_node, f"{key}.{name}", "is given twice")
                result[name] = self.load(value_node, value_hint, f"{key}.{name}")
            return result
        if dataclasses.is_dataclass(hint):
            return self.load_dataclass(node, typing.cast(type, hint), key)
        if hint in (str, int, float, bool):
            if not isinstance(node, yaml.ScalarNode):
                raise self.error(node, key, f"must be {hint.__name__}, not {_describe(node)}")
            value = self.scalar(node)
            if hint is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if hint is str and isinstance(value, (int, float)):
                # A number, or a bare off/on/yes/no (YAML 1.1 booleans): the text written.
                value = node.value
            if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
                raise self.error(node, key, f"must be {_type_word(hint)}, not {_describe(node)}")
            return value
        raise TypeError(f"unsupported config type {hint!r} at {key}")

    def load_dataclass(self, node: yaml.Node, cls: type, key: str) -> Any:
        """Build dataclass `cls` from a mapping node; unknown keys are errors."""
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
            node = yaml.MappingNode("tag:yaml.org,2002:map", [], node.start_mark, node.end_mark)
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, key, f"must be a mapping, not {_describe(node)}")
        hints = get_type_hints(cls)
        # By the key the file spells: a field whose key is a Python keyword (`from`) names
        # it in its metadata (`field(metadata={"key": "from"})`).
        fields = {
            f.metadata.get("key", f.name): f
            for f in dataclasses.fields(cls)
            if f.init and not f.name.startswith("_")
        }
        values: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = str(self.scalar(key_node))
            path = f"{key}.{name}" if key else name
            if name not in fields:
                known = ", ".join(sorted(fields))
                raise self.error(key_node, path, f"unknown key (known keys: {known})")
            if name in values:
                raise self.error(key_node, path, "is given twice")
            values[name] = self.load(value_node, hints[fields[name].name], path)
        missing = [
            name
            for name, f in fields.items()
            if name not in values
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            path = f"{key}.{missing[0]}" if key else missing[0]
            raise self.error(node, path, "is required")
        instance = cls(**{fields[name].name: value for name, value in values.items()})
        line = node.start_mark.line + 1
        object.__setattr__(instance, "_line", line)
        object.__setattr__(instance, "_lines", _key_lines(node, self))
        return instance


def _key_lines(node: yaml.MappingNode, loader: NodeLoader) -> dict[str, int]:
    return {str(loader.scalar(k)): k.start_mark.line + 1 for k, _ in node.value}


def _type_word(hint: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}[hint]


def line_of(section: Any, key: str | None = None) -> int:
    """The line a section (or one of its keys) was read from; 1 when built in code."""
    if key is not None:
        return int(getattr(section, "_lines", {}).get(key, line_of(section)))
    return int(getattr(section, "_line", 1))


def compose_yaml(text: str, path: Path) -> yaml.Node | None:
    """The YAML node tree of `text` (None when empty); ConfigError naming file and line."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: invalid YAML: {problem}") from None


def check_hooks(path: Path, hooks: list[Any]) -> None:
    """The checks of `hooks:` entries (config.yaml's and a plugin's): a command, a
    positive timeout, a match that compiles."""
    import re

    for i, hook in enumerate(hooks):
        where = f"hooks[{i}]"
        if not hook.command.strip():
            raise ConfigError(f"{path}:{line_of(hook, 'command')}: {where}.command: is empty")
        if hook.timeout <= 0:
            raise ConfigError(f"{path}:{line_of(hook, 'timeout')}: {where}.timeout: must be > 0")
        if hook.match is not None:
            try:
                re.compile(hook.match)
            except re.error as exc:
                raise ConfigError(
                    f"{path}:{line_of(hook, 'match')}: {where}.match: bad regular expression: {exc}"
                ) from None
