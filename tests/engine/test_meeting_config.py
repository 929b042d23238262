"""The `meeting:` section: its defaults, the values it derives, and each mistake named by
file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from habakkuk.engine.config import parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.services.toolset import meetings
from habakkuk.tools.meeting.desk import JoinRequest
from habakkuk.tools.meeting.links import normalise
from habakkuk.work.meeting_runs import attend_settings

BASE = "providers:\n  d: {type: mock}\nagents:\n  main:\n    model: d/x\n"


def test_without_a_meeting_section_the_spec_defaults_apply(tmp_path: Path) -> None:
    config = parse_config(BASE, tmp_path / "config.yaml", Home(tmp_path))
    section = config.meeting
    assert (section.lobby_seconds, section.alone_seconds) == (900.0, 300.0)
    assert section.announce is True
    assert (section.duration_seconds, section.max_seconds) == (3 * 3600.0, 3 * 3600.0)
    assert section.summary_model is None
    settings = attend_settings(config)
    assert (settings.lobby_timeout, settings.alone_timeout, settings.announce) == (
        900.0,
        300.0,
        True,
    )


def test_the_section_sets_timings_greeting_limits_and_the_notes_model(tmp_path: Path) -> None:
    text = BASE + (
        "meeting:\n  lobby_timeout: 2m\n  alone_timeout: 30s\n  announce: false\n"
        "  duration_limit: 45m\n  max_duration: 1h\n  summary_model: d/notes\n"
    )
    config = parse_config(text, tmp_path / "config.yaml", Home(tmp_path))
    settings = attend_settings(config)
    assert (settings.lobby_timeout, settings.alone_timeout, settings.announce) == (
        120.0,
        30.0,
        False,
    )
    assert config.meeting.summary_model == "d/notes"
    desk = meetings(tmp_path, None, config)  # type: ignore[arg-type]  # no queue: records only
    link = normalise("https://meet.google.com/abc-defg-hij")

    def request(limit: float | None) -> JoinRequest:
        return JoinRequest(link, "main", "Bot", "", "ses", "turn:call", duration_limit=limit)

    assert desk.limit_of(request(None)) == 45 * 60.0  # the configured default
    assert desk.limit_of(request(5 * 3600.0)) == 3600.0  # capped by max_duration


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("meeting:\n  lobby_timeout: soon\n", "config.yaml:7: meeting.lobby_timeout: 'soon'"),
        ("meeting:\n  alone_timeout: 0\n", "config.yaml:7: meeting.alone_timeout:"),
        ("meeting:\n  max_duration: 10s\n", "config.yaml:7: meeting.max_duration: must be at"),
        (
            "meeting:\n  max_duration: 1h\n  duration_limit: 2h\n",
            "config.yaml:8: meeting.duration_limit: must be between 1m and max_duration",
        ),
        (
            "meeting:\n  summary_model: ghost/x\n",
            "config.yaml:7: meeting.summary_model: provider 'ghost' is not defined",
        ),
        ("meeting:\n  lobby: 5m\n", "config.yaml:7: meeting.lobby: unknown key"),
        ("meeting:\n  announce: maybe\n", "config.yaml:7: meeting.announce:"),
    ],
)
def test_a_bad_meeting_section_is_an_error_naming_line_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(BASE + text, tmp_path / "config.yaml", Home(tmp_path))
    assert message in str(raised.value)
