"""skills/.usage.json: when each skill was last loaded (skill_view, /skill, `run --skill`).

One JSON object `{"<agent>/<name>": "2026-11-06T09:12:00Z", "shared/<name>": ...}`: an
agent's own skills under the agent's name, shared and plugin skills under "shared". The
file is replaced atomically; within a process every record goes through one lock that
reads the file again before writing it, so two uses at once both land (another process
writing between our read and rename may lose one stamp, which only makes the curator
think a skill is a little older). The curator reads it to find unused skills.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from habakkuk.knowledge.frontmatter import now
from habakkuk.knowledge.notes import write_atomic
from habakkuk.knowledge.skills.types import SkillScope

USAGE_FILE = ".usage.json"


def usage_key(agent: str, scope: SkillScope, name: str) -> str:
    """The key of one skill in .usage.json: own skills by agent, the rest as "shared"."""
    return f"{agent}/{name}" if scope == "own" else f"shared/{name}"


class UsageLog:
    """skills/.usage.json of one home, read through a cache keyed by its mtime_ns."""

    def __init__(self, skills_dir: Path):
        self.path = skills_dir / USAGE_FILE
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, int], dict[str, str]] | None = None

    def read(self) -> dict[str, str]:
        """Every stamp (a file that is missing or unreadable counts as empty)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return {}
        key = (info.st_mtime_ns, info.st_size)
        cached = self._cached
        if cached is not None and cached[0] == key:
            return dict(cached[1])
        data = self._load()
        self._cached = (key, data)
        return dict(data)

    def _load(self) -> dict[str, str]:
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(loaded, dict):
            return {}
        return {str(k): v for k, v in loaded.items() if isinstance(v, str)}

    def record(self, key: str, at: str | None = None) -> str:
        """Stamp `key` as used now (or at `at`); the stamp written."""
        stamp = at or now()
        with self._lock:
            data = self._load()
            data[key] = stamp
            write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
            self._cached = None
        return stamp

    def forget(self, key: str) -> None:
        """Drop `key` (a skill that was removed)."""
        with self._lock:
            data = self._load()
            if data.pop(key, None) is not None:
                write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
                self._cached = None
