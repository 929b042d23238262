"""`realtime:` in config.yaml (spec 000 "Media": Live mode): the defaults, the client
secret's lifetime, and every mistake one line naming the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home

AGENT = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


def test_an_empty_section_takes_the_specs_defaults(tmp_path: Path) -> None:
    config = parse_config(AGENT + "realtime: {}\n", tmp_path / "config.yaml", Home(tmp_path))
    realtime = config.realtime
    assert realtime is not None
    assert (realtime.provider, realtime.model, realtime.voice, realtime.key_env) == (
        "openai", "gpt-realtime-2.1", "marin", "OPENAI_API_KEY",
    )  # fmt: skip
    assert (realtime.transcription, realtime.ttl_seconds) == ("gpt-transcribe", 600.0)
    assert realtime.origin == "https://api.openai.com"


def test_without_the_section_live_mode_is_off(tmp_path: Path) -> None:
    assert parse_config(AGENT, tmp_path / "config.yaml", Home(tmp_path)).realtime is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("realtime: {provider: google}", ":7: realtime.provider: must be one of openai"),
        ("realtime:\n  ttl: 5s", ":8: realtime.ttl: must be between 10s and 2h"),
        ("realtime:\n  ttl: 3h", ":8: realtime.ttl: must be between 10s and 2h"),
        ("realtime:\n  ttl: soon", ":8: realtime.ttl: 'soon' is not a duration"),
        ("realtime:\n  base_url: ftp://x", ":8: realtime.base_url: 'ftp://x' is not an http(s)"),
        ("realtime:\n  key_env: 'my key'", ":8: realtime.key_env: 'my key' is not"),
        ("realtime:\n  voice: '<x>'", ":8: realtime.voice: '<x>' is not a voice name"),
        ("realtime:\n  model: ''", ":8: realtime.model: '' is not a model name"),
        ("realtime:\n  colour: red", ":8: realtime.colour: unknown key"),
    ],
)
def test_a_mistake_is_one_line_naming_its_line_and_key(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(AGENT + "\n" + extra + "\n", tmp_path / "config.yaml", Home(tmp_path))
    assert message in str(caught.value) and "\n" not in str(caught.value)
