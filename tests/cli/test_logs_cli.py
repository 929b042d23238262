"""`habakkuk logs`: records across the rotated files in order, --level, --since, --grep,
-n, bad lines skipped and counted, a bad option a one-line error, and -f following the
log across rotations (a real `habakkuk logs -f` process)."""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from habakkuk.cli.entry import main
from habakkuk.engine.exit_codes import EXIT_USAGE
from habakkuk.engine.home import Home
from habakkuk.engine.logfile import RotatingJsonHandler, log_path
from habakkuk.engine.logread import LogFilter, LogFollower
from tests.helpers import eventually_sync

REPO = Path(__file__).resolve().parents[2]


def _line(age: float, level: str, logger: str, msg: str, exc: str = "") -> str:
    moment = time.time() - age
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + ".000Z"
    data = {"time": stamp, "level": level, "logger": logger, "msg": msg, "pid": 1}
    if exc:
        data["exc"] = exc
    return json.dumps(data) + "\n"


@pytest.fixture
def written(home: Home) -> Home:
    """Records over two rotated copies and the live file, oldest first, with bad lines."""
    path = log_path(home.root)
    path.with_name("habakkuk.log.2").write_text(
        _line(3 * 86400, "ERROR", "habakkuk.old", "three days ago") + "not json\n"
    )
    path.with_name("habakkuk.log.1").write_text(
        _line(10 * 3600, "INFO", "habakkuk.jobs", "ten hours ago")
        + _line(5 * 3600, "WARNING", "habakkuk.channels", "telegram reconnecting at 3 am")
        + '{"time": "yesterday"}\n'
    )
    path.write_text(
        _line(1800, "ERROR", "habakkuk.turns", "turn failed", exc="Traceback\n  boom")
        + _line(60, "INFO", "aiohttp.access", "GET /healthz 200")
        + _line(1, "DEBUG", "habakkuk.router", "picked model")
    )
    return home


def test_every_record_across_the_rotated_files_in_order(
    written: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["logs"]) == 0
    out, err = capsys.readouterr()
    messages = [line.split(": ", 1)[1] for line in out.splitlines() if not line.startswith(" ")]
    assert messages == [
        "three days ago",
        "ten hours ago",
        "telegram reconnecting at 3 am",
        "turn failed",
        "GET /healthz 200",
        "picked model",
    ]
    assert " WARN  habakkuk.channels: telegram" in out
    assert "    Traceback\n      boom" in out
    assert "2 lines that are not log records were skipped" in err


def test_level_since_grep_and_n_filter(written: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", "--since", "8h", "--level", "warn"]) == 0
    out = capsys.readouterr().out
    assert "telegram reconnecting" in out and "turn failed" in out
    assert "ten hours ago" not in out and "GET /healthz" not in out

    assert main(["logs", "--grep", "HEALTHZ"]) == 0
    assert capsys.readouterr().out.count("\n") == 1

    assert main(["logs", "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert "GET /healthz" in out and "picked model" in out and "turn failed" not in out

    assert main(["logs", "--since", "2d", "--grep", "ago"]) == 0
    assert "ten hours ago" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--level", "loud"], "level loud: use debug, info, warn or error"),
        (["--since", "yesterday"], "yesterday is not an age"),
        (["-n", "-1"], "-n: -1 is not a number of records"),
    ],
)
def test_a_bad_option_is_one_line(
    written: Home, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    assert main(["logs", *args]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and err.count("\n") == 1


def test_no_log_yet_prints_nothing(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs"]) == 0
    assert capsys.readouterr() == ("", "")


def test_the_follower_crosses_rotations(home: Home) -> None:
    handler = RotatingJsonHandler(log_path(home.root), max_bytes=1_500, backups=50)
    log = logging.getLogger("test.follow")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    log.info("before the follower")
    follower = LogFollower(home.root, LogFilter(level=logging.INFO))
    follower.start()
    seen: list[str] = []
    for n in range(60):  # about 150 bytes a line: a rotation every ten
        log.info("record %d", n)
        if n % 7 == 0:
            seen += [r.message for r in follower.poll()]
    seen += [r.message for r in follower.poll()]
    follower.close()
    handler.close()
    assert seen == [f"record {n}" for n in range(60)]
    assert len(list(home.root.glob("habakkuk.log.*"))) > 3


def test_logs_follow_prints_across_rotations(home: Home) -> None:
    handler = RotatingJsonHandler(log_path(home.root), max_bytes=1_500, backups=50)
    log = logging.getLogger("test.follow.cli")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    log.info("already there")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HABAKKUK_HOME": str(home.root)}
    process = subprocess.Popen(
        [sys.executable, "-m", "habakkuk.cli", "logs", "-f", "-n", "5", "--grep", "record"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    got: list[str] = []
    try:
        log.info("record first")
        eventually_sync(lambda: _drain(lines, got) and any("first" in x for x in got), what="-f")
        for n in range(40):
            log.info("record %d", n)
        eventually_sync(
            lambda: _drain(lines, got) and any(x.endswith("record 39\n") for x in got),
            what="the last record after rotations",
        )
    finally:
        process.terminate()
        process.communicate(timeout=30)  # and its pipes closed
        handler.close()
    messages = [x.split(": ", 1)[1].strip() for x in got]
    assert messages == ["record first", *(f"record {n}" for n in range(40))]
    assert len(list(home.root.glob("habakkuk.log.*"))) > 2


def _drain(lines: queue.Queue[str], into: list[str]) -> bool:
    while True:
        try:
            into.append(lines.get_nowait())
        except queue.Empty:
            return True
