"""The terminal's notices of a config.yaml reload: each news once, nothing for a repeat."""

from __future__ import annotations

from habakkuk.engine.events import ConfigReloaded
from habakkuk.screens.reload_notice import ReloadNotices

BROKEN = "/h/config.yaml:7: timezone: unknown time zone 'Mars/Olympus_Mons'"


def test_each_change_of_what_needs_a_restart_is_told_once() -> None:
    notices = ReloadNotices()
    [(text, severity)] = notices.notices(ConfigReloaded(restart=["providers"]))
    assert text == "config.yaml: providers changed; restart Habakkuk to apply."
    assert severity == "warning"
    assert notices.notices(ConfigReloaded(restart=["providers"])) == []
    [(text, _)] = notices.notices(ConfigReloaded(restart=["providers", "channels"]))
    assert "providers, channels changed" in text


def test_a_broken_file_is_told_once_and_its_fix_tells_what_was_applied() -> None:
    notices = ReloadNotices()
    [(text, severity)] = notices.notices(ConfigReloaded(invalid=BROKEN))
    assert text.startswith(BROKEN) and severity == "error"
    assert notices.notices(ConfigReloaded(invalid=BROKEN)) == []
    fixed = notices.notices(ConfigReloaded(applied=["hooks"]))
    assert fixed == [("config.yaml: hooks applied.", "information")]
