"""A database URL shown to people never carries its password, wherever libpq reads one."""

from __future__ import annotations

import sys

import pytest

import habakkuk.engine
from habakkuk.cli import main
from habakkuk.engine.db_url import redact
from habakkuk.engine.exit_codes import EXIT_USAGE
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config


@pytest.mark.parametrize(
    "url,shown",
    [
        ("postgresql://bob:hunter2@db:5432/team", "postgresql://bob:***@db:5432/team"),
        ("postgresql://:hunter2@db/team", "postgresql://:***@db/team"),
        ("postgresql://bob:hun@ter2@db/team", "postgresql://bob:***@db/team"),
        ("postgresql://bob@db/team?password=hunter2", "postgresql://bob@db/team?password=***"),
        (
            "postgresql://db/team?sslmode=require&sslpassword=hunter2",
            "postgresql://db/team?sslmode=require&sslpassword=***",
        ),
        ("postgresql://db/team", "postgresql://db/team"),
    ],
)
def test_the_password_is_hidden_after_the_user_and_in_the_query(url: str, shown: str) -> None:
    assert redact(url) == shown


@pytest.mark.parametrize("argv", [["storage", "status"], ["doctor"], ["run", "hi"]])
def test_a_missing_driver_is_one_line_naming_the_install_command(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    write_config(
        mock_config("- text: hi") + "\nstorage:\n  url: postgresql://bob:pw@127.0.0.1:9/team\n"
    )
    # As when psycopg (or the libpq it loads) is not installed.
    monkeypatch.setitem(sys.modules, "habakkuk.engine.pg", None)
    monkeypatch.delattr(habakkuk.engine, "pg", raising=False)
    code = main(argv)
    err = capsys.readouterr()
    text = err.err + err.out
    assert "Traceback" not in text and "pw@" not in text
    assert "pip install 'habakkuk[postgres]'" in text, text
    if argv != ["doctor"]:
        assert code == EXIT_USAGE and len(err.err.strip().splitlines()) == 1, err.err
