"""The installed plugins of a home: HOME/plugins/<name>/ and HOME/plugins/.lock.json.

`enable` approves a plugin and turns it on (the CLI shows `describe` and asks first; a
plugin whose scan was dangerous needs `force`) and makes the files its manifest runs
executable (programs.py; an install writes every file 0600); `disable` turns it off and
keeps it, those files no longer executable;
`remove` backs the folder up into plugins/.backups first, then deletes it and its lock
entry. `mark_changed` is what an update does to a plugin whose files changed: disabled and
unapproved until it is enabled again, so nothing new runs without being shown. Every
change takes effect at the next load of the config (a new `habakkuk` process, or a
restart of `habakkuk serve`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from habakkuk.engine.errors import ConfigError, HabakkukError, NotFound
from habakkuk.engine.plugin_config import PLUGINS_DIR
from habakkuk.knowledge.hub.backups import Backup, back_up
from habakkuk.knowledge.hub.lock import LockEntry, read_lock, write_lock

from .describe import PluginDescription, describe
from .programs import set_executable


@dataclass(frozen=True)
class PluginState:
    """One installed plugin: its lock entry and what it runs (or why that cannot be read)."""

    entry: LockEntry
    description: PluginDescription | None
    problem: str = ""

    @property
    def status(self) -> str:
        """enabled, disabled or broken (what `plugins list` shows)."""
        if self.problem:
            return "broken"
        return "enabled" if self.entry.enabled and self.entry.approved else "disabled"


class Plugins:
    """HOME/plugins as `habakkuk plugins` manages it."""

    def __init__(self, home: Path):
        self.home = home
        self.root = home / PLUGINS_DIR

    def entries(self) -> dict[str, LockEntry]:
        """The lock file's entries (a problem reading it is a HabakkukError: the CLI
        should not rewrite a lock file it cannot read)."""
        entries, problem = read_lock(self.root)
        if problem:
            raise HabakkukError(problem)
        return entries

    def entry(self, name: str) -> LockEntry:
        """The lock entry of `name`; NotFound naming the installed ones."""
        entries = self.entries()
        if name not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise NotFound(f"no plugin {name!r} is installed (installed: {known})")
        return entries[name]

    def folder(self, name: str) -> Path:
        return self.root / name

    def state(self, entry: LockEntry) -> PluginState:
        folder = self.folder(entry.name)
        if not folder.is_dir():
            return PluginState(entry, None, f"{folder}: the plugin's folder is missing")
        try:
            return PluginState(entry, describe(folder))
        except ConfigError as exc:
            return PluginState(entry, None, str(exc))

    def list(self) -> list[PluginState]:
        """Every installed plugin, by name."""
        return [self.state(e) for _, e in sorted(self.entries().items())]

    def show(self, name: str) -> PluginState:
        return self.state(self.entry(name))

    def _save(self, entry: LockEntry) -> LockEntry:
        from habakkuk.knowledge.frontmatter import now

        entries = self.entries()
        entry.updated_at = now()
        entries[entry.name] = entry
        write_lock(self.root, entries)
        return entry

    def enable(self, name: str, *, force: bool = False) -> LockEntry:
        """Approve and enable `name` (its manifest must load); a dangerous scan needs
        `force` (`--yes`)."""
        entry = self.entry(name)
        state = self.state(entry)
        if state.problem:
            raise HabakkukError(f"plugin {name}: {state.problem}")
        if entry.verdict == "dangerous" and not force:
            raise HabakkukError(
                f"plugin {name}: its scan found it dangerous; read the findings "
                f"(`habakkuk plugins show {name}`) and enable it with --yes only if you trust it"
            )
        assert state.description is not None  # no problem: the manifest loaded
        # The files the user was just shown as what the plugin runs become runnable.
        set_executable(self.folder(name), state.description.programs, True)
        entry.approved = True
        entry.enabled = True
        return self._save(entry)

    def disable(self, name: str) -> LockEntry:
        """Turn `name` off; it stays installed (and approved), and its programs lose their
        executable bit until it is enabled again."""
        entry = self.entry(name)
        entry.enabled = False
        saved = self._save(entry)
        state = self.state(entry)
        if state.description is not None:
            set_executable(self.folder(name), state.description.programs, False)
        return saved

    def mark_changed(self, name: str) -> LockEntry:
        """After an update changed its files: disabled and unapproved until enabled again."""
        entry = self.entry(name)
        entry.enabled = False
        entry.approved = False
        return self._save(entry)

    def remove(self, name: str) -> Backup | None:
        """Back the plugin up, then delete its folder and lock entry; the backup (None
        when the folder was already gone)."""
        entries = self.entries()
        entry = self.entry(name)
        folder = self.folder(name)
        backup = None
        if folder.is_dir():
            backup = back_up(self.root, self.home, folder, "removed", entry.as_json())
            shutil.rmtree(folder)
        del entries[name]
        write_lock(self.root, entries)
        return backup
