"""Which sections of config.yaml differ between two loaded configs (a hot reload).

A section is one top-level key of config.yaml (one field of `Config`): `hooks`, `providers`,
`agents`, ... Two configs loaded from the same text compare equal section by section (the
sections are dataclasses; the lines they were read from are kept beside their fields, not
in them), so an edit that only moves lines or comments changes nothing.
"""

from __future__ import annotations

import dataclasses

from .config import Config

# Applied to the running process when they change (engine/hooks.Hooks.replace; the
# budget service reads `budget:` at every model call).
IN_PLACE = frozenset({"hooks", "budget"})
# Not sections of the file: where it was read from, and the plugins' load problems (said
# at start and by doctor).
NOT_SECTIONS = frozenset({"path", "plugin_problems"})


def changed_sections(running: Config, loaded: Config) -> list[str]:
    """The sections whose values differ, in the order Config declares them."""
    return [
        field.name
        for field in dataclasses.fields(Config)
        if field.name not in NOT_SECTIONS
        and getattr(running, field.name) != getattr(loaded, field.name)
    ]
