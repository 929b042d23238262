"""The built-in catalog and `habakkuk mcp add` (config edited as text)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from habakkuk.cli import main
from habakkuk.engine.config import load_config, parse_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.protocols.mcp.catalog import (
    add_server,
    edit_config_text,
    fill,
    load_catalog,
    search,
)

BASE = """\
# my config: keep this comment
providers:
  mock:
    type: mock   # offline
agents:
  main:
    model: mock/x
"""


def test_every_catalog_entry_becomes_a_valid_server(home: Home) -> None:
    entries = load_catalog()
    assert len(entries) >= 25
    names = [e.name for e in entries]
    assert len(set(names)) == len(names)
    for entry in entries:
        assert entry.publisher and entry.description
        server = fill(entry, {p: "/tmp/x" for p in entry.params})
        text = edit_config_text(BASE, entry.name.replace(".", "-"), server)
        config = parse_config(text, home.config_path, home)
        loaded = config.mcp_servers[entry.name]
        for var in entry.vars:  # every variable it needs is named by the entry
            assert var in loaded.env.values() or var in loaded.headers.values()
        if loaded.command is not None:
            assert loaded.command in entry.programs
    archived = {e.name for e in entries if e.archived}
    assert {"sqlite", "postgres", "puppeteer"} <= archived
    assert "filesystem" not in archived


def test_catalog_search_matches_all_words() -> None:
    assert [e.name for e in search("linear")] == ["linear"]
    assert {e.name for e in search("web search")} >= {"brave-search", "exa", "tavily"}
    assert search("no such thing at all") == []


def test_add_appends_after_the_last_entry_and_keeps_comments(home: Home) -> None:
    text = BASE + (
        "mcp_servers:\n"
        "    # indented four, with a comment\n"
        "    time:\n"
        "        command: uvx\n"
        "        args: [mcp-server-time]   # the clock\n"
        "timezone: UTC  # last line\n"
    )
    home.config_path.write_text(text, encoding="utf-8")
    entry, name = add_server(home, "sqlite", {"db": "~/data/app.db"})
    assert (entry.name, name) == ("sqlite", "sqlite")
    new = home.config_path.read_text(encoding="utf-8")
    assert home.config_path.with_name("config.yaml.bak").read_text(encoding="utf-8") == text
    for line in text.splitlines():
        assert line in new  # nothing of the old file is lost or reformatted
    config = load_config(home)
    assert list(config.mcp_servers) == ["time", "sqlite"]
    assert config.mcp_servers["sqlite"].args[-1] == os.path.expanduser("~/data/app.db")
    assert config.timezone == "UTC"
    assert oct(home.config_path.stat().st_mode & 0o777) == "0o600"


def test_add_without_a_section_and_with_a_flow_style_one(home: Home) -> None:
    home.config_path.write_text(BASE, encoding="utf-8")
    add_server(home, "time", {}, name="clock")
    assert list(load_config(home).mcp_servers) == ["clock"]
    assert home.config_path.read_text(encoding="utf-8").startswith(BASE)

    home.config_path.write_text(BASE + "mcp_servers: {}   # none yet\ntimezone: UTC\n")
    add_server(home, "linear", {})
    config = load_config(home)
    assert config.mcp_servers["linear"].auth == "oauth"
    assert config.timezone == "UTC"


def test_add_refuses_duplicates_bad_params_and_keeps_the_file(home: Home) -> None:
    text = BASE + "mcp_servers:\n  time:\n    command: uvx\n"
    home.config_path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="exists already"):
        add_server(home, "time", {})
    with pytest.raises(ConfigError, match=r"needs dir=<"):
        add_server(home, "filesystem", {})
    with pytest.raises(ConfigError, match="unknown parameter 'dri'"):
        add_server(home, "filesystem", {"dri": "x"})
    with pytest.raises(ConfigError, match="did you mean linear"):
        add_server(home, "lienar", {})
    assert home.config_path.read_text(encoding="utf-8") == text
    assert not home.config_path.with_name("config.yaml.bak").exists()


def test_an_edit_that_would_not_load_is_not_written(home: Home) -> None:
    text = BASE + "bogus_key: 1\n"
    home.config_path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="would not load"):
        add_server(home, "time", {})
    assert home.config_path.read_text(encoding="utf-8") == text


def test_cli_add_says_what_to_do_next(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    home.config_path.write_text(BASE, encoding="utf-8")
    assert main(["mcp", "add", "brave-search", "--name", "brave"]) == 0
    out = capsys.readouterr().out
    assert "BRAVE_API_KEY=" in out
    assert "its tools reach agent main (toolset mcp:brave)" in out  # main is on the default
    home.config_path.write_text(BASE + "    toolsets: [core]\n", encoding="utf-8")
    assert main(["mcp", "add", "time"]) == 0
    assert 'no agent gets its tools: add "mcp:time" to an agent\'s toolsets' in (
        capsys.readouterr().out
    )
    assert main(["mcp", "add", "nothing-like-this"]) == 2
    assert "is not in the catalog" in capsys.readouterr().err
    assert main(["mcp", "catalog", "notion"]) == 0
    assert "https://mcp.notion.com/mcp" in capsys.readouterr().out


def test_cli_add_counts_a_key_kept_in_a_secret_manager_as_set(
    home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    key = folder / "brave"
    key.write_text("brave-key-from-the-files-source\n", encoding="utf-8")
    key.chmod(0o600)
    secrets = (
        f"secrets:\n  sources: {{files: {{type: file, dir: {folder}}}}}\n"
        "  refs: {BRAVE_API_KEY: 'files:brave'}\n"
    )
    home.config_path.write_text(BASE + secrets, encoding="utf-8")
    assert main(["mcp", "add", "brave-search", "--name", "brave"]) == 0
    out = capsys.readouterr().out
    assert "BRAVE_API_KEY=" not in out and "put these in" not in out
    assert "brave-key-from-the-files-source" not in out
