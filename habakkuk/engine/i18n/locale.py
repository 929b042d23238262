"""Where a surface finds its language without parsing a config: config.yaml's top-level
`language:` line, else the POSIX locale variables.

The spec: "The CLI uses the config's language, else LC_ALL/LC_MESSAGES/LANG." The config
is not parsed for this (a command that needs it parses and checks it itself): its
top-level `language:` line is read with a pattern, so choosing costs one small file read
and no YAML import. The standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

# POSIX order: LC_ALL overrides every category, then the messages category, then LANG.
# (GNU's LANGUAGE list is not read: it is a gettext extension, and a one-word pick is
# what the catalogs need.)
LOCALE_VARIABLES = ("LC_ALL", "LC_MESSAGES", "LANG")

# A top-level `language: TAG` line (no indent: a channel's own `language:` is nested).
_LANGUAGE_LINE = re.compile(
    r"""^language:[ \t]*(?P<q>["']?)(?P<tag>[A-Za-z0-9_.@-]*)(?P=q)[ \t]*(?:\#.*)?$""",
    re.MULTILINE,
)


def config_language(path: Path) -> str:
    """The top-level `language:` of the config at `path` ("" when none, or unreadable:
    the command itself reports a config it cannot read)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    match = _LANGUAGE_LINE.search(text)
    return match.group("tag") if match else ""


def locale_language(environ: Mapping[str, str]) -> str:
    """The first non-empty of LC_ALL, LC_MESSAGES and LANG ("" when none is set)."""
    for name in LOCALE_VARIABLES:
        value = environ.get(name, "")
        if value:
            return value
    return ""
