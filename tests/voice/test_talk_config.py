"""The `talk:` section: defaults, derived values, and one line naming file, line and key
for each mistake."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from habakkuk.engine.config import Config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home

AGENT = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


def parse(text: str, tmp_path: Path) -> Config:
    return parse_config(textwrap.dedent(text), tmp_path / "config.yaml", Home(tmp_path))


def test_without_the_section_the_spec_defaults_apply(tmp_path: Path) -> None:
    talk = parse(AGENT, tmp_path).talk
    assert (talk.threshold, talk.silence_seconds, talk.follow_up_seconds) == (0.02, 0.8, 30.0)
    assert talk.wake_phrases == () and talk.barge_in and talk.player is None


def test_durations_phrases_and_a_device_are_read(tmp_path: Path) -> None:
    talk = parse(
        AGENT + "talk:\n  silence: 1.2s\n  follow_up: 1m\n  wake: [hey habakkuk, ok computer]\n"
        "  device: 3\n  player: paplay\n  barge_in: false\n",
        tmp_path,
    ).talk
    assert (talk.silence_seconds, talk.follow_up_seconds) == (1.2, 60.0)
    assert talk.wake_phrases == ("hey habakkuk", "ok computer")
    assert talk.device == 3 and talk.player == "paplay" and not talk.barge_in
    named = parse(AGENT + "talk:\n  wake: 'hey habakkuk, computer'\n  device: USB Mic\n", tmp_path)
    assert named.talk.wake_phrases == ("hey habakkuk", "computer")
    assert named.talk.device == "USB Mic"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("  threshold: 2\n", "config.yaml:8: talk.threshold: 2.0 must be an RMS level"),
        ("  threshold: loud\n", "config.yaml:8: talk.threshold: must be a number"),
        ("  silence: soon\n", "config.yaml:8: talk.silence: 'soon' is not a duration"),
        ("  follow_up: 0s\n", "config.yaml:8: talk.follow_up: '0s' must be more than zero"),
        ("  wake: ' , '\n", "config.yaml:8: talk.wake: no phrase given"),
        ("  player: vlc\n", "config.yaml:8: talk.player: 'vlc' is not one of ffplay, paplay"),
        ("  barge: yes\n", "config.yaml:8: talk.barge: unknown key"),
    ],
)
def test_each_mistake_names_file_line_and_key(tmp_path: Path, section: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(AGENT + "talk:\n  barge_in: true\n" + section, tmp_path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
