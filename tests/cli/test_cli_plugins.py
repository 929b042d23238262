"""`habakkuk plugins install|update` end to end: the real scan, files and output asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from habakkuk.knowledge.hub.lock import read_lock
from tests.conftest import mock_config

MANIFEST = """name: standup
description: Write my stand-up
version: 1.0.0
commands:
  standup:
    summary: write my stand-up from yesterday's sessions
    prompt: Write my stand-up for today from yesterday's sessions.
"""


@pytest.fixture
def plugins_home(home: Home, write_config) -> Home:
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
