"""The storage setting: chosen once at start, never a quiet fall back to SQLite."""

from __future__ import annotations

import pytest

from habakkuk.cli import main
from habakkuk.engine.exit_codes import EXIT_USAGE
from habakkuk.engine.home import Home
from tests.conftest import WriteConfig, mock_config

UNREACHABLE = "postgresql://bob:hunter2@127.0.0.1:9/team"


@pytest.mark.parametrize("how", ["config", "env"])
def test_a_configured_server_that_cannot_be_reached_is_one_line_and_exit_2(
    home: Home,
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    config = mock_config("- text: hi")
    if how == "config":
        config += f"\nstorage:\n  url: {UNREACHABLE}\n"
    else:
        monkeypatch.setenv("HABAKKUK_DATABASE_URL", UNREACHABLE)
    write_config(config)
    assert main(["run", "hi"]) == EXIT_USAGE
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "cannot connect to PostgreSQL" in lines[0] and "127.0.0.1:9" in lines[0]
    assert "hunter2" not in err
    # Nothing was written to SQLite files meanwhile.
    assert not home.db_path("control").exists()


def test_a_url_that_is_not_postgresql_names_the_setting(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config("- text: hi") + "\nstorage:\n  url: mysql://bob@db/team\n")
    assert main(["run", "hi"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert "storage.url" in err and "not a PostgreSQL URL" in err, err


def test_without_the_setting_the_home_is_sqlite_files(
    home: Home, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(mock_config("- text: hi"))
    assert main(["run", "hi"]) == 0
    assert home.db_path("control").exists() and home.db_path("transcripts").exists()
