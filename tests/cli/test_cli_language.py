"""The CLI speaks config.yaml's `language:`, else LC_ALL, LC_MESSAGES, LANG (POSIX order).

Run as a user runs it: `python -m habakkuk.cli` in a subprocess with its own home and
locale variables.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from habakkuk.cli import entry

MOCK = "providers:\n  mock:\n    type: mock\nagents:\n  main:\n    model: mock/x\n"


def habakkuk(
    home: Path, *args: str, stdin: str = "", **locale: str
) -> subprocess.CompletedProcess[str]:
    """Run the CLI on `home` with exactly the locale variables given (stdin: a pipe)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES", "LANG")}
    return subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**env, "HABAKKUK_HOME": str(home), **locale},
        timeout=120,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    root.mkdir()
    return root


def test_lang_french_makes_a_usage_error_french(home: Path) -> None:
    result = habakkuk(home, "run", LANG="fr_FR.UTF-8")
    assert result.returncode == 2
    assert result.stderr.strip() == "habakkuk: run: la consigne est vide"


def test_lc_all_overrides_lang_and_lc_messages(home: Path) -> None:
    french = habakkuk(home, "run", LC_ALL="fr_FR.UTF-8", LC_MESSAGES="C", LANG="en_US.UTF-8")
    assert french.stderr.strip() == "habakkuk: run: la consigne est vide"
    english = habakkuk(home, "run", LC_ALL="en_US.UTF-8", LANG="fr_FR.UTF-8")
    assert english.stderr.strip() == "habakkuk: run: the prompt is empty"


def test_lc_messages_comes_before_lang(home: Path) -> None:
    result = habakkuk(home, "run", LC_MESSAGES="fr_CA.UTF-8", LANG="en_GB.UTF-8")
    assert result.stderr.strip() == "habakkuk: run: la consigne est vide"


def test_the_configs_language_wins_over_the_locale(home: Path) -> None:
    (home / "config.yaml").write_text("language: fr  # the person's\n" + MOCK)
    result = habakkuk(home, "--serve", "--smoke", LANG="en_US.UTF-8")
    assert result.returncode == 2
    assert "--serve et --smoke ne peuvent pas être utilisés ensemble" in result.stderr
    listed = habakkuk(home, "sessions", "list", LANG="en_US.UTF-8")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.strip().startswith("aucune session pour l'instant")


def test_a_channels_own_language_is_not_the_clis(home: Path) -> None:
    (home / "config.yaml").write_text(MOCK + "channels:\n  tg:\n    language: fr\n")
    result = habakkuk(home, "run", LANG="C.UTF-8")
    assert result.stderr.strip() == "habakkuk: run: the prompt is empty"


def test_help_is_answered_before_any_language_is_chosen(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--help reads no config: argparse answers it (in English) before the choice."""
    import habakkuk.cli.language

    def refuse() -> str:
        raise AssertionError("the language was chosen for --help")

    monkeypatch.setattr(habakkuk.cli.language, "cli_language", refuse)
    with pytest.raises(SystemExit) as ended:
        entry.main(["--help"])
    assert ended.value.code == 0
    assert "usage: habakkuk" in capsys.readouterr().out


def test_the_plain_chat_speaks_the_locale_when_the_config_names_no_language(home: Path) -> None:
    """`habakkuk chat --plain` keeps the invocation's language (LANG) unless config.yaml
    names one: /help's summaries in French."""
    (home / "config.yaml").write_text(MOCK)
    french = habakkuk(home, "chat", "--plain", stdin="/help\n", LANG="fr_FR.UTF-8")
    assert french.returncode == 0, french.stderr
    assert "démarrer une nouvelle session" in french.stdout
    english = habakkuk(home, "chat", "--plain", stdin="/help\n", LANG="C.UTF-8")
    assert "start a fresh session" in english.stdout


def test_doctors_details_are_french(home: Path) -> None:
    """`habakkuk doctor` says its verdicts and its checks' details in the CLI's language;
    the checks' names (config, key a) and what comes from the system stay as they are."""
    (home / "config.yaml").write_text(
        "providers:\n  a: {type: anthropic, key_env: NOPE_KEY}\n"
        "agents:\n  main: {model: a/claude}\n"
    )
    result = habakkuk(home, "doctor", LANG="fr_FR.UTF-8")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("(1 fournisseur, 1 agent)"), lines[0]
    assert "ÉCHEC      key a: NOPE_KEY n'est pas défini" in lines
    assert f"ok         storage: fichiers SQLite dans {home}" in lines
    assert "ok         database control.db: intacte" in lines
    assert not any(line.endswith((" is not set", ": intact")) for line in lines)


def test_listing_counts_and_plugin_lines_are_french(home: Path) -> None:
    (home / "config.yaml").write_text(MOCK)
    notes = habakkuk(home, "memory", "list", LANG="fr_FR.UTF-8")
    assert notes.returncode == 0, notes.stderr
    assert notes.stderr.strip() == "0 note"
    plugins = habakkuk(home, "plugins", "list", LANG="fr_FR.UTF-8")
    assert plugins.stdout.strip() == "Aucun plugin installé (`habakkuk plugins install SOURCE`)."
    english = habakkuk(home, "memory", "list", LANG="C.UTF-8")
    assert english.stderr.strip() == "0 note(s)"
