"""A plugin folder installed in the test home as an install leaves it: in HOME/plugins/<name>
with its lock entry, disabled until enabled."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import LockEntry, read_lock, write_lock

ZOO = Path(__file__).parents[2] / "mcp" / "mcp_servers.py"  # the suite's MCP test server

CONFIG = """providers:
  mock:
    type: mock
agents:
  main:
    model: mock/x
    mode: full
  picky:
    model: mock/x
    toolsets: [core]
"""

# One stdio server (started by a relative path, so it only starts in the plugin folder),
# a hook, a prompt command and a script command.
MANIFEST = f"""name: tools
description: Test tools for the zoo
version: 0.1.0
mcp_servers:
  zoo:
    command: {sys.executable}
    args: [zoo.py, stdio, basic]
hooks:
  - event: tool_before
    command: pwd; exit 1
commands:
  standup:
    summary: write my stand-up
    prompt: Write my stand-up for today.
  where:
    summary: where the script runs and what it got
    script: 'pwd; echo "args=$HABAKKUK_ARGS"; cat'
"""

Install = Callable[..., Path]


@pytest.fixture
def install(home: Home) -> Install:
    """Put a plugin into HOME/plugins/<name> with a lock entry (enabled when asked)."""
    home.config_path.write_text(CONFIG, encoding="utf-8")

    def _install(
        name: str = "tools",
        manifest: str = MANIFEST,
        *,
        enabled: bool = False,
        verdict: str = "clean",
        files: dict[str, str] | None = None,
    ) -> Path:
        folder = home.root / "plugins" / name
        folder.mkdir(parents=True)
        (folder / "habakkuk-plugin.yaml").write_text(textwrap.dedent(manifest), "utf-8")
        shutil.copyfile(ZOO, folder / "zoo.py")
        for path, text in (files or {}).items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text, encoding="utf-8")
        entries, _ = read_lock(home.root / "plugins")
        entries[name] = LockEntry(
            name, str(folder), "path", verdict=verdict, approved=enabled, enabled=enabled
        )
        write_lock(home.root / "plugins", entries)
        return folder

    return _install
