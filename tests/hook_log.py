"""A hook script for tests: each run writes the event it got on stdin to a file of its own.

`HookLog(folder).entry(event, label, match)` is one `hooks:` entry of config.yaml
whose command is `sh record.sh LABEL`; `log.events(label)` reads back what the
runs with that label received. A run writes to a part file and renames it, so a
file read is always whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCRIPT = """\
#!/bin/sh
# $1 labels the hook; stdin is the event as JSON.
part=$(mktemp "{folder}/.part.XXXXXX") || exit 1
cat > "$part"
mv "$part" "{folder}/$1.$HABAKKUK_EVENT.${{part##*.}}.json"
"""


class HookLog:
    """A folder of recorded hook runs and the script that records them."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.script = folder / "record.sh"
        self.script.write_text(SCRIPT.format(folder=folder), encoding="utf-8")

    def entry(self, event: str, label: str, match: str | None = None) -> str:
        """One `hooks:` list item (YAML flow mapping) recording under `label`."""
        item = f"{{event: {event}, command: 'sh {self.script} {label}'"
        if match is not None:
            item += f", match: {json.dumps(match)}"
        return item + "}"

    def config(self, *entries: str) -> str:
        """A `hooks:` section of the given entries."""
        return "hooks:\n" + "".join(f"  - {e}\n" for e in entries)

    def events(self, label: str | None = None) -> list[dict[str, Any]]:
        """The events recorded (under `label`, else all), oldest file first."""
        pattern = f"{label}.*.json" if label is not None else "*.json"
        files = sorted(self.folder.glob(pattern), key=lambda p: p.stat().st_mtime_ns)
        return [json.loads(p.read_text(encoding="utf-8")) for p in files]

    def labels(self) -> set[str]:
        """The labels of every recorded run."""
        return {p.name.split(".", 1)[0] for p in self.folder.glob("*.json")}
