"""`habakkuk talk` refusing to start: one line on stderr naming what to fix, never a
traceback; and `--help` without numpy, sounddevice or the loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config
from tests.helpers import python_in

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTION = "transcription:\n  base_url: http://127.0.0.1:9/v1\n  key_env: null\n"


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_wake_and_no_wake_together_is_bad_usage(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["talk", "--wake", "hey", "--no-wake"]) == 2
    assert "--wake and --no-wake" in one_line(capsys.readouterr().err)


def test_without_a_transcription_endpoint_it_says_which_section(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config())
    assert main(["talk", "--no-wake"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("habakkuk: talk: transcription: is not configured")


def test_an_unknown_session_is_named(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config(extra=TRANSCRIPTION))
    assert main(["talk", "--session", "ses_nope"]) != 0
    assert "ses_nope" in one_line(capsys.readouterr().err)


def test_a_missing_input_device_is_one_line_naming_the_packages(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config(extra=TRANSCRIPTION + "talk:\n  device: 99\n"))
    assert main(["talk", "--no-wake"]) == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith("habakkuk: talk: no input device 99 to listen with")
    assert "apt install libportaudio2 libasound2-plugins" in line


async def test_a_missing_portaudio_library_is_one_line_naming_the_packages(
    home: Home, write_config: WriteConfig, tmp_path: Path
) -> None:
    write_config(mock_config(extra=TRANSCRIPTION))
    # sounddevice raises OSError at import when it finds no PortAudio library.
    fake = tmp_path / "fake_modules"
    fake.mkdir()
    (fake / "sounddevice.py").write_text("raise OSError('PortAudio library not found')\n")
    code = "import sys; from habakkuk.cli import main; sys.exit(main(['talk', '--no-wake']))"
    path = os.pathsep.join([str(fake), str(ROOT), os.environ.get("PYTHONPATH", "")])
    status, _, err = await python_in(code, home.root, PYTHONPATH=path)
    assert status == 1
    line = one_line(err)
    assert line.startswith("habakkuk: talk: the PortAudio library is not installed")
    assert "libportaudio2 libasound2-plugins" in line


async def test_help_imports_neither_numpy_nor_sounddevice(home: Home) -> None:
    code = (
        "import sys, contextlib\nfrom habakkuk.cli import main\n"
        "with contextlib.suppress(SystemExit):\n    main(['talk', '--help'])\n"
        "print(sorted({'numpy', 'sounddevice', 'habakkuk.voice.talk'} & set(sys.modules)))"
    )
    status, out, _ = await python_in(code, home.root, PYTHONPATH=str(ROOT))
    assert status == 0 and out.strip().endswith("[]"), out
