"""A config, home or command line that is not what we expect: one line, exit 2, no traceback.

Run as a user runs it: `python -m habakkuk.cli` in a subprocess with its own home.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MOCK = (
    "providers:\n  mock:\n    type: mock\n    script:\n      - steps: ['Hello from the script.']\n"
)
WORKING = MOCK + "agents:\n  main:\n    model: mock/x\n"


def habakkuk(
    home: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI with HABAKKUK_HOME=home; stdin is a pipe (never a terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "habakkuk.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "HABAKKUK_HOME": str(home), **(env or {})},
        timeout=120,
    )


def one_line_error(result: subprocess.CompletedProcess[str], naming: object) -> str:
    """The single stderr line of a usage error; asserts exit 2 and no traceback."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("habakkuk: "), lines
    assert str(naming) in lines[0], lines
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    root.mkdir()
    return root


BROKEN_CONFIGS = {
    "empty": "",
    "comments only": "# providers:\n#   demo: {type: mock}\n",
    "a list": "- providers\n- agents\n",
}
# No command is the terminal app: it must fail before Textual takes the screen.
COMMANDS = [["run", "hi"], ["sessions", "list"], ["checkpoints"], []]


@pytest.mark.parametrize("text", BROKEN_CONFIGS.values(), ids=BROKEN_CONFIGS.keys())
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "tui")
def test_a_config_that_is_not_a_mapping_is_one_line_in_every_command(
    home: Path, text: str, argv: list[str]
) -> None:
    (home / "config.yaml").write_text(text)
    line = one_line_error(habakkuk(home, *argv), home / "config.yaml")
    assert ":1: " in line


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "tui")
def test_a_config_that_is_not_utf8_is_one_line_naming_the_line_and_byte(
    home: Path, argv: list[str]
) -> None:
    (home / "config.yaml").write_bytes(WORKING.encode() + "# café\n".encode("latin-1"))
    line = one_line_error(habakkuk(home, *argv), home / "config.yaml")
    offset = len(WORKING.encode()) + len("# caf")
    assert f"config.yaml:{WORKING.count(chr(10)) + 1}: not UTF-8 text" in line
    assert f"byte 0xe9 at offset {offset}" in line


@pytest.mark.parametrize("argv", [*COMMANDS, ["doctor"]], ids=lambda a: " ".join(a) or "tui")
def test_a_dotenv_that_is_not_utf8_is_one_line_naming_the_line(home: Path, argv: list[str]) -> None:
    (home / "config.yaml").write_text(WORKING)
    env = home / ".env"
    env.write_bytes(b"A=1\nB=\xff\xfe\n")
    env.chmod(0o600)
    result = habakkuk(home, *argv)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    said = result.stdout if argv == ["doctor"] else result.stderr
    assert f"{env}:2: not UTF-8 text (byte 0xff at offset 6)" in said.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [["run", "hi"], ["checkpoints"], []], ids=["run", "ckpt", "tui"])
def test_a_config_without_agents_names_the_file_and_the_key(home: Path, argv: list[str]) -> None:
    (home / "config.yaml").write_text(MOCK)
    line = one_line_error(habakkuk(home, *argv), home / "config.yaml")
    assert "agents: no agent is defined" in line and "None" not in line


def test_doctor_on_a_broken_config_fails_the_config_check_and_exits_2(home: Path) -> None:
    (home / "config.yaml").write_text("# nothing yet\n")
    result = habakkuk(home, "doctor")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stdout.startswith(f"FAIL  config: {home / 'config.yaml'}:1: ")


def test_doctor_fails_a_config_without_agents(home: Path) -> None:
    (home / "config.yaml").write_text(MOCK)
    result = habakkuk(home, "doctor")
    assert result.returncode == 1
    assert "FAIL  agents: " in result.stdout and "no agent is defined" in result.stdout


@pytest.mark.parametrize(
    "argv",
    [["run", "hi"], ["init"], ["sessions", "list"], ["channels"], []],
    ids=["run", "init", "sessions", "channels", "tui"],
)
def test_a_home_that_is_a_regular_file_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("oops")
    line = one_line_error(habakkuk(not_a_folder, *argv), not_a_folder)
    assert "is a file, not a folder" in line


def test_doctor_reports_a_home_that_is_a_regular_file(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("oops")
    result = habakkuk(not_a_folder, "doctor")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stdout.startswith("FAIL  config: ") and str(not_a_folder) in result.stdout


def test_a_home_that_is_a_dangling_link_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    link = tmp_path / "home"
    link.symlink_to(tmp_path / "unmounted" / "habakkuk")
    line = one_line_error(habakkuk(link, "init"), link)
    assert "missing" in line
    assert not (tmp_path / "unmounted").exists()


# -- run, checkpoints, sessions search, the mode flags ------------------------------------


@pytest.fixture
def working(home: Path) -> Path:
    (home / "config.yaml").write_text(WORKING)
    return home


@pytest.mark.parametrize("prompt", ["", "   "], ids=["empty", "blank"])
def test_run_refuses_an_empty_prompt(working: Path, prompt: str) -> None:
    one_line_error(habakkuk(working, "run", prompt), "prompt is empty")


def test_run_refuses_an_empty_prompt_on_standard_input(working: Path) -> None:
    one_line_error(habakkuk(working, "run", stdin="\n"), "prompt is empty")


@pytest.mark.parametrize("argv", [["run"], ["run", "-"]], ids=["no prompt", "dash"])
def test_run_reads_the_prompt_from_standard_input(working: Path, argv: list[str]) -> None:
    result = habakkuk(working, *argv, "--json", stdin="piped words\n")
    assert result.returncode == 0, result.stderr
    assert '"reply": "Hello from the script."' in result.stdout
    listed = habakkuk(working, "sessions", "search", "piped")
    assert listed.returncode == 0 and "[piped] words" in listed.stdout


def test_run_with_an_unknown_session_is_bad_usage(working: Path) -> None:
    one_line_error(habakkuk(working, "run", "--session", "ses_unknown", "x"), "ses_unknown")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["checkpoints", "-n", "-1"], "must be at least 1"),
        (["checkpoints", "-n", "0"], "must be at least 1"),
        (["sessions", "list", "--limit", "-5"], "must be at least 1"),
        (["--resume", "--serve"], "cannot be used together"),
        (["--smoke", "--serve"], "cannot be used together"),
        (["--serve", "run", "x"], "cannot be used with the run command"),
        (["--resume", "sessions", "list"], "cannot be used with the sessions command"),
    ],
)
def test_contradictory_or_negative_options_are_refused(
    working: Path, argv: list[str], says: str
) -> None:
    result = habakkuk(working, *argv)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert says in result.stderr.strip().splitlines()[-1]


def test_sessions_search_without_a_hit_says_so(working: Path) -> None:
    result = habakkuk(working, "sessions", "search", "zeppelin")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip() == "no messages match 'zeppelin'"
