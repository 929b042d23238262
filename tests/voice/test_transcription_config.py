"""`transcription:` in config.yaml: the openai and local providers' defaults, and every
mistake one line naming the file, the line and the key."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig

AGENT = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


def parse(tmp_path: Path, extra: str) -> Config:
    text = AGENT + textwrap.dedent(extra)
    return parse_config(text, tmp_path / "config.yaml", Home(tmp_path))


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(tmp_path, extra)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_openai_is_the_default_provider_with_whisper_1(tmp_path: Path) -> None:
    settings = parse(tmp_path, "transcription: {base_url: 'http://127.0.0.1:9/v1'}\n").transcription
    assert settings is not None
    assert (settings.provider, settings.model, settings.key_env) == (
        "openai",
        "whisper-1",
        "OPENAI_API_KEY",
    )


def test_a_local_models_relative_path_resolves_against_the_home(tmp_path: Path) -> None:
    (tmp_path / "models" / "base").mkdir(parents=True)
    settings = parse(
        tmp_path,
        "transcription:\n  provider: local\n  model: models/base\n  language: en\n  threads: 2\n",
    ).transcription
    assert settings is not None
    assert (settings.model, settings.language, settings.threads) == (
        str(tmp_path / "models" / "base"),
        "en",
        2,
    )


def test_a_local_model_that_does_not_exist_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    message = error(tmp_path, f"transcription:\n  provider: local\n  model: {missing}\n")
    assert message == f"{tmp_path / 'config.yaml'}:8: transcription.model: {missing} does not exist"


def test_a_local_model_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"x")
    message = error(tmp_path, "transcription: {provider: local, model: model.bin}\n")
    assert message.endswith(f"transcription.model: {tmp_path / 'model.bin'} is not a folder")


def test_the_local_provider_needs_a_model(tmp_path: Path) -> None:
    message = error(tmp_path, "transcription:\n  provider: local\n")
    assert ":7: transcription.model: the local provider needs the folder of a" in message


def test_the_local_provider_without_the_extra_names_the_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # as if it were not installed
    message = error(tmp_path, f"transcription:\n  provider: local\n  model: {tmp_path}\n")
    assert message == (
        f"{tmp_path / 'config.yaml'}:7: transcription.provider: local needs faster-whisper: "
        "pip install 'habakkuk[local-stt]'"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("transcription: {provider: whisper}\n", "transcription.provider"),
        ("transcription: {provider: local, model: ., threads: 0}\n", "transcription.threads: "),
        ("transcription: {threads: 2}\n", "transcription.threads: only the local provider"),
        ("transcription: {language: English}\n", "transcription.language: 'English' is not"),
        ("transcription: {base_url: ftp://x}\n", "transcription.base_url: 'ftp://x' is not"),
    ],
)
def test_each_mistake_names_its_key(tmp_path: Path, extra: str, expected: str) -> None:
    message = error(tmp_path, extra)
    assert message.startswith(f"{tmp_path / 'config.yaml'}:6: ") and expected in message


def test_doctor_checks_that_the_local_model_folder_holds_a_model(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = home.root / "stt-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    local = f"transcription: {{provider: local, model: {folder}}}\n"
    write_config(AGENT + local)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL  transcription (local): {folder} has no model.bin: not a faster-whisper" in out
    (folder / "model.bin").write_bytes(b"\0" * 2_000_000)
    main(["doctor"])
    assert f"ok    transcription (local): {folder} (model.bin 2 MB)" in capsys.readouterr().out


def test_doctor_names_a_missing_model_folder(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(AGENT + f"transcription: {{provider: local, model: {home.root / 'gone'}}}\n")
    assert main(["doctor"]) == 2  # a config that does not load
    assert f"transcription.model: {home.root / 'gone'} does not exist" in capsys.readouterr().out
