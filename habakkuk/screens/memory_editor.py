"""Edit a text in the user's $EDITOR while the app steps aside (App.suspend).

The text goes to a private temporary file outside the memory folder (the index must
never see a half-edited copy), the editor runs on the terminal, and the file is read
back and removed. The caller saves through the memory service, so the edit is the
user's, checked for secrets and recorded in the history like any other.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from textual.app import App, SuspendNotSupported


@dataclass(frozen=True)
class Edited:
    """What the editor left: the text, or an error to show (the text is then "")."""

    text: str
    error: str = ""


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, else vi, split as a shell would."""
    value = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        return shlex.split(value)
    except ValueError:
        return [value]


def edit_in_editor(app: App[object], text: str, *, name: str) -> Edited:
    """Run the editor on `text`; its result when it exits, or why it could not run."""
    command = editor_command()
    fd, temp = tempfile.mkstemp(prefix=f"habakkuk-{name}-", suffix=".md")  # 0600
    path = Path(temp)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        try:
            with app.suspend():
                code = _run(command, path)
        except SuspendNotSupported:
            if not app.is_headless:
                return Edited("", "This terminal cannot hand over to an editor: i edits inline.")
            # Headless (no terminal to hand over): the editor runs as it is.
            code = _run(command, path)
        if code is None:
            return Edited("", f"Editor not found: {command[0]} (set $EDITOR).")
        if code != 0:
            return Edited("", f"{command[0]} exited with status {code}: nothing saved.")
        return Edited(path.read_text(encoding="utf-8"))
    finally:
        path.unlink(missing_ok=True)


def _run(command: list[str], path: Path) -> int | None:
    """The editor's exit status, or None when it cannot be started."""
    try:
        return subprocess.run([*command, str(path)], check=False).returncode
    except OSError:
        return None
