"""habakkuk.log (engine/logfile.py): JSON lines, redacted, rotated by size under a lock
file while three real processes append at once (no line lost or torn), a writer whose
file was renamed reopens the new one; `logging:` config validation."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from habakkuk.engine.config import load_config
from habakkuk.engine.errors import ConfigError
from habakkuk.engine.home import Home
from habakkuk.engine.logfile import JsonFormatter, RotatingJsonHandler, log_path
from habakkuk.engine.logread import log_files
from habakkuk.engine.logsetup import console_logging
from habakkuk.engine.redact import Redactor

REPO = Path(__file__).resolve().parents[2]
WRITER = textwrap.dedent(
    """
    import logging, sys
    from pathlib import Path
    from habakkuk.engine.logfile import RotatingJsonHandler

    path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    handler = RotatingJsonHandler(path, max_bytes=16_000, backups=400)
    log = logging.getLogger(name)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    sys.stdin.readline()  # all three start writing together
    padding = "x" * 150
    for n in range(count):
        log.info("record %s %d %s", name, n, padding)
    print(handler.dropped, flush=True)
    """
)


def _logger(handler: logging.Handler, name: str) -> logging.Logger:
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.DEBUG)
    return log


def _lines(root: Path) -> list[str]:
    return [line for p in log_files(root) for line in p.read_text().splitlines()]


def test_three_processes_rotating_at_once_lose_and_tear_no_line(tmp_path: Path) -> None:
    path = log_path(tmp_path)
    count = 1500
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{i}", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        for i in range(3)
    ]
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    dropped = [writer.communicate(timeout=120)[0].strip() for writer in writers]
    assert [w.returncode for w in writers] == [0, 0, 0]
    assert dropped == ["0", "0", "0"]

    seen: dict[str, set[int]] = {"w0": set(), "w1": set(), "w2": set()}
    total = 0
    for line in _lines(tmp_path):
        record = json.loads(line)  # every line parses: none torn
        _, name, number, _ = record["msg"].split(" ")
        assert int(number) not in seen[name], "a line written twice"
        seen[name].add(int(number))
        total += 1
    assert total == 3 * count
    assert all(numbers == set(range(count)) for numbers in seen.values())
    rotated = [p for p in log_files(tmp_path) if p != path]
    assert len(rotated) > 10, "the test must rotate many times while the three write"
    # A writer that had not yet seen a rotation, or checked the size just before another
    # wrote, adds its line past the limit: a few lines at most (three writers).
    longest = max(len(x) + 1 for x in _lines(tmp_path))
    assert max(p.stat().st_size for p in rotated) <= 16_000 + 4 * longest
    assert (path.stat().st_mode & 0o777) == 0o600


def test_rotation_keeps_only_the_configured_copies(tmp_path: Path) -> None:
    handler = RotatingJsonHandler(log_path(tmp_path), max_bytes=2_000, backups=2)
    log = _logger(handler, "test.copies")
    for n in range(200):
        log.info("line %d %s", n, "y" * 40)
    handler.close()
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("habakkuk.log"))
    assert names == ["habakkuk.log", "habakkuk.log.1", "habakkuk.log.2", "habakkuk.log.lock"]
    last = json.loads(log_path(tmp_path).read_text().splitlines()[-1])
    assert last["msg"].startswith("line 199 ")


def test_a_writer_whose_file_was_renamed_reopens_the_new_one(tmp_path: Path) -> None:
    path = log_path(tmp_path)
    handler = RotatingJsonHandler(path, max_bytes=10_000_000, backups=3)
    log = _logger(handler, "test.renamed")
    log.warning("before")
    os.replace(path, path.with_name("habakkuk.log.1"))  # another process rotated it
    log.warning("after")
    handler.close()
    assert [json.loads(x)["msg"] for x in path.read_text().splitlines()] == ["after"]


def test_records_are_json_with_tracebacks_and_redacted(tmp_path: Path) -> None:
    handler = RotatingJsonHandler(log_path(tmp_path), max_bytes=10_000_000, backups=1)
    handler.setFormatter(JsonFormatter(Redactor(["the-secret-value"])))
    log = _logger(handler, "test.json")
    try:
        raise RuntimeError("call failed with key the-secret-value")
    except RuntimeError:
        log.exception("provider said %s", "Bearer abc123def456ghi")
    log.info("with extra", extra={"job": "j1", "token_used": "the-secret-value"})
    handler.close()
    text = log_path(tmp_path).read_text()
    assert "the-secret-value" not in text and "abc123def456ghi" not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["level"] == "ERROR" and first["logger"] == "test.json"
    assert first["time"].endswith("Z") and first["pid"] == os.getpid()
    assert "RuntimeError" in first["exc"] and "[REDACTED]" in first["exc"]
    assert second["job"] == "j1" and second["token_used"] == "[REDACTED]"


def test_a_folder_gone_drops_the_line_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = RotatingJsonHandler(tmp_path / "gone" / "habakkuk.log", max_bytes=1000, backups=1)
    _logger(handler, "test.gone").error("nowhere to go")
    assert handler.dropped == 1
    assert capsys.readouterr().err == ""


def test_logging_config_is_strict(tmp_path: Path) -> None:
    home = Home(tmp_path)
    base = "agents: {main: {model: mock/m}}\nproviders: {mock: {type: mock}}\n"
    home.config_path.write_text(base + "logging: {max_mb: 5, backups: 2, level: warn}\n")
    config = load_config(home)
    assert (config.logging.max_bytes, config.logging.backups) == (5 * 1024 * 1024, 2)
    assert config.logging.level_number == logging.WARNING
    for bad, words in (
        ("logging: {max_mb: 0}", "logging.max_mb: must be > 0"),
        ("logging: {backups: -1}", "logging.backups"),
        ("logging: {level: loud}", "logging.level"),
        ("logging: {rotate: daily}", "rotate"),
    ):
        home.config_path.write_text(base + bad + "\n")
        with pytest.raises(ConfigError) as caught:
            load_config(home)
        assert words in str(caught.value)
        assert "config.yaml:3" in str(caught.value)


def test_the_last_runtime_to_leave_takes_the_handler_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from habakkuk.engine.config import Config
    from habakkuk.engine.logsetup import install_logging, uninstall_logging

    root = logging.getLogger()
    before = root.level
    first = install_logging(tmp_path, Config(), {})
    second = install_logging(tmp_path, Config(), {})
    assert first is second
    # Nothing reaches the terminal (the app's screen): Python's last-resort handler,
    # which prints warnings to stderr when the root has no handler, is not used.
    logging.getLogger("habakkuk.test").warning("a warning for the file only")
    assert capsys.readouterr().err == ""
    assert "a warning for the file only" in log_path(tmp_path).read_text()
    assert [h for h in root.handlers if isinstance(h, RotatingJsonHandler)] == [first]
    assert root.level == logging.INFO
    uninstall_logging(first)
    assert first in root.handlers  # the other runtime still logs
    uninstall_logging(second)
    assert first not in root.handlers
    assert root.level == before


def test_console_logging_writes_to_the_stderr_of_the_moment_and_ends_with_its_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = logging.getLogger()
    level = root.level
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    with console_logging() as handler:
        first.close()  # a test's capture ends while the command still runs
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)
        logging.getLogger("habakkuk.test").warning("after the swap")
        said = second.getvalue()
        assert "Logging error" not in said  # as a handler bound to the closed stream says
        assert said.endswith("WARNING after the swap\n"), said
    assert handler not in root.handlers and root.level == level
