"""`habakkuk doctor` says when an agent lists the a2a toolset but its library is missing."""

from __future__ import annotations

import sys

import pytest

from habakkuk.cli import main
from tests.conftest import WriteConfig

CONFIG = """
providers:
  m: {type: mock}
agents:
  main: {model: m/x, toolsets: [core, a2a]}
  plain: {model: m/x}
"""


def test_doctor_fails_the_a2a_toolset_without_its_extra(
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "a2a", None)  # not installed, whatever this venv has
    write_config(CONFIG)
    assert main(["doctor"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert (
        "FAIL  toolset a2a: toolset a2a needs the a2a extra, which is not installed; "
        "run: pip install 'habakkuk[a2a]' (main)"
    ) in lines


def test_doctor_is_quiet_about_the_a2a_extra_when_it_is_installed(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(CONFIG)
    main(["doctor"])
    assert not any("toolset a2a" in line for line in capsys.readouterr().out.splitlines())
