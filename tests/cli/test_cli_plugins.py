"""`habakkuk plugins install|update` end to end: the real scan, files and output asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import read_lock
from tests.conftest import WriteConfig, mock_config

MANIFEST = """name: standup
description: Write my stand-up
version: 1.0.0
commands:
  standup:
    summary: write my stand-up from yesterday's sessions
    prompt: Write my stand-up for today from yesterday's sessions.
"""


@pytest.fixture
def plugins_home(home: Home, write_config: WriteConfig) -> Home:
    write_config(mock_config())
    return home


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plugins", *args])
    out, err = capsys.readouterr()
    return code, out, err


def source(tmp_path: Path, manifest: str | None = MANIFEST) -> Path:
    folder = tmp_path / "standup"
    folder.mkdir()
    (folder / "README.md").write_text("A stand-up command.\n")
    if manifest is not None:
        (folder / "habakkuk-plugin.yaml").write_text(manifest)
    return folder


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (None, "holds no plugin (no folder with habakkuk-plugin.yaml)"),
        ("name: standup\ndescription: x\nsurprise: 1\n", "standup: habakkuk-plugin.yaml:3:"),
    ],
)
def test_install_of_a_missing_or_broken_manifest_is_one_line_and_installs_nothing(
    plugins_home: Home,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    manifest: str | None,
    expected: str,
) -> None:
    code, out, err = run(capsys, "install", str(source(tmp_path, manifest)))
    assert code != 0
    [line] = err.strip().splitlines()
    assert expected in line and "Traceback" not in err
    assert out == ""
    root = plugins_home.root / "plugins"
    assert read_lock(root)[0] == {}
    assert not (root / "standup").exists()


def test_install_shows_the_scan_then_says_to_enable_and_update_says_unchanged_then_disabled(
    plugins_home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = source(tmp_path)
    code, out, err = run(capsys, "install", str(folder))
    assert code == 0, err
    assert out.index("scan: ") < out.index("standup: installed into")
    assert "disabled" in out
    assert "habakkuk plugins enable standup" in out
    root = plugins_home.root / "plugins"
    entry = read_lock(root)[0]["standup"]
    assert (entry.enabled, entry.approved) == (False, False)

    code, out, err = run(capsys, "enable", "standup", "--yes")
    assert code == 0, err
    code, out, err = run(capsys, "update", "standup")
    assert (code, out.strip()) == (0, "standup: unchanged")

    (folder / "README.md").write_text("A better stand-up command.\n")
    code, out, err = run(capsys, "update")
    assert code == 0, err
    assert out.index("scan: ") < out.index("standup: updated (1 file(s) changed, 0 removed")
    assert "disabled until enabled again: habakkuk plugins enable standup" in out
    entry = read_lock(root)[0]["standup"]
    assert (entry.enabled, entry.approved) == (False, False)
    assert (root / "standup" / "README.md").read_text() == "A better stand-up command.\n"


# -- the README's plugin, run for real ------------------------------------------------------

REPO = Path(__file__).parents[2]
ZOO = REPO / "tests" / "mcp" / "mcp_servers.py"  # the suite's MCP server, as status-server
PROGRAMS = ("deploy.sh", "log.sh", "bin/status-server")


def readme_manifest() -> str:
    """The habakkuk-plugin.yaml shown in the README's "Plugins" section, as written there."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("### Plugins", 1)[1]
    start = section.index("```yaml\n") + len("```yaml\n")
    return section[start : section.index("```", start)]


def habakkuk(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, on `home`; stdin is not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", *args],
        cwd=REPO,
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "HABAKKUK_HOME": str(home.root), "DEPLOY_TOKEN": "t0ken"},
        timeout=180,
    )


def write_user_file(path: Path, text: str, mode: int = 0o644) -> None:
    """A file as its author writes it: an editor, then `chmod +x` for the programs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def modes(folder: Path, names: tuple[str, ...] = PROGRAMS) -> list[int]:
    return [(folder / name).stat().st_mode & 0o777 for name in names]


def test_the_readmes_plugin_installs_enables_and_runs_its_script_hook_and_server(
    home: Home, write_config: WriteConfig, tmp_path: Path
) -> None:
    write_config(
        """
        providers:
          mock:
            type: mock
            script:
              - tool_calls: [{name: mcp__deploy-kit__echo, arguments: {text: up}}]
              - after: {ok: "the status server answered", error: "the call failed"}
        agents:
          main: {model: mock/x, mode: full}
        """
    )
    source = tmp_path / "deploy-kit"
    write_user_file(source / "habakkuk-plugin.yaml", readme_manifest())
    write_user_file(source / "deploy.sh", '#!/bin/sh\necho "deployed: $HABAKKUK_ARGS"\n', 0o755)
    write_user_file(source / "log.sh", '#!/bin/sh\necho "$HABAKKUK_EVENT" >> hook.log\n', 0o755)
    server = f"#!/bin/sh\nexec {sys.executable} {ZOO} stdio basic\n"
    write_user_file(source / "bin" / "status-server", server, 0o755)
    write_user_file(
        source / "skills" / "release-notes" / "SKILL.md",
        "---\nname: release-notes\ndescription: Write release notes from the log\n---\n"
        "List the merged changes since the last tag, grouped by kind.\n",
    )
    installed = habakkuk(home, "plugins", "install", str(source))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    folder = home.root / "plugins" / "deploy-kit"
    # Installed: nothing of it can run yet, whatever modes the source had.
    assert modes(folder) == [0o600] * 3

    enabled = habakkuk(home, "plugins", "enable", "deploy-kit", "--yes")
    assert enabled.returncode == 0, enabled.stderr
    assert "made executable when enabled: bin/status-server, deploy.sh, log.sh" in enabled.stdout
    assert modes(folder) == [0o700] * 3
    assert modes(folder, ("habakkuk-plugin.yaml", "skills/release-notes/SKILL.md")) == [0o600] * 2

    script = habakkuk(home, "run", "--json", "/deploy", "the site")  # was exit 126
    assert script.returncode == 0, script.stdout + script.stderr
    assert json.loads(script.stdout.splitlines()[-1])["reply"] == "deployed: the site"

    turn = habakkuk(home, "run", "--json", "what is the status?")
    assert turn.returncode == 0, turn.stdout + turn.stderr
    assert json.loads(turn.stdout.splitlines()[-1])["reply"] == "the status server answered"
    assert (folder / "hook.log").read_text(encoding="utf-8") == "tool_after\n"  # in its folder

    disabled = habakkuk(home, "plugins", "disable", "deploy-kit")
    assert disabled.returncode == 0, disabled.stderr
    assert modes(folder) == [0o600] * 3
